"""Audit log (DSH-8): filter the trail by time, actor, action, object and person; page with the API's cursor."""

from __future__ import annotations

import streamlit as st

from dashboard import components, data, forms
from dashboard.data import audit

components.page_header(
    "Audit log",
    "Who did what to which object, and when: the organisation's append-only trail, with its hash-chain check.")
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

with st.form("audit_filters", border=True):
    when = st.columns(4)
    start = when[0].date_input("From", value=None, key="audit_from", help=f"First day, in {tz}")
    end = when[1].date_input("To", value=None, key="audit_to", help=f"Last day (included), in {tz}")
    actor_type = when[2].selectbox("Actor type", ["any", "admin", "key", "subject", "system"], key="audit_actor_type")
    actor_id = when[3].text_input("Actor id", key="audit_actor_id", placeholder="adm_…, key_… or bootstrap")
    what = st.columns([2, 1, 1])
    actions = what[0].multiselect("Actions", audit.KNOWN_ACTIONS, key="audit_actions", accept_new_options=True,
                                  placeholder="any action (type another name to add it)")
    object_type = what[1].text_input("Object type", key="audit_object_type", placeholder="key, index, org, audit…")
    object_id = what[2].text_input("Object id", key="audit_object_id")
    who = st.columns([2, 1, 1])
    person = who[0].text_input(
        "Person id", key="audit_person", placeholder="the id your application uses for her",
        help="The trail names a person only by a keyed hash of her id; the API hashes what you type here.")
    outcome = who[1].selectbox("Outcome", ["any", "allowed", "denied"], key="audit_outcome")
    page_size = who[2].selectbox("Events per page", [25, 50, 100, 200], index=1, key="audit_page_size")
    st.form_submit_button("Apply filters", key="audit_apply", type="primary", icon=":material/filter_alt:")

if start and end and start > end:
    st.warning("*From* is after *To*; no day lies between them.", icon=":material/event_busy:")

filters = forms.audit_filter(
    start=start, end=end, tz=tz, actor_type=None if actor_type == "any" else actor_type, actor_id=actor_id,
    actions=list(actions), object_type=object_type, object_id=object_id, person=person,
    outcome=None if outcome == "any" else outcome)

# A new filter starts again at the newest page.
cursors = components.cursor_stack("audit_cursors", (filters, page_size))
events, next_cursor = audit.audit_page(client, filters, cursors[-1], int(page_size), tz)
components.pager("audit", cursors, next_cursor, labels=("Newer", "Older"),
                 caption=f"Page {len(cursors)} · {events.height} events, newest first · times in {tz} · "
                         "reading the trail is itself recorded as `audit.read`")

if events.is_empty():
    components.empty_state("No events match these filters — widen the period or clear a filter.")
else:
    selected = components.events_table(events, key="audit_table", selectable=True)
    if selected is not None:
        components.event_detail(selected)
    else:
        st.caption("Select a row to see the event's detail.")
