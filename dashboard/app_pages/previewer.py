"""Injection previewer (DSH-6): the block a model would get for one person (or two, side by side), how its tokens
are shared against the budget, the records per section, and why each left-out record is out."""

from __future__ import annotations

import altair as alt
import polars as pl
import streamlit as st

from dashboard import components, data, forms
from dashboard.data import previewer
from shared.client import ApiError
from shared.schemas.stores import PreviewOut

components.page_header(
    "Injection previewer",
    "Exactly what a turn would be given from a store, for a person or for nobody, computed by the same code as a "
    "turn. Nothing changes (recall counts stay); the preview is an audited read.")
client = data.client()
org = data.org_id()
assert org is not None

stores = data.indexes(client)
if stores.is_empty():
    components.empty_state("No stores yet: a preview shows what a turn is given from a store, and this organisation "
                           "has none.", ("app_pages/indexes.py", "Create an index", ":material/add:"),
                           key="preview_go_indexes")
    st.stop()
keys = previewer.active_keys(client, org)
compare = st.toggle("Compare two people", key="preview_compare",
                    help="Preview the same store and key for two people and show their blocks side by side.")


def person_inputs(suffix: str, label: str) -> tuple[str, str, bool]:
    who = st.columns([2, 3, 1], vertical_alignment="bottom")
    person = who[0].text_input(label, key=f"preview_person{suffix}", placeholder="anna")
    attributes = who[1].text_input("Attributes (JSON)", key=f"preview_attributes{suffix}",
                                   placeholder='{"department": ["payroll"]}',
                                   help="What the policy's department rules read: each name maps to a list of "
                                        "strings.")
    nobody = who[2].checkbox("Nobody", key=f"preview_nobody{suffix}", help="A turn that names no person.")
    return person, attributes, nobody


with st.form("preview_form", border=True):
    top = st.columns(3)
    store_names = data.names(stores)
    index_id = top[0].selectbox("Store", list(store_names), format_func=lambda i: f"{store_names[i]} ({i})",
                                key="preview_store")
    key_names = {"": "none: this store's default block"} | data.names(keys)
    key_id = top[1].selectbox("Key", list(key_names), format_func=lambda k: key_names[k] if not k else
                              f"{key_names[k]} ({k})", key="preview_key",
                              help="The key whose policy and injection block a turn would use.")
    agent_names = {"": "none"} | previewer.agents(client)
    agent_id = top[2].selectbox("Agent", list(agent_names), format_func=lambda a: agent_names[a] if not a else
                                f"{agent_names[a]} ({a})", key="preview_agent",
                                help="An agent's injection block replaces the key's, as in that agent's turns.")
    people = [person_inputs("", "Person id" if not compare else "First person's id")]
    if compare:
        people.append(person_inputs("_b", "Second person's id"))
    turn_input = st.text_area("What the turn is about", key="preview_input", height=80,
                              help="Ranks records by relevance when the store's rank is relevance or blend.")
    override = st.checkbox("Use this store", key="preview_override",
                           help="Apply the key's block (or the default one) to this store, even where the key's turns "
                                "inject nothing or inject from another store.")
    submitted = st.form_submit_button("Preview", key="preview_submit", type="primary", icon=":material/visibility:")

if submitted:
    st.session_state.pop("preview_result", None)
    try:
        previews = []
        for person, attributes, nobody in people:
            body = forms.preview_body(person=person, attributes_json=attributes, nobody=nobody, key_id=key_id,
                                      turn_input=turn_input, store_override=override, agent_id=agent_id)
            previews.append((person.strip() if not nobody else "nobody", previewer.run_preview(client, index_id,
                                                                                               body)))
        st.session_state["preview_result"] = previews
    except ValueError as exc:
        st.error(str(exc), icon=":material/error:")
        st.stop()
    except ApiError as err:
        components.api_error(err, "preview the block")
        st.stop()

if "preview_result" not in st.session_state:
    components.empty_state("Choose a store and a person, then press Preview.")
    st.stop()


