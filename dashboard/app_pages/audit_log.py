"""Audit log (DSH-8): filter the trail by time, actor, action, object and person; page with the API's cursor; and
who changed which record, from record history."""

from __future__ import annotations

from typing import Any

import streamlit as st

from dashboard import components, data, forms
from dashboard.data import audit, threads
from shared.client import ApiError

CHANGE_COLUMNS: dict[str, Any] = {
    "at": st.column_config.DatetimeColumn("at", format="YYYY-MM-DD HH:mm:ss"),
    "action": st.column_config.TextColumn("change", width="small"),
    "by": st.column_config.TextColumn("by", help="Who wrote this version: a key, an administrator, a person's "
                                      "request (subject) or the platform"),
    "record": st.column_config.TextColumn("record", width=250),
    "version": st.column_config.NumberColumn("v", width="small"),
    "store": st.column_config.TextColumn("store", width="small"),
    "type": st.column_config.TextColumn("type", width="small"),
    "owner": st.column_config.TextColumn("owner", width="small"),
    "text": st.column_config.TextColumn("text after the change", width="large"),
}

components.page_header(
    "Audit log",
    "Who did what to which object, and when: the organisation's append-only trail, with its hash-chain check, and "
    "who changed which record.")
client = data.client()
org = data.org_id()
assert org is not None  # streamlit_app shows pages only once an organisation is chosen
tz = data.org_timezone(client, org)

badge, again = st.columns([5, 1], vertical_alignment="center")
with badge:
    components.chain_badge(data.chain_status(client))
if again.button("Verify again", key="audit_verify_again", icon=":material/refresh:"):
    data.chain_status.clear()
    st.rerun()


def events_view() -> None:
    with st.form("audit_filters", border=True):
        when = st.columns(4)
        start = when[0].date_input("From", value=None, key="audit_from", help=f"First day, in {tz}",
                                   persist_state="page")
        end = when[1].date_input("To", value=None, key="audit_to", help=f"Last day (included), in {tz}",
                                 persist_state="page")
        actor_type = when[2].selectbox("Actor type", ["any", "admin", "key", "subject", "system"],
                                       key="audit_actor_type", persist_state="page")
        actor_id = when[3].text_input("Actor id", key="audit_actor_id", placeholder="adm_…, key_… or bootstrap",
                                      persist_state="page")
        what = st.columns([2, 1, 1])
        actions = what[0].multiselect("Actions", audit.KNOWN_ACTIONS, key="audit_actions", accept_new_options=True,
                                      placeholder="any action (type another name to add it)", persist_state="page")
        object_type = what[1].text_input("Object type", key="audit_object_type",
                                         placeholder="key, index, org, audit…", persist_state="page")
        object_id = what[2].text_input("Object id", key="audit_object_id", persist_state="page")
        who = st.columns([2, 1, 1])
        person = who[0].text_input(
            "Person id", key="audit_person", placeholder="the id your application uses for her", persist_state="page",
            help="The trail names a person only by a keyed hash of her id; the API hashes what you type here.")
        outcome = who[1].selectbox("Outcome", ["any", "allowed", "denied"], key="audit_outcome", persist_state="page")
        page_size = who[2].selectbox("Events per page", [25, 50, 100, 200], index=1, key="audit_page_size",
                                     persist_state="page")
        st.form_submit_button("Apply filters", key="audit_apply", type="primary", icon=":material/filter_alt:")
    changes_only = st.toggle("Changes only", value=True, key="audit_changes_only", persist_state="page",
                             help="Leave out reads (of records, threads, the trail, previews), which every page "
                                  "visit writes; an action you name in *Actions* is always shown.")

    if start and end and start > end:
        st.warning("*From* is after *To*; no day lies between them.", icon=":material/event_busy:")

    filters = forms.audit_filter(
        start=start, end=end, tz=tz, actor_type=None if actor_type == "any" else actor_type, actor_id=actor_id,
        actions=list(actions), object_type=object_type, object_id=object_id, person=person,
        outcome=None if outcome == "any" else outcome, exclude=audit.exclusions(changes_only, list(actions)))

    # A new filter starts again at the newest page.
    cursors = components.cursor_stack("audit_cursors", (filters, page_size))
    events, next_cursor = audit.audit_page(client, filters, cursors[-1], int(page_size), tz)
    components.pager("audit", cursors, next_cursor, labels=("Newer", "Older"),
                     caption=f"Page {len(cursors)} · {events.height} events, newest first · times in {tz} · "
                             "reading the trail is itself recorded as `audit.read`")

    if events.is_empty():
        components.empty_state("No events match these filters — widen the period or clear a filter."
                               + (" Turn off *Changes only* to see reads as well." if changes_only else ""))
        return
    selected = components.events_table(events, key="audit_table", selectable=True)
    if selected is not None:
        components.event_detail(selected)
    else:
        st.caption("Select a row to see the event's detail.")


