"""Rendering helpers the pages share: errors, empty states, cursor pagers, the chain badge, event tables and charts."""

from __future__ import annotations

import json
from typing import Any, cast

import altair as alt
import polars as pl
import streamlit as st

from dashboard import data
from dashboard.data import shapes
from shared.client import ApiError, chain_summary
from shared.schemas.memory import MemoryOut
from shared.schemas.platform import ChainStatus


def api_error(err: ApiError, doing: str | None = None) -> None:
    """An API refusal in words with its code (DSH-1); never a traceback."""
    lead = f"Could not {doing}: " if doing else ""
    where = f" · field `{err.param}`" if err.param else ""
    ref = f" · error id `{err.error_id}`" if err.error_id else ""
    st.error(f"{lead}{err.message}\n\nCode `{err.code}`{where}{ref}", icon=":material/error:")


def empty_state(message: str, action: tuple[str, str, str] | None = None, *, key: str | None = None) -> None:
    """What is missing and what to do, in words; `action` (page, button label, icon) is the button that does it."""
    st.info(message, icon=":material/inbox:")
    if action is not None:
        go_button(*action, key=key)


def choose_store(client: Any, *, key: str, why: str) -> tuple[str, dict[str, str]]:
    """The store a page works on, chosen in a selector (`{key}_store`), and every store's name by id; with no
    store, an empty state saying `why` a store is needed, and the page stops."""
    indexes = data.indexes(client)
    if indexes.is_empty():
        empty_state(f"No stores yet: {why}, and this organisation has none.",
                    ("app_pages/indexes.py", "Create an index", ":material/add:"), key=f"{key}_go_indexes")
        st.stop()
    names = data.names(indexes)
    index_id = st.selectbox("Store", list(names), key=f"{key}_store", format_func=lambda i: f"{names[i]} · {i}")
    assert index_id is not None
    return index_id, names


def go_button(page: str, label: str, icon: str, *, key: str | None = None) -> None:
    """A button that opens another page (`app_pages/…`)."""
    if st.button(label, key=key or f"go_{page}_{label}", icon=icon):
        st.switch_page(page)


def raw_json(value: object, label: str = "Raw JSON") -> None:
    """The document exactly as the API sent it, folded away."""
    with st.expander(label, icon=":material/data_object:"):
        st.json(value, expanded=True)


def fields_table(frame: pl.DataFrame, *, key: str) -> None:
    """A document's fields, one per row (`data.shapes.fields_frame`)."""
    st.dataframe(frame, hide_index=True, key=key, column_config={
        "field": st.column_config.TextColumn("field", width="medium"),
        "value": st.column_config.TextColumn("value", width="large")})


def pairs_editor(label: str, frame: pl.DataFrame, *, key: str, help: str) -> list[dict[str, object]]:
    """Name/value rows to edit (add a row at the bottom, delete with the row's checkbox); returns the rows."""
    st.markdown(f"**{label}**", help=help)
    edited = st.data_editor(frame.to_pandas(), num_rows="dynamic", hide_index=True, key=key, column_config={
        "name": st.column_config.TextColumn("name", width="small"),
        "value": st.column_config.TextColumn("value", width="medium")})
    return [dict(row) for row in edited.to_dict("records")]


def editor_changed(key: str) -> bool:
    """Whether the administrator edited, added or deleted any row of the data editor `key` since it was filled."""
    state = st.session_state.get(key) or {}
    return any(state.get(part) for part in ("edited_rows", "added_rows", "deleted_rows"))


def page_header(title: str, purpose: str) -> None:
    st.title(title)
    st.caption(purpose)


def cursor_stack(key: str, signature: object) -> list[str | None]:
    """The cursors of the pages shown so far, kept in `key`; a new signature (filter, thread, order) starts again
    at the first page."""
    if st.session_state.get(f"{key}_signature") != signature:
        st.session_state[f"{key}_signature"] = signature
        st.session_state[key] = [None]
    return cast(list[str | None], st.session_state[key])


def forget_selection(key: str, signature: object) -> None:
    """Clear the row selection of the selectable table `key` when what it lists changed (a new filter or page):
    Streamlit keeps a keyed table's selected row position across new data, which would open a row nobody chose."""
    if st.session_state.get(f"{key}_selection_signature") != signature:
        st.session_state[f"{key}_selection_signature"] = signature
        st.session_state.pop(key, None)


