"""Records (DSH-3): browse memory records with filters and the API's cursor; read, edit, verify or delete one."""

from __future__ import annotations

import streamlit as st

from dashboard import components, data, forms
from dashboard.data import records, shapes
from shared.client import ApiError

components.page_header("Records", "What the memory holds: every store's records, one page at a time.")
st.info("Every read on this page — the list, a record, its history — is recorded in the organisation's audit "
        "trail under your name (`memory.read`).", icon=":material/visibility:")
client = data.client()
org = data.org_id()
assert org is not None  # streamlit_app shows pages only once an organisation is chosen
tz = data.org_timezone(client, org)
stores = data.indexes(client)
store_names = data.names(stores)

notice = st.session_state.pop("records_notice", None)
if notice:
    st.success(notice, icon=":material/check_circle:")

with st.form("records_filters", border=True):
    top = st.columns([2, 2, 1, 2])
    store = top[0].selectbox("Store", [None, *store_names], key="records_store",
                             format_func=lambda i: "every store" if i is None else f"{store_names[i]} · {i}")
    types = top[1].multiselect("Types", records.KNOWN_TYPES, key="records_types", accept_new_options=True,
                               placeholder="any type (type another name to add it)")
    owner = top[2].selectbox("Owner", forms.OWNERS, key="records_owner")
    person = top[3].text_input("Person id", key="records_person", placeholder="with owner = one person",
                               help="The id your application uses for her.")
    middle = st.columns(4)
    q = middle[0].text_input("Text search", key="records_q", placeholder="words in the text")
    tags = middle[1].text_input("Tags", key="records_tags", placeholder="docker, billing (all must match)")
    labels = middle[2].text_input("Labels", key="records_labels", placeholder="team:support, lang:nl")
    metadata = middle[3].text_input("Metadata", key="records_metadata", placeholder="source:crm")
    bottom = st.columns([2, 1, 1, 1], vertical_alignment="bottom")
    min_confidence = bottom[0].slider("Minimum effective confidence", 0.0, 1.0, 0.0, 0.05, key="records_min_conf",
                                      help="Compared with the decayed value the API computes; 0 does not filter.")
    include_expired = bottom[1].checkbox("Include expired", key="records_expired")
    include_replaced = bottom[2].checkbox("Include replaced", key="records_replaced")
    page_size = bottom[3].selectbox("Records per page", [25, 50, 100, 200], index=1, key="records_page_size")
    st.form_submit_button("Apply filters", key="records_apply", type="primary", icon=":material/filter_alt:")

try:
    filters = forms.memory_filter(
        index_id=store, types=list(types), person=person if owner == "one person" else "", tags=tags, labels=labels,
        metadata=metadata, q=q, min_confidence=float(min_confidence), include_expired=include_expired,
        include_replaced=include_replaced, shared=owner == "shared only")
    forms.checked_filter(filters)
except forms.FilterError as err:
    st.error(f"{err}\n\nCode `invalid_filter`", icon=":material/error:")
    st.stop()
except ValueError as err:
    st.error(f"{err} Write filters as `name:value`, separated by commas.\n\nCode `invalid_filter`",
             icon=":material/error:")
    st.stop()
if owner == "one person" and not person.strip():
    st.warning("Owner is *one person* but no person id is given; showing everyone's records.",
               icon=":material/person_search:")

# A new filter starts again at the first page.
cursors = components.cursor_stack("records_cursors", (filters, page_size))
try:
    shown, next_cursor = records.memory_page(client, filters, cursors[-1], int(page_size))
    matching = records.matching_records(client, filters)
except ApiError as err:
    components.api_error(err, "list the records")
    st.stop()
except ValueError as err:
    st.error(f"{err}\n\nCode `invalid_filter`", icon=":material/error:")
    st.stop()
frame = records.records_frame(shown, tz, store_names)
span = records.span_shown(len(cursors), int(page_size), len(shown))
components.pager("records", cursors, next_cursor,
                 caption=f"{records.matching_words(matching)} · {span}, newest first · times in {tz}")

