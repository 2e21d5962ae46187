"""People: look up one person by the id applications use for her; see what the organisation holds of her, try her
view with a subject token, and erase her."""

from __future__ import annotations

import streamlit as st

from dashboard import components, data
from dashboard.data import people, previewer, shapes
from shared.client import ApiError

components.page_header(
    "People",
    "Everything the organisation holds of one person — her records, threads and notes — and her erasure.")
st.info("Looking a person up reads her records, threads and notes; each read is recorded in the audit trail under "
        "your name.", icon=":material/visibility:")
client = data.client()
org = data.org_id()
assert org is not None  # streamlit_app shows pages only once an organisation is chosen
tz = data.org_timezone(client, org)

erased = st.session_state.get("people_erased")
if erased is not None:
    who, counts = erased
    st.success(f"{who} is erased. What the API removed:", icon=":material/check_circle:")
    st.dataframe(counts, hide_index=True, key="people_erased_counts",
                 column_config={"removed": st.column_config.TextColumn("removed", width="large"),
                                "count": st.column_config.NumberColumn("count"), "name": None})
    st.caption("Shared records stay. The audit trail names her only by a keyed hash of her id.")

with st.form("people_lookup", border=True):
    row = st.columns([4, 1], vertical_alignment="bottom")
    typed = row[0].text_input("Person id", key="people_id", placeholder="the id your application uses for her",
                              help="Exactly as applications send it (`X-Core-Subject`, a subject token, `user`).")
    looked = row[1].form_submit_button("Look up", key="people_lookup_submit", type="primary",
                                       icon=":material/person_search:")
if looked:
    st.session_state["people_person"] = typed.strip()
    st.session_state.pop("people_erased", None)
    st.session_state.pop("people_token", None)
    st.rerun()
person: str = st.session_state.get("people_person") or ""
if not person:
    components.empty_state("Type a person's id and press Look up.")
    st.stop()

store_names = data.names(data.indexes(client))
try:
    held = people.holdings(client, person, tz, store_names)
except ApiError as err:
    components.api_error(err, f"look up {person}")
    st.stop()

st.subheader(f"What the organisation holds of {person}")
cols = st.columns(4)
cols[0].metric("Memory records", held.total, help="Her own active, unexpired records (shared ones are nobody's).")
cols[1].metric("Threads", held.threads.threads)
messages = held.threads.messages
cols[2].metric("Messages in her threads", messages.user + messages.assistant + messages.developer)
cols[3].metric("Notes she wrote", f"{held.notes.height}{'+' if held.more_notes else ''}",
               help="The newest notes she wrote on messages (the first page of a search by note writer).")
if held.total == 0 and held.threads.threads == 0 and held.notes.is_empty():
    components.empty_state(f"Nothing is held of {person}: no records, threads or notes name her. Check the id is "
                           "the one your application sends.")
else:
    records_tab, threads_tab, notes_tab = st.tabs(["Records", "Threads", "Notes"], key="people_tabs")
    with records_tab:
        if held.records.is_empty():
            st.caption("No records of hers.")
        else:
            components.record_counts_table(held.records, key="people_records")
            if st.button("Open her records", key="people_to_records", icon=":material/database:"):
                st.session_state["records_owner"] = "one person"
                st.session_state["records_person"] = person
                st.switch_page("app_pages/records.py")
    with threads_tab:
        if held.thread_list.is_empty():
            st.caption("No threads of hers.")
        else:
            st.dataframe(held.thread_list, hide_index=True, key="people_threads", column_config={
                "id": st.column_config.TextColumn("thread", width=250),
                "created_at": st.column_config.DatetimeColumn("opened", format="YYYY-MM-DD HH:mm"),
                "updated_at": st.column_config.DatetimeColumn("updated", format="YYYY-MM-DD HH:mm")})
            if held.more_threads:
                st.caption(f"The newest {people.THREADS_SHOWN} of {held.threads.threads}.")
    with notes_tab:
        if held.notes.is_empty():
            st.caption("No notes she wrote.")
        else:
            st.dataframe(held.notes, hide_index=True, key="people_notes", column_config={
                "at": st.column_config.DatetimeColumn("message at", format="YYYY-MM-DD HH:mm"),
                "message": st.column_config.TextColumn("message", width="large")})
            st.caption(f"Searched back to {held.notes_searched_to or 'the start'}"
                       + (" — older notes: search on the Threads page." if held.more_notes else "."))

st.subheader("Try her view")
keys = previewer.active_keys(client, org)
if keys.is_empty():
    components.empty_state("No active key: a subject token acts with a key's capabilities for one person.",
                           ("app_pages/keys.py", "Create a key", ":material/key:"), key="people_go_keys")
else:
    st.caption("A subject token is a credential for one person, bound to a key: with it an application (or you, "
               "testing) sees exactly what that key lets her see.")
    key_names = data.names(keys)
    with st.form("people_token_form", border=True):
        row = st.columns([3, 1])
        key_id = row[0].selectbox("Key", list(key_names), key="people_token_key",
                                  format_func=lambda k: f"{key_names[k]} · {k}")
        minutes = row[1].number_input("Valid for (minutes)", 1, 24 * 60, 60, key="people_token_minutes")
        attribute_rows = components.pairs_editor(
            "Her attributes", shapes.pairs_frame({}), key="people_token_attributes",
            help="What the policy's department rules read, such as department = payroll, hr (comma-separated).")
        mint = st.form_submit_button("Create a subject token", key="people_token_submit", icon=":material/badge:")
    if mint:
        try:
            token = people.subject_token(client, org, str(key_id), person, shapes.attributes_value(attribute_rows),
                                         int(minutes))
        except ValueError as exc:
            st.error(f"{exc}\n\nCode `invalid_value`", icon=":material/error:")
        except ApiError as err:
            components.api_error(err, "create the subject token")
        else:
            st.session_state["people_token"] = (person, token.token, token.expires_at)
    made = st.session_state.get("people_token")
    if made is not None and made[0] == person:
        st.code(made[1], language=None)
        st.caption(f"Valid until {data.local_time(made[2], tz)} ({tz}). Send it as `Authorization: Bearer <token>`; "
                   "its creation is recorded in the audit trail.")

st.subheader(f"Erase {person}")
with st.container(border=True, key="people_erase_box"):
    st.warning(f"Erasing removes everything of {person}: her records of every type, her threads, her messages in "
               "other threads, every note she wrote, and her id in labels. It cannot be undone.",
               icon=":material/warning:")
    confirm = st.text_input(f"Type {person} to confirm", key=f"people_confirm_{person}")
    if st.button("Erase this person", key="people_erase", type="primary", icon=":material/person_remove:",
                 disabled=confirm.strip() != person):
        try:
            counts = people.erase(client, person)
        except ApiError as err:
            components.api_error(err, f"erase {person}")
        else:
            st.session_state["people_erased"] = (person, counts)
            st.session_state.pop("people_person", None)
            st.session_state.pop("people_token", None)
            st.rerun()
