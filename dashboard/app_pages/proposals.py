"""Proposals: facts the maintenance pass found in several people's records (or judged general knowledge), to be
turned into one shared record or dismissed; each with the records it rests on that the administrator may see."""

from __future__ import annotations

import streamlit as st

from dashboard import components, data
from dashboard.data import proposals, stores
from shared.client import ApiError

components.page_header(
    "Proposals",
    "Facts several people's records hold, or that the helper model judged general knowledge: apply one to write a "
    "shared record everyone with access to the store can be given, or dismiss it for good.")
st.info("Reading proposals reads the records they rest on; each read is recorded in the audit trail under your "
        "name.", icon=":material/visibility:")
client = data.client()
org = data.org_id()
assert org is not None  # streamlit_app shows pages only once an organisation is chosen
tz = data.org_timezone(client, org)
listed = data.indexes(client)
names = data.names(listed)

done = st.session_state.pop("proposals_done", None)
if done:
    st.success(done, icon=":material/check_circle:")
if listed.is_empty():
    components.empty_state("No stores yet, so nothing to propose. Create an index first.",
                           ("app_pages/indexes.py", "Create an index", ":material/add:"), key="proposals_go_indexes")
    st.stop()

row = st.columns([2, 3])
status = row[0].radio("Show", ["open", "applied", "dismissed", "all"], key="proposals_status", horizontal=True)
store = row[1].selectbox("Store", [None, *names], key="proposals_store",
                         format_func=lambda i: "every store" if i is None else names[i])
try:
    found = proposals.proposals(client, str(status), store)
except ApiError as err:
    components.api_error(err, "read the proposals")
    st.stop()

if not found:
    where = "this store" if store else "any store"
    components.empty_state(
        f"No {status if status != 'all' else ''} proposals for {where}. The maintenance pass proposes a shared "
        "record when a store's promotion is on and the organisation's improvements are enabled; it runs every "
        "hour per store.",
        ("app_pages/stores.py", "Open store settings", ":material/tune:"), key="proposals_go_stores")
    st.stop()

table = proposals.frame(found, names)
components.forget_selection("proposals_table", (status, store))
picked = st.dataframe(
    table, hide_index=True, key="proposals_table", on_select="rerun", selection_mode="single-row",
    column_config={"id": None, "text": st.column_config.TextColumn("text", width="large"),
                   "why": st.column_config.TextColumn("why proposed", width="medium"),
                   "people": st.column_config.NumberColumn("people", help="How many people's records hold it, "
                                                           "whether or not you may read them all."),
                   "created_at": st.column_config.DatetimeColumn("proposed", timezone=tz)})
rows = picked.selection.rows if picked is not None else []
chosen = found[rows[0]] if rows and rows[0] < len(found) else found[0]
st.caption("Select a row to review another proposal.")

with st.container(border=True):
    st.subheader(chosen.text)
    st.caption(f"{chosen.type} · {names.get(chosen.index_id, chosen.index_id)} · "
               f"{proposals.BASIS_WORDS.get(chosen.basis, chosen.basis)} · {chosen.status}")
    evidence = proposals.evidence(chosen)
    if evidence.is_empty():
        st.caption("None of the records it rests on is one you may read.")
    else:
        st.markdown(f"**The records it rests on** ({evidence.height} you may read, of {chosen.people} "
                    f"{'person' if chosen.people == 1 else 'people'})")
        st.dataframe(evidence, hide_index=True, key="proposals_evidence",
                     column_config={"text": st.column_config.TextColumn("text", width="large")})
    if chosen.status == "applied" and chosen.record_id:
        st.success(f"Applied: shared record `{chosen.record_id}`.", icon=":material/check_circle:")
    if chosen.status == "open":
        labels = stores.store_settings(client, chosen.index_id).promotion.labels
        st.caption("Applying writes a shared record of nobody in particular"
                   + (f", labelled {', '.join(f'{k}={v}' for k, v in labels.items())}" if labels else "")
                   + "; the people's own records stay theirs.")
        buttons = st.columns([1, 1, 4])
        try:
            if buttons[0].button("Apply", key="proposals_apply", type="primary", icon=":material/done_all:"):
                applied = client.apply_proposal(chosen.id)
                st.session_state["proposals_done"] = (f"Applied: shared record `{applied.record_id}` written to "
                                                      f"{names.get(applied.index_id, applied.index_id)}.")
                data.refresh()
                st.rerun()
            if buttons[1].button("Dismiss", key="proposals_dismiss", icon=":material/block:"):
                client.dismiss_proposal(chosen.id)
                st.session_state["proposals_done"] = "Dismissed: this text will not be proposed again."
                data.refresh()
                st.rerun()
        except ApiError as err:
            components.api_error(err, "decide on the proposal")
