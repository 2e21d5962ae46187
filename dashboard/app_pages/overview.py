"""Overview (DSH-2): indexes, keys by status, records per store and type, people, threads and their messages, the
trends of the last 30 days, and the latest audit events."""

from __future__ import annotations

import polars as pl
import streamlit as st

from dashboard import components, data
from dashboard.data import extraction, overview

TREND_DAYS = 30
LATEST_SHOWN = 20

components.page_header("Overview", "What this organisation holds and what happened in it lately.")
client = data.client()
org = data.org_id()
assert org is not None  # streamlit_app shows pages only once an organisation is chosen
tz = data.org_timezone(client, org)

indexes = data.indexes(client)
key_counts = overview.keys_by_status(data.keys(client, org))
chain = data.chain_status(client)
changes_only = st.session_state.get("overview_changes_only", True)
# The trail is read before the counts, so the counts' own read events show on the next visit.
events = overview.latest_events(client, LATEST_SHOWN, changes_only, tz)
trends = overview.trends(client, TREND_DAYS)

cols = st.columns(5)
cols[0].metric("Indexes", indexes.height)
cols[1].metric("Active keys", key_counts["active"])
cols[2].metric("Revoked keys", key_counts["revoked"])
cols[3].metric("Expired keys", key_counts["expired"])
cols[4].metric("Audit events", chain.events)
components.chain_badge(chain)

st.subheader("Indexes")
if indexes.is_empty():
    components.empty_state("No indexes yet: every memory record lives in an index. Create the first one.",
                           ("app_pages/indexes.py", "Create an index", ":material/add:"), key="overview_go_indexes")
else:
    st.dataframe(indexes, hide_index=True, key="overview_indexes",
                 column_config={"created_at": st.column_config.DatetimeColumn("created", format="YYYY-MM-DD")})

st.subheader("Extraction")
extraction_states = extraction.store_states(client, data.names(indexes))
if indexes.is_empty():
    components.empty_state("No extraction yet: a model reads conversations into the records of a store, and there is "
                           "no store yet.")
elif (extraction_states["state"] == extraction.NOT_SET).all():
    components.empty_state("No store has extraction set up: a model could read the conversations and write what it "
                           "learns as memory records. Set it up for a store.",
                           ("app_pages/extraction.py", "Set up extraction", ":material/monitor_heart:"),
                           key="overview_go_extraction")
else:
    for row in extraction_states.iter_rows(named=True):
        name, badge, fix, go = st.columns([2, 2, 6, 2], vertical_alignment="center")
        name.markdown(f"**{row['store']}**")
        with badge:
            st.badge(row["label"], color=row["colour"], icon=":material/circle:")
        fix.caption(row["fix"] + (f" {row['failed']} failed windows." if row["failed"] else ""))
        if go.button("Open", key=f"overview_extraction_{row['index_id']}", icon=":material/monitor_heart:",
                     help="The store's extraction health"):
            st.session_state["extraction_store"] = row["index_id"]
            st.switch_page("app_pages/extraction.py")

st.subheader("Memory records")
if indexes.is_empty():
    components.empty_state("No memory records yet: records are written to an index, and there is none yet.")
else:
    names = data.names(indexes)
    counts, people = overview.store_counts(client)
    personal = int(counts.filter(counts["owner"] == "personal")["records"].sum())
    shared = int(counts.filter(counts["owner"] == data.SHARED)["records"].sum())
    record_cols = st.columns(4)
    record_cols[0].metric("Records", personal + shared)
    record_cols[1].metric("Personal records", personal)
    record_cols[2].metric("Shared records", shared)
    record_cols[3].metric("People", people, help="People who own at least one active record.")
    st.caption("Active, unexpired records, counted by the API over every store; the count is recorded in the audit "
               "trail as a read.")
    if counts.is_empty():
        components.empty_state("No memory records yet. Applications write them with a key; create one for your "
                               "application.", ("app_pages/keys.py", "Create a key", ":material/key:"),
                               key="overview_go_keys_records")
    else:
        components.record_counts_table(overview.counts_by_store(counts, names), key="overview_records")

st.subheader("Threads")
threads = overview.thread_counts(client)
if threads.threads == 0:
    components.empty_state("No threads yet. Applications open them when they call the API with a key that keeps "
                           "conversations.", ("app_pages/keys.py", "Create a key", ":material/key:"),
                           key="overview_go_keys_threads")
else:
    thread_cols = st.columns(4)
    thread_cols[0].metric("Threads", threads.threads)
    thread_cols[1].metric("Shared threads", threads.shared, help="Threads that name no person.")
    thread_cols[2].metric("People with threads", threads.people if threads.people is not None else "—")
    messages = threads.messages
    thread_cols[3].metric("Messages", messages.user + messages.assistant + messages.developer,
                          help=f"{messages.user} from people, {messages.assistant} from assistants, "
                               f"{messages.developer} developer instructions.")
    st.caption("Counted by the API over every thread you may read; the count is recorded in the audit trail as a "
               "read.")

st.subheader(f"The last {TREND_DAYS} days")
st.caption(f"Per calendar day in {tz}, counted by the API.")
records_chart, messages_chart = st.columns(2)
with records_chart:
    st.markdown("**Records written** — new records, changes and confirmations")
    if trends.records.is_empty():
        st.caption("No record was written in these days.")
    else:
        components.daily_chart(trends.records, trends.days, colour="write", counted="record versions")
with messages_chart:
    st.markdown("**Messages** — by who wrote them")
    if trends.messages.is_empty():
        st.caption("No message was written in these days.")
    else:
        components.daily_chart(trends.messages, trends.days, colour="role", counted="messages")
st.markdown("**Extraction windows** — by the state they ended in")
switched_on = extraction_states.filter(pl.col("state") != extraction.NOT_SET)["index_id"].to_list()
extraction_days = extraction.windows_per_day(client, switched_on, TREND_DAYS, tz)
if extraction_days.is_empty():
    st.caption("No extraction window was read in these days." if switched_on else
               "No store has extraction set up, so no window was read.")
else:
    components.daily_chart(extraction_days, trends.days, colour="state", counted="windows")
st.markdown("**Audit events** — by action")
changes_only = st.toggle("Changes only", value=True, key="overview_changes_only",
                         help="Leave out reads (of records, threads, the trail, previews), which every page visit "
                              "writes.")
shown_events = overview.without_reads(trends.events) if changes_only else trends.events
if shown_events.is_empty():
    st.caption("No audit event in these days." if not changes_only else
               "No change in these days; turn off *Changes only* to see reads as well.")
else:
    components.daily_chart(shown_events, trends.days, colour="action", counted="events")

st.subheader("Latest audit events")
st.caption(f"Times in {tz}, the organisation's time zone. Reading the trail is itself recorded as `audit.read`"
           + (" (left out here: *Changes only*)." if changes_only else "."))
if events.is_empty():
    components.empty_state("No events yet." if not changes_only else
                           "No changes recorded yet; turn off *Changes only* to see reads as well.")
else:
    components.events_table(events, key="overview_events")
    components.go_button("app_pages/audit_log.py", "Open the audit log", ":material/policy:",
                         key="overview_go_audit")