PARTS = ["the person's", "shared", "section labels"]
PART_COLOURS = ["#1c83e1", "#83c9ff", "#bdbdbd"]


def share_chart(result: PreviewOut) -> None:
    """The block's tokens against the budget: the person's, shared and labels stacked, the 40% shared line marked
    (a tick across the bar's band: the chart's one row)."""
    budget = result.trace.budget_tokens
    parts = previewer.token_parts(result).with_columns(pl.lit("block").alias("row"))
    row = alt.Y("row:N", axis=None)
    scale = alt.Scale(domain=[0, max(budget, result.trace.estimated_tokens, 1)])
    bars = alt.Chart(parts).mark_bar(height=24).encode(
        x=alt.X("sum(tokens):Q", title="tokens", scale=scale, stack="zero"), y=row,
        color=alt.Color("part:N", title=None, scale=alt.Scale(domain=PARTS, range=PART_COLOURS),
                        legend=alt.Legend(orient="top", direction="horizontal")),
        order=alt.Order("order:Q"), tooltip=["part:N", "tokens:Q"])
    limit = pl.DataFrame({"limit": [previewer.SHARED_SHARE * budget], "label": ["40% shared limit"],
                          "row": ["block"]})
    line = alt.Chart(limit).mark_tick(color="red", thickness=3, size=40).encode(
        x="limit:Q", y=row, tooltip=[alt.Tooltip("limit:Q", title="shared lines may use up to", format=".0f")])
    text = alt.Chart(limit).mark_text(align="left", dx=4, dy=-16, color="red").encode(x="limit:Q", y=row,
                                                                                     text="label:N")
    st.altair_chart((bars + line + text).properties(height=90), width="stretch")


def show(result: PreviewOut, prefix: str) -> None:
    trace = result.trace
    if result.note:
        st.info(result.note, icon=":material/info:")
    elif not trace.enabled or trace.reason:
        st.info(f"Nothing injected: `{trace.reason}`.", icon=":material/info:")
    share = trace.estimated_tokens / trace.budget_tokens if trace.budget_tokens else 0.0
    used, shared = st.columns(2)
    used.metric("Estimated tokens", f"{trace.estimated_tokens} / {trace.budget_tokens}",
                help=f"{share:.0%} of the budget")
    shared.metric("Shared share", f"{previewer.shared_share(result):.0%}",
                  help="Tokens of shared lines as a share of the budget; on a turn for a person at most 40%.")
    share_chart(result)
    by_count = f"at least {trace.dropped_by_count}" if trace.dropped_by_count_is_lower_bound else \
        str(trace.dropped_by_count)
    st.caption(f"dropped by count: {by_count} · dropped by budget: {trace.dropped_by_budget}")
    st.markdown("**The block, as the model gets it**")
    if result.block:
        st.code(result.block, language=None)
    else:
        components.empty_state("The block is empty.")
    st.markdown("**Records per section**")
    per_section = previewer.records_per_section(result)
    if per_section.is_empty():
        st.caption("No record was injected.")
    else:
        st.dataframe(per_section, hide_index=True, key=f"{prefix}_records", column_config={
            "section": st.column_config.TextColumn("section", width="small"),
            "type": st.column_config.TextColumn("type", width="small"),
            "owner": st.column_config.TextColumn("owner", width="small"),
            "tokens": st.column_config.NumberColumn("tokens", width="small"),
            "line": st.column_config.TextColumn("line", width="large"), "id": None})
    st.markdown("**Left out**")
    left = previewer.left_out_frame(result)
    if left.is_empty():
        st.caption("Every candidate the builder fetched was injected.")
    else:
        st.dataframe(left, hide_index=True, key=f"{prefix}_left_out")


results: list[tuple[str, PreviewOut]] = st.session_state["preview_result"]
columns = st.columns(len(results)) if len(results) > 1 else [st.container()]
for n, ((who, result), column) in enumerate(zip(results, columns, strict=True)):
    with column:
        if len(results) > 1:
            st.subheader(who, anchor=False)
        show(result, f"preview_{n}")
