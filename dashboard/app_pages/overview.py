"""Overview (DSH-2, the part whose API exists): indexes, keys by status, records per store and type, people,
threads and their messages, the latest audit events."""

from __future__ import annotations

import streamlit as st

from dashboard import components, data
from dashboard.data import overview

RECENT_DAYS = 30
RECENT_MAX = 600
LATEST_SHOWN = 20

components.page_header("Overview", "What this organisation holds and what happened in it lately.")
client = data.client()
org = data.org_id()
assert org is not None  # streamlit_app shows pages only once an organisation is chosen
tz = data.org_timezone(client, org)

indexes = data.indexes(client)
key_counts = overview.keys_by_status(data.keys(client, org))
chain = data.chain_status(client)
# The trail is read before the record counts, so the counts' own `memory.read` events show on the next visit.
days = overview.last_days(RECENT_DAYS, tz)
events = overview.recent_events(client, days[0], RECENT_MAX, tz)

cols = st.columns(5)
cols[0].metric("Indexes", indexes.height)
cols[1].metric("Active keys", key_counts["active"])
cols[2].metric("Revoked keys", key_counts["revoked"])
cols[3].metric("Expired keys", key_counts["expired"])
cols[4].metric("Audit events", chain.events)
components.chain_badge(chain)

st.subheader("Indexes")
if indexes.is_empty():
    components.empty_state("No indexes yet — create one with `POST /indexes`.")
else:
    st.dataframe(indexes, hide_index=True, key="overview_indexes",
                 column_config={"created_at": st.column_config.DatetimeColumn("created", format="YYYY-MM-DD")})

st.subheader("Memory records")
if not indexes.is_empty():
    names = data.names(indexes)
    counts, people = overview.store_counts(client)
    personal = int(counts.filter(counts["owner"] == "personal")["records"].sum())
    shared = int(counts.filter(counts["owner"] == data.SHARED)["records"].sum())
    record_cols = st.columns(4)
    record_cols[0].metric("Records", personal + shared)
    record_cols[1].metric("Personal records", personal)
    record_cols[2].metric("Shared records", shared)
    record_cols[3].metric("People", people, help="People who own at least one active record.")
    st.caption("Active, unexpired records, counted by the API over every store (`GET /memory/stats`); the count "
               "is recorded in the audit trail as `memory.read`.")
    if counts.is_empty():
        components.empty_state("No memory records yet — write one with `POST /memory`.")
    else:
        components.record_counts_table(overview.counts_by_store(counts, names), key="overview_records")

st.subheader("Threads")
threads = overview.thread_counts(client)
if threads.threads == 0:
    components.empty_state("No threads yet — open one with `POST /threads`.")
else:
    thread_cols = st.columns(4)
    thread_cols[0].metric("Threads", threads.threads)
    thread_cols[1].metric("Shared threads", threads.shared, help="Threads that name no person.")
    thread_cols[2].metric("People with threads", threads.people if threads.people is not None else "—")
    messages = threads.messages
    thread_cols[3].metric("Messages", messages.user + messages.assistant + messages.developer,
                          help=f"{messages.user} from people, {messages.assistant} from assistants, "
                               f"{messages.developer} developer instructions.")
    st.caption("Counted by the API over every thread you may read (`GET /threads/stats`); the count is recorded "
               "in the audit trail as `thread.read`.")

st.subheader("Latest audit events")
st.caption(f"Times in {tz}, the organisation's time zone. Reading the trail is itself recorded as `audit.read`.")
if events.is_empty():
    components.empty_state(f"No audit events in the last {RECENT_DAYS} days.")
else:
    components.events_table(events.head(LATEST_SHOWN), key="overview_events")
    st.markdown(f"**Events per day by action** — the last {RECENT_DAYS} days"
                + (f" (newest {RECENT_MAX} events)" if events.height >= RECENT_MAX else ""))
    components.events_per_day_chart(overview.events_per_day(events), days)