def pager(prefix: str, cursors: list[str | None], next_cursor: str | None, caption: str, *,
          labels: tuple[str, str] = ("Previous", "Next")) -> None:
    """Back and forward buttons (keys `<prefix>_<label>`) on a cursor stack, beside a caption about the page."""
    back, forward = labels
    nav = st.columns([1, 1, 5], vertical_alignment="center")
    if nav[0].button(back, key=f"{prefix}_{back.lower()}", icon=":material/arrow_back:", disabled=len(cursors) == 1):
        cursors.pop()
        st.rerun()
    if nav[1].button(forward, key=f"{prefix}_{forward.lower()}", icon=":material/arrow_forward:",
                     disabled=next_cursor is None):
        cursors.append(next_cursor)
        st.rerun()
    nav[2].caption(caption)


def load_more(key: str, next_cursor: str | None, what: str) -> None:
    """*Load more …* (key `<key>_more`): one more page on the cursor stack kept in `key`."""
    if st.button(f"Load more {what}", key=f"{key}_more", icon=":material/expand_more:", disabled=next_cursor is None):
        st.session_state[key].append(next_cursor)
        st.rerun()


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


def daily_chart(per_day: pl.DataFrame, days: list[str], *, colour: str, counted: str) -> None:
    """Stacked bars per calendar day (every day of `days` on the axis, quiet ones empty), coloured by `name`."""
    chart = (
        alt.Chart(per_day)
        .mark_bar()
        .encode(
            x=alt.X("day:O", title=None, scale=alt.Scale(domain=days),
                    axis=alt.Axis(labelAngle=-45, labelExpr="slice(datum.label, 5)")),
            y=alt.Y("sum(count):Q", title=counted, stack="zero"),
            color=alt.Color("name:N", title=colour),
            tooltip=[alt.Tooltip("day:O", title="day"), alt.Tooltip("name:N", title=colour),
                     alt.Tooltip("sum(count):Q", title=counted)],
        )
        .properties(height=240)
    )
    st.altair_chart(chart, width="stretch")


def event_detail(event: dict[str, Any]) -> None:
    """One audit event: what changed (before → after) and its other details as tables, the raw JSON folded away."""
    st.markdown(f"**Event `{event['id']}`** · seq {event['seq']} · `{event['action']}` · {event['outcome']}")
    st.caption(f"by {event['actor_type']} {event['actor_id'] or ''} · object {event['object_type'] or '—'} "
               f"{event['object_id'] or ''} · hash `{event['hash']}`")
    detail = json.loads(event["detail"]) if event["detail"] else {}
    changes, rest = shapes.detail_frames(detail)
    if not changes.is_empty():
        st.markdown("**What changed**")
        st.dataframe(changes, hide_index=True, key=f"event_changes_{event['id']}", column_config={
            "field": st.column_config.TextColumn("field", width="medium"),
            "before": st.column_config.TextColumn("before", width="medium"),
            "after": st.column_config.TextColumn("after", width="medium")})
    if not rest.is_empty():
        fields_table(rest, key=f"event_fields_{event['id']}")
    elif changes.is_empty():
        st.caption("This event carries no detail.")
    raw_json(detail)


# Widths that keep every column an administrator checks in view on a 1440-pixel screen, the id whole and first.
RECORD_COLUMNS: dict[str, Any] = {
    "id": st.column_config.TextColumn("id", width=250, pinned=True, help="Open it below, or type it in *Open a "
                                      "record by id*"),
    "owner": st.column_config.TextColumn("owner", width=60, help="A person's id, or shared"),
    "type": st.column_config.MultiselectColumn("type", width=90, color="auto"),
    "text": st.column_config.TextColumn("text", width=160),
    "effective": st.column_config.ProgressColumn("effective", min_value=0.0, max_value=1.0, format="%.2f",
                                                 width=68,
                                                 help="Confidence after decay, as the API computes it now"),
    "stored": st.column_config.NumberColumn("stored", format="%.2f", width=46),
    "tags": st.column_config.MultiselectColumn("tags", width=75, color="auto"),
    "priority": st.column_config.TextColumn("priority", width=58),
    "status": st.column_config.TextColumn("status", width=50),
    "flags": st.column_config.MultiselectColumn(
        "flags", width=95, color=["green", "orange"], options=["verified", "contested"],
        help="verified: checked by an administrator; contested: contradicts another record"),
    "expires": st.column_config.TextColumn("expires", width=85, help="The day it expires; never, or empty"),
    "store": st.column_config.TextColumn("store", width=90),
    "source": st.column_config.TextColumn("source", width=70),
    "version": st.column_config.NumberColumn("v", width=40),
    "updated_at": st.column_config.DatetimeColumn("updated", format="YYYY-MM-DD HH:mm", width=130),
}
RECORD_ROW_HEIGHT = 35