with st.expander("Export these records", icon=":material/download:"):
    st.caption("Every record of this filter (not only this page), as a file for analysts; the export is audited.")
    fmt = st.radio("Format", list(records.EXPORT_MEDIA), horizontal=True, key="records_export_format")
    if st.button("Prepare the file", key="records_export_prepare", icon=":material/description:"):
        try:
            st.session_state["records_export"] = (fmt, records.export_file(client, filters, fmt))
        except ApiError as err:
            components.api_error(err, "export the records")
        except ValueError as err:
            st.error(f"{err}\n\nCode `invalid_filter`", icon=":material/error:")
    prepared = st.session_state.get("records_export")
    if prepared:
        st.download_button(f"Download records.{prepared[0]} ({len(prepared[1]):,} bytes)", prepared[1],
                           file_name=f"records.{prepared[0]}", mime=records.EXPORT_MEDIA[prepared[0]],
                           key="records_export_download", icon=":material/download:")

if frame.is_empty():
    if stores.is_empty():
        components.empty_state("No records yet: records live in an index, and this organisation has none. Create "
                               "an index first.", ("app_pages/indexes.py", "Create an index", ":material/add:"),
                               key="records_go_indexes")
    elif len(cursors) == 1 and records.organisation_total(client) == 0:
        components.empty_state("No records yet. Applications write them with a key (an administrator can read and "
                               "change them here); create a key for your application.",
                               ("app_pages/keys.py", "Create a key", ":material/key:"), key="records_go_keys")
    else:
        components.empty_state("No records match these filters — pick another store or clear a filter.")
    st.stop()

components.forget_selection("records_table", (filters, page_size, tuple(cursors)))
selected = components.records_table(frame, key="records_table")
if st.session_state.pop("records_forget_open", False):
    st.session_state["records_open_id"] = ""
typed = st.text_input("Open a record by id", key="records_open_id", placeholder="mem_…",
                      help="Or select a row above; an id from the audit log works too.").strip()
if not typed and selected is None:
    st.caption("Select a row (or type an id) to see the record, its history, and to edit, verify or delete it.")
    st.stop()

record_id = typed if typed or selected is None else str(selected["id"])
try:
    record = records.memory_record(client, record_id)
    history = records.memory_history(client, record_id)
except ApiError as err:
    components.api_error(err, f"read record {record_id}")
    st.stop()

st.divider()
st.subheader(f"Record `{record.id}`")
components.record_summary(record, store_names.get(record.index_id, record.index_id), tz)
st.markdown(f"**Written by** {records.written_by(client, record, history)}")

view, timeline, edit = st.tabs(["Every field", "History", "Edit, verify, delete"])
with view:
    document = records.record_document(record)
    components.fields_table(shapes.fields_frame(document), key="records_fields")
    components.raw_json(document)
    st.markdown("**Provenance**")
    threads = records.thread_ids(record.provenance)
    if record.provenance:
        components.fields_table(shapes.fields_frame(record.provenance), key="records_provenance")
        for thread_id in threads:
            if st.button(f"Open thread {thread_id}", key=f"records_thread_{thread_id}", icon=":material/forum:"):
                st.session_state["threads_open_id"] = thread_id
                st.switch_page("app_pages/threads.py")
    else:
        st.caption("No provenance: the record was written outside a turn (API, import or administrator).")
    if record.contested_with:
        st.markdown(f"**Contested** with `{record.contested_with}`")
        try:
            partner = records.memory_record(client, record.contested_with)
            st.markdown(f"> {partner.text}")
            st.caption(f"effective confidence {partner.effective_confidence:.2f} · stored {partner.confidence:.2f} · "
                       f"owner {partner.subject or data.SHARED}")
        except ApiError as err:
            components.api_error(err, "read the contested partner")
with timeline:
    components.history_timeline(records.history_frame(history, tz), key="records_history")
    for label, other in (("Replaces", history.replaces), ("Replaced by", history.replaced_by)):
        if other is not None:
            st.markdown(f"**{label}** `{other.id}`: {other.text}")

