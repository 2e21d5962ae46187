"""Rendering helpers the pages share: errors, empty states, the chain badge, event tables and charts."""

from __future__ import annotations

import json
from typing import Any

import altair as alt
import polars as pl
import streamlit as st

from shared.client import ApiError, chain_summary
from shared.schemas.platform import ChainStatus


def api_error(err: ApiError, doing: str | None = None) -> None:
    """An API refusal in words with its code (DSH-1); never a traceback."""
    lead = f"Could not {doing}: " if doing else ""
    where = f" · field `{err.param}`" if err.param else ""
    ref = f" · error id `{err.error_id}`" if err.error_id else ""
    st.error(f"{lead}{err.message}\n\nCode `{err.code}`{where}{ref}", icon=":material/error:")


def empty_state(message: str) -> None:
    st.info(message, icon=":material/inbox:")


def page_header(title: str, purpose: str) -> None:
    st.title(title)
    st.caption(purpose)


def chain_badge(status: ChainStatus) -> None:
    """Whether the organisation's audit hash chain verifies (PLT-12), as a coloured badge."""
    if status.intact:
        st.badge(chain_summary(status), icon=":material/verified:", color="green")
    else:
        st.badge(chain_summary(status), icon=":material/gpp_bad:", color="red")


EVENT_COLUMNS: dict[str, Any] = {
    "seq": st.column_config.NumberColumn("seq", width="small", help="Position in the organisation's chain"),
    "at": st.column_config.DatetimeColumn("at", format="YYYY-MM-DD HH:mm:ss"),
    "action": st.column_config.TextColumn("action"),
    "outcome": st.column_config.TextColumn("outcome", width="small"),
    "actor_type": st.column_config.TextColumn("actor", width="small"),
    "actor_id": st.column_config.TextColumn("actor id"),
    "object_type": st.column_config.TextColumn("object", width="small"),
    "object_id": st.column_config.TextColumn("object id"),
    "subject": st.column_config.TextColumn("person (keyed hash)", width="small"),
    "detail": st.column_config.TextColumn("detail", width="large"),
    "id": None,
    "hash": None,
}


def events_table(frame: pl.DataFrame, *, key: str, selectable: bool = False) -> dict[str, Any] | None:
    """Audit events as a table; with `selectable`, the selected row's event (as a dict) is returned."""
    if not selectable:
        st.dataframe(frame, column_config=EVENT_COLUMNS, hide_index=True, key=key)
        return None
    state = st.dataframe(frame, column_config=EVENT_COLUMNS, hide_index=True, key=key, on_select="rerun",
                         selection_mode="single-row")
    rows = state.selection.rows if state is not None else []
    return frame.row(rows[0], named=True) if rows and rows[0] < frame.height else None


def events_per_day_chart(per_day: pl.DataFrame, days: list[str]) -> None:
    """Stacked bars: events per local day (every day of `days` on the axis, quiet ones empty), coloured by action."""
    chart = (
        alt.Chart(per_day)
        .mark_bar()
        .encode(
            x=alt.X("day:O", title=None, scale=alt.Scale(domain=days),
                    axis=alt.Axis(labelAngle=-45, labelExpr="slice(datum.label, 5)")),
            y=alt.Y("sum(events):Q", title="events", stack="zero"),
            color=alt.Color("action:N", title="action"),
            tooltip=["day:O", "action:N", alt.Tooltip("sum(events):Q", title="events")],
        )
        .properties(height=260)
    )
    st.altair_chart(chart, width="stretch")


def event_detail(event: dict[str, Any]) -> None:
    """Every field of one audit event, its detail as JSON."""
    st.markdown(f"**Event `{event['id']}`** · seq {event['seq']} · `{event['action']}` · {event['outcome']}")
    st.caption(f"hash `{event['hash']}`")
    st.json(json.loads(event["detail"]) if event["detail"] else {}, expanded=True)