def changes_view() -> None:
    st.caption("Every version a record got — created, updated, confirmed, replaced, verified — and who wrote it, "
               "newest first. A deleted record's history goes with it. Reading this is recorded in the audit trail.")
    stores = data.names(data.indexes(client))
    with st.form("audit_changes_filters", border=True):
        row = st.columns([2, 2, 2, 1, 2])
        store = row[0].selectbox("Store", [None, *stores], key="audit_changes_store", persist_state="page",
                                 format_func=lambda i: "every store" if i is None else stores[i])
        person = row[1].text_input("Owner (person id)", key="audit_changes_person", persist_state="page")
        actions = row[2].multiselect("Changes", audit.VERSION_ACTIONS, key="audit_changes_actions",
                                     persist_state="page", placeholder="every change")
        actor_type = row[3].selectbox("By", ["any", "key", "admin", "subject", "system"],
                                      key="audit_changes_actor_type", persist_state="page")
        actor_id = row[4].text_input("By id", key="audit_changes_actor_id", placeholder="key_… or adm_…",
                                     persist_state="page")
        st.form_submit_button("Apply filters", key="audit_changes_apply", type="primary",
                              icon=":material/filter_alt:")
    filters = audit.change_filter(store=store, person=person, actions=list(actions),
                                  actor_type=None if actor_type == "any" else actor_type, actor_id=actor_id)
    cursors = components.cursor_stack("audit_changes_cursors", filters)
    try:
        changes, next_cursor = audit.changes_page(client, filters, cursors[-1], 50, tz, stores)
    except ApiError as err:
        components.api_error(err, "read the record changes")
        return
    components.pager("audit_changes", cursors, next_cursor, labels=("Newer", "Older"),
                     caption=f"Page {len(cursors)} · {changes.height} changes, newest first · times in {tz}")
    if changes.is_empty():
        if not stores:
            components.empty_state("No records yet: records live in an index, and there is none.",
                                   ("app_pages/indexes.py", "Create an index", ":material/add:"),
                                   key="audit_go_indexes")
        elif filters != audit.change_filter(store=None, person="", actions=[], actor_type=None, actor_id=""):
            components.empty_state("No record changes match these filters — clear a filter.")
        else:
            components.empty_state("No record has been written yet: applications write them with a key.",
                                   ("app_pages/keys.py", "Create a key", ":material/key:"), key="audit_go_keys")
    else:
        state = st.dataframe(changes, hide_index=True, key="audit_changes_table", column_config=CHANGE_COLUMNS,
                             on_select="rerun", selection_mode="single-row")
        rows = state.selection.rows if state is not None else []
        if rows and rows[0] < changes.height:
            record_id = changes["record"][rows[0]]
            if st.button(f"Open record {record_id}", key="audit_open_record", icon=":material/database:"):
                st.session_state["records_open_id"] = record_id
                st.switch_page("app_pages/records.py")
        else:
            st.caption("Select a change to open its record.")
    newest_threads()


def newest_threads() -> None:
    st.markdown("**Newest threads** — who opened which conversation")
    newest, _ = threads.thread_page(client, forms.thread_filter(owner="everyone", person="", metadata="", labels=""),
                                    None, 20, tz)
    if newest.is_empty():
        st.caption("No threads yet.")
        return
    st.dataframe(newest, hide_index=True, key="audit_newest_threads", column_config={
        "id": st.column_config.TextColumn("thread", width=250),
        "created_at": st.column_config.DatetimeColumn("opened", format="YYYY-MM-DD HH:mm"),
        "updated_at": st.column_config.DatetimeColumn("last written", format="YYYY-MM-DD HH:mm")})


# Lazy tabs: only the open one runs (and reads). Widgets keep their values while hidden.
events_tab, changes_tab = st.tabs(["Events", "Record changes"], key="audit_view", on_change="rerun")
if events_tab.open:
    with events_tab:
        events_view()
if changes_tab.open:
    with changes_tab:
        changes_view()
