"""Injection previewer (DSH-6): the block a model would get for one person, and why each left-out record is out."""

from __future__ import annotations

import altair as alt
import streamlit as st

from dashboard import components, data, forms
from dashboard.data import previewer
from shared.client import ApiError

components.page_header(
    "Injection previewer",
    "Exactly what a turn would be given from a store, for a person or for nobody, computed by the same code as a "
    "turn. Nothing changes (recall counts stay); the preview is an audited read.")
client = data.client()
org = data.org_id()
assert org is not None

stores = data.indexes(client)
if stores.is_empty():
    components.empty_state("This organisation has no stores yet: create an index first.")
    st.stop()
keys = previewer.active_keys(client, org)

with st.form("preview_form", border=True):
    top = st.columns(2)
    store_names = data.names(stores)
    index_id = top[0].selectbox("Store", list(store_names), format_func=lambda i: f"{store_names[i]} ({i})",
                                key="preview_store")
    key_names = {"": "none: this store's default block"} | data.names(keys)
    key_id = top[1].selectbox("Key", list(key_names), format_func=lambda k: key_names[k] if not k else
                              f"{key_names[k]} ({k})", key="preview_key",
                              help="The key whose policy and injection block a turn would use.")
    who = st.columns([2, 3, 1], vertical_alignment="bottom")
    person = who[0].text_input("Person id", key="preview_person", placeholder="anna")
    attributes = who[1].text_input("Attributes (JSON)", key="preview_attributes",
                                   placeholder='{"department": ["payroll"]}')
    nobody = who[2].checkbox("Nobody", key="preview_nobody", help="A turn that names no person.")
    turn_input = st.text_area("What the turn is about", key="preview_input", height=80,
                              help="Ranks records by relevance when the store's rank is relevance or blend.")
    override = st.checkbox("Use this store", key="preview_override",
                           help="Apply the key's block (or the default one) to this store, even where the key's turns "
                                "inject nothing or inject from another store.")
    submitted = st.form_submit_button("Preview", key="preview_submit", type="primary", icon=":material/visibility:")

if not submitted and "preview_result" not in st.session_state:
    components.empty_state("Choose a store and a person, then press Preview.")
    st.stop()

if submitted:
    try:
        body = forms.preview_body(person=person, attributes_json=attributes, nobody=nobody, key_id=key_id,
                                  turn_input=turn_input, store_override=override)
        st.session_state["preview_result"] = previewer.run_preview(client, index_id, body)
    except ValueError as exc:
        st.error(str(exc), icon=":material/error:")
        st.stop()
    except ApiError as err:
        components.api_error(err, "preview the block")
        st.stop()

result = st.session_state["preview_result"]
trace = result.trace
if result.note:
    st.info(result.note, icon=":material/info:")
elif not trace.enabled or trace.reason:
    st.info(f"Nothing injected: `{trace.reason}`.", icon=":material/info:")

gauge, counts = st.columns([2, 3])
with gauge:
    share = trace.estimated_tokens / trace.budget_tokens if trace.budget_tokens else 0.0
    st.metric("Estimated tokens", f"{trace.estimated_tokens} / {trace.budget_tokens}")
    st.progress(min(share, 1.0), text=f"{share:.0%} of the budget")
    by_count = f"at least {trace.dropped_by_count}" if trace.dropped_by_count_is_lower_bound else \
        str(trace.dropped_by_count)
    st.caption(f"dropped by count: {by_count} · dropped by budget: {trace.dropped_by_budget}")
with counts:
    breakdown = previewer.section_breakdown(result)
    st.altair_chart(alt.Chart(breakdown).mark_bar().encode(x=alt.X("tokens:Q", title="tokens"),
                                       y=alt.Y("section:N", sort=list(trace.sections), title=None),
                                       tooltip=["section", "records", "tokens"]), use_container_width=True)

st.subheader("The block, as the model gets it")
if result.block:
    st.code(result.block, language=None)
else:
    components.empty_state("The block is empty.")

st.subheader("Left out")
left = previewer.left_out_frame(result)
if left.is_empty():
    st.caption("Every candidate the builder fetched was injected.")
else:
    st.dataframe(left, hide_index=True, use_container_width=True, key="preview_left_out")