with edit:
    version = f"{record.id}_{record.version}"  # a new version starts the form from the API's values
    with st.form("records_edit"):
        new_text = st.text_area("Text", record.text, key=f"records_edit_text_{version}")
        row = st.columns(3)
        new_confidence = row[0].number_input("Stored confidence", 0.0, 1.0, float(record.confidence), 0.05,
                                             key=f"records_edit_confidence_{version}")
        new_priority = row[1].selectbox("Priority", ["low", "normal", "high", "critical"],
                                        index=["low", "normal", "high", "critical"].index(record.priority),
                                        key=f"records_edit_priority_{version}")
        new_tags = row[2].text_input("Tags", ", ".join(record.tags), key=f"records_edit_tags_{version}")
        meta = st.columns(2)
        with meta[0]:
            new_metadata = components.pairs_editor(
                "Metadata", shapes.pairs_frame(record.metadata), key=f"records_edit_metadata_{version}",
                help="Your application's own fields. A value that reads as JSON (`5`, `true`, `[\"a\"]`) is stored "
                     "as such; anything else as text. Saving replaces the metadata whole.")
        with meta[1]:
            new_labels = components.pairs_editor(
                "Labels", shapes.pairs_frame(record.labels), key=f"records_edit_labels_{version}",
                help="Who may see the record, by the policy's label rules: a text, or a list such as "
                     "`[\"payroll\", \"hr\"]`. Saving replaces the labels whole.")
        save = st.form_submit_button("Save changes", key="records_edit_save", type="primary", icon=":material/save:")
    components.raw_json({"metadata": record.metadata, "labels": record.labels}, "Metadata and labels as JSON")
    if save:
        try:
            changes = forms.record_changes(
                record, text=new_text, confidence=float(new_confidence), priority=str(new_priority),
                tags=None if new_tags == ", ".join(record.tags) else new_tags,
                metadata=shapes.pairs_value(new_metadata, "metadata")
                if components.editor_changed(f"records_edit_metadata_{version}") else None,
                labels=shapes.pairs_value(new_labels, "label")
                if components.editor_changed(f"records_edit_labels_{version}") else None)
        except ValueError as err:
            st.error(f"{err}\n\nCode `invalid_value`", icon=":material/error:")
        else:
            if not changes:
                st.info("Nothing changed.", icon=":material/info:")
            else:
                try:
                    saved = records.edit_record(client, record.id, changes)
                except ApiError as err:
                    components.api_error(err, "save the record")
                else:
                    st.session_state["records_notice"] = (
                        f"Saved {', '.join(sorted(changes))} of `{saved.id}`: now version {saved.version}.")
                    st.rerun()

    actions = st.columns([1, 1, 4])
    if actions[0].button("Verify", key="records_verify", icon=":material/verified:", disabled=record.verified,
                         help="Mark the record checked by an administrator"):
        try:
            records.verify_record(client, record.id)
        except ApiError as err:
            components.api_error(err, "verify the record")
        else:
            st.session_state["records_notice"] = f"Record `{record.id}` is verified."
            st.rerun()
    if actions[1].button("Delete…", key="records_delete", icon=":material/delete:"):
        st.session_state["records_confirm_delete"] = record.id
    if st.session_state.get("records_confirm_delete") == record.id:
        st.warning(f"Delete record `{record.id}` (“{record.text[:80]}”)? This cannot be undone.",
                   icon=":material/warning:")
        yes, no, _ = st.columns([1, 1, 4])
        if yes.button("Yes, delete", key="records_delete_confirm", type="primary"):
            st.session_state.pop("records_confirm_delete", None)
            try:
                records.delete_record(client, record.id)
            except ApiError as err:
                components.api_error(err, "delete the record")
            else:
                st.session_state["records_notice"] = f"Record `{record.id}` is deleted."
                st.session_state["records_forget_open"] = True
                st.rerun()
        if no.button("Cancel", key="records_delete_cancel"):
            st.session_state.pop("records_confirm_delete", None)
            st.rerun()
