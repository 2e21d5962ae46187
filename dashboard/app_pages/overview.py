"""Overview (DSH-2, the part whose API exists): indexes, keys by status, the latest audit events."""

from __future__ import annotations

import streamlit as st

from dashboard import components, data

RECENT_DAYS = 30
RECENT_MAX = 600
LATEST_SHOWN = 20

components.page_header("Overview", "What this organisation holds and what happened in it lately.")
client = data.client()
org = data.org_id()
assert org is not None  # streamlit_app shows pages only once an organisation is chosen
tz = data.org_timezone(client, org)

indexes = data.indexes(client)
key_counts = data.keys_by_status(data.keys(client, org))
chain = data.chain_status(client)

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

st.subheader("Latest audit events")
st.caption(f"Times in {tz}, the organisation's time zone. Reading the trail is itself recorded as `audit.read`.")
days = data.last_days(RECENT_DAYS, tz)
events = data.recent_events(client, days[0], RECENT_MAX, tz)
if events.is_empty():
    components.empty_state(f"No audit events in the last {RECENT_DAYS} days.")
else:
    components.events_table(events.head(LATEST_SHOWN), key="overview_events")
    st.markdown(f"**Events per day by action** — the last {RECENT_DAYS} days"
                + (f" (newest {RECENT_MAX} events)" if events.height >= RECENT_MAX else ""))
    components.events_per_day_chart(data.events_per_day(events), days)