def records_table(frame: pl.DataFrame, *, key: str) -> dict[str, Any] | None:
    """Memory records as a tall table with every column an administrator checks in view; the selected row (as a
    dict) is returned."""
    flags = pl.concat_list(pl.when(pl.col("verified")).then(pl.lit("verified")),
                           pl.when(pl.col("contested")).then(pl.lit("contested"))).list.drop_nulls()
    shown = frame.with_columns(pl.concat_list(pl.col("type")).alias("type"), flags.alias("flags"),
                               pl.col("expires_at").dt.strftime("%Y-%m-%d").fill_null("never").alias("expires"))
    height = min(RECORD_ROW_HEIGHT * (frame.height + 1) + 3, 760)
    state = st.dataframe(shown, column_config=RECORD_COLUMNS, column_order=list(RECORD_COLUMNS), hide_index=True,
                         key=key, on_select="rerun", selection_mode="single-row", height=height,
                         row_height=RECORD_ROW_HEIGHT)
    rows = state.selection.rows if state is not None else []
    return frame.row(rows[0], named=True) if rows and rows[0] < frame.height else None


def record_summary(record: MemoryOut, store: str, tz: str) -> None:
    """The record's text, its confidence (effective against stored) and where it lives."""
    st.markdown(f"> {record.text}")
    cols = st.columns(5)
    decayed = round(record.effective_confidence - record.confidence, 2)
    cols[0].metric("Effective confidence", f"{record.effective_confidence:.2f}",
                   delta=f"{decayed:+.2f} from stored" if decayed else None, delta_color="off",
                   help="The stored confidence after decay, as the API computes it now. No change is shown when "
                        "the record has not decayed.")
    cols[1].metric("Stored confidence", f"{record.confidence:.2f}")
    cols[2].metric("Version", record.version)
    cols[3].metric("Recalled", record.recall_count)
    cols[4].metric("Confirmations", record.confirmations)
    flags = [f"store **{store}**", f"owner **{record.subject or 'shared'}**", f"type `{record.type}`",
             f"status {record.status}", f"source {record.source}", f"priority {record.priority}"]
    st.markdown(" · ".join(flags))
    if record.verified:
        st.badge("verified by an administrator", icon=":material/verified:", color="green")
    if record.contested:
        st.badge(f"contested with {record.contested_with}", icon=":material/compare_arrows:", color="orange")
    if record.status == "replaced":
        st.badge(f"replaced by {record.replaced_by}", icon=":material/history:", color="gray")


HISTORY_COLUMNS: dict[str, Any] = {
    "version": st.column_config.NumberColumn("v", width="small"),
    "at": st.column_config.DatetimeColumn("at", format="YYYY-MM-DD HH:mm:ss"),
    "action": st.column_config.TextColumn("action", width="small"),
    "actor": st.column_config.TextColumn("by"),
    "partner": st.column_config.TextColumn("partner", help="The record this one replaced or was confirmed by"),
    "text": st.column_config.TextColumn("text", width="large"),
    "confidence": st.column_config.NumberColumn("confidence", format="%.2f", width="small"),
}


def history_timeline(frame: pl.DataFrame, *, key: str) -> None:
    """A record's versions, oldest first: what changed, when and by whom."""
    if frame.is_empty():
        empty_state("No history yet.")
        return
    st.dataframe(frame, column_config=HISTORY_COLUMNS, hide_index=True, key=key)


SETTINGS_COLUMNS: dict[str, Any] = {
    "setting": st.column_config.TextColumn("setting"),
    "effective": st.column_config.TextColumn("effective", help="What the store uses now"),
    "default": st.column_config.TextColumn("default"),
    "differs": st.column_config.CheckboxColumn("differs", width="small", help="Effective value is not the default"),
    "name": None,
}


def settings_table(frame: pl.DataFrame, *, key: str) -> None:
    """A section's settings; rows whose effective value differs from the default are highlighted."""
    def highlight(row: Any) -> list[str]:
        colour = "background-color: rgba(255, 164, 33, 0.25); font-weight: 600" if row["differs"] else ""
        return [colour] * len(row)

    styled = frame.to_pandas().style.apply(highlight, axis=1)
    st.dataframe(styled, column_config=SETTINGS_COLUMNS, hide_index=True, key=key)


def record_counts_table(frame: pl.DataFrame, *, key: str) -> None:
    """Records per store and type, personal and shared."""
    st.dataframe(frame, hide_index=True, key=key, column_config={
        "store": st.column_config.TextColumn("store"), "type": st.column_config.TextColumn("type"),
        "records": st.column_config.NumberColumn("records"), "personal": st.column_config.NumberColumn("personal"),
        "shared": st.column_config.NumberColumn("shared")})
