"""Extraction health (DSH-5): per store, the switch's state and its fix, windows by state, failures by reason, what
each run wrote and the tokens it spent, the failed windows with their threads, *Run now*, and the switch's editor."""

from __future__ import annotations

from typing import Any

import altair as alt
import polars as pl
import streamlit as st

from dashboard import components, data
from dashboard.data import extraction
from shared.client import ApiError
from shared.schemas.extraction import DEFAULT_TYPES, ExtractionSwitchOut

components.page_header("Extraction health", "How well a model reads each store's conversations into memory records: "
                                            "what waits, what failed and why, and what each run wrote.")
client = data.client()
org = data.org_id()
assert org is not None  # streamlit_app shows pages only once an organisation is chosen
tz = data.org_timezone(client, org)
index_id, _ = components.choose_store(client, key="extraction", why="extraction writes records into a store")
try:
    found = extraction.switch(client, index_id)
except ApiError as err:
    components.api_error(err, "read the store's extraction switch")
    st.stop()

notice = st.session_state.pop("extraction_notice", None)
if notice:
    st.success(notice, icon=":material/check_circle:")


def run_now(switch: ExtractionSwitchOut) -> None:
    active = switch.state == "active"
    if st.button("Run now", key="extraction_run", type="primary", icon=":material/play_arrow:", disabled=not active,
                 help="Read the quiet threads now instead of waiting for the schedule." if active else
                      "Only an active switch runs: fix its state first."):
        try:
            queued = client.run_extraction(index_id)
        except ApiError as err:
            components.api_error(err, "queue a run")
            return
        extraction.forget()
        st.session_state["extraction_notice"] = (f"Run `{queued.run_id}` queued: the worker reads the quiet threads "
                                                 "now. Press *Refresh* to follow it.")
        st.rerun()


def state_row(switch: ExtractionSwitchOut) -> None:
    text = extraction.state_text(switch.state)
    badge, fix = st.columns([1, 5], vertical_alignment="center")
    with badge:
        st.badge(text.label, color=text.colour, icon=":material/circle:")  # type: ignore[arg-type]
    fix.markdown(text.fix)
    author = f"key `{switch.author_key_id}`" if switch.author_key_id else f"administrator `{switch.author_admin_id}`"
    model = data.model_shown(switch.model, data.model_labels(client), code=True)
    st.caption(f"Model {model} · author {author} · every {switch.schedule_minutes} min, threads quiet for "
               f"{switch.quiet_minutes} min · set {data.local_time(switch.set_at, tz)} ({tz})")


def metrics(switch: ExtractionSwitchOut) -> None:
    changed = extraction.changes(switch)
    helps = {"ready": "Windows read and written; the change is what the last run read.",
             "failed": "Windows that failed for good; the change is what failed in the last run.",
             "queued": "Windows waiting for the worker; the change is what the last run left waiting (queued or "
                       "parked).",
             "parked": "Windows waiting for the monthly token cap to reset."}
    cols = st.columns(4)
    for col, state in zip(cols, extraction.STATES, strict=True):
        delta = changed[state]
        col.metric(state.capitalize(), getattr(switch.windows, state),
                   delta=f"{delta:+d} in the last run" if delta else None,
                   delta_color="inverse" if state == "failed" else "normal", help=helps[state])
    last = switch.last_run
    if last is None:
        st.caption("No run yet: the first one starts on the schedule, or press *Run now*.")
    else:
        took = f", took {last.duration_ms / 1000:.1f} s" if last.duration_ms is not None else ", still running"
        st.caption(f"Last run `{last.id}` ({last.trigger}) started {data.local_time(last.started_at, tz)}{took}: "
                   f"{last.windows_read} of {last.windows} windows read, {last.written} written, {last.confirmed} "
                   f"confirmed, {last.replaced} replaced, {last.failures} failed.")


def windows_chart(per_hour: pl.DataFrame) -> None:
    st.markdown("**Windows by state per hour**", help="Windows finished in each hour of the last two days, in the "
                                                      f"organisation's time zone ({tz}).")
    if int(per_hour["windows"].sum()) == 0:
        st.caption("No window finished in the last two days.")
        return
    chart = alt.Chart(per_hour).mark_area().encode(
        x=alt.X("hour:T", title=None), y=alt.Y("windows:Q", title="windows", stack="zero"),
        color=alt.Color("state:N", scale=alt.Scale(domain=["ready", "failed"], range=["#21c354", "#ff4b4b"])),
        tooltip=["hour:T", "state:N", "windows:Q"]).properties(height=220)
    st.altair_chart(chart, width="stretch")


def errors_chart(errors: pl.DataFrame) -> None:
    st.markdown("**Failed windows by reason**")
    if errors.is_empty():
        st.caption("No window has failed.")
        return
    chart = alt.Chart(errors).mark_bar(color="#ff4b4b").encode(
        x=alt.X("windows:Q", title="failed windows"),
        y=alt.Y("error_code:N", title=None, sort="-x", axis=alt.Axis(labelLimit=220, labelOverlap=False)),
        tooltip=["error_code:N", "windows:Q"]).properties(height=40 + 30 * errors.height)
    st.altair_chart(chart, width="stretch")
    st.caption(" · ".join(f"`{code}` {n}" for code, n in errors.iter_rows()))


def runs_chart(runs: pl.DataFrame, columns: list[str], name: str, title: str, *, bars: bool = False) -> None:
    st.markdown(f"**{title}**")
    if runs.is_empty():
        st.caption("No run yet.")
        return
    if all(int(runs[column].sum()) == 0 for column in columns):
        st.caption(f"Nothing to draw: every one of the last {runs.height} runs counts 0 here.")
        return
    long = extraction.runs_long(runs, columns, name)
    base = alt.Chart(long)
    x = alt.X("run:N", sort=runs["run"].to_list(), title="run, oldest first", axis=alt.Axis(labels=False))
    tooltip = ["run:N", alt.Tooltip("started_at:T", title="started"), f"{name}:N", "value:Q"]
    mark = base.mark_bar() if bars else base.mark_line(point=True)
    chart = mark.encode(x=x, y=alt.Y("value:Q", title=name, stack="zero" if bars else None),
                        color=alt.Color(f"{name}:N", title=None), tooltip=tooltip).properties(height=220)
    st.altair_chart(chart, width="stretch")


FAILED_COLUMNS: dict[str, Any] = {
    "thread": st.column_config.TextColumn("thread", width="medium", pinned=True),
    "items": st.column_config.TextColumn("items", width="small", help="Positions of the thread's items it held"),
    "attempts": st.column_config.NumberColumn("attempts", width="small"),
    "error_code": st.column_config.TextColumn("reason", width="small"),
    "error": st.column_config.TextColumn("error", width="large"),
    "finished_at": st.column_config.DatetimeColumn("failed at", format="YYYY-MM-DD HH:mm", timezone=tz),
    "run": st.column_config.TextColumn("run", width="small"),
    "window": None,
}


def failed_table(frame: pl.DataFrame, total: int) -> None:
    st.subheader("Failed windows", anchor=False)
    if frame.is_empty():
        st.caption("No failed window.")
        return
    st.caption(f"The newest {frame.height} of {total}. Select one to open its thread. Changing the switch's model, "
               "instructions or types queues failed windows once more.")
    state = st.dataframe(frame, hide_index=True, key="extraction_failed", column_config=FAILED_COLUMNS,
                         on_select="rerun", selection_mode="single-row")
    rows = state.selection.rows if state is not None else []
    threads = list(dict.fromkeys(frame["thread"].to_list()))
    selected = frame["thread"][rows[0]] if rows and rows[0] < frame.height else None
    if selected is not None and st.session_state.get("extraction_selected") != selected:
        st.session_state["extraction_selected"] = selected  # a newly selected row picks its thread below
        st.session_state["extraction_thread"] = selected
    pick, go = st.columns([3, 1], vertical_alignment="bottom")
    thread_id = pick.selectbox("Thread of a failed window", threads, index=None, key="extraction_thread",
                               placeholder="select a row above, or pick a thread here")
    if go.button("Open thread", key="extraction_open_thread", icon=":material/forum:", disabled=thread_id is None):
        st.session_state["threads_open_id"] = thread_id
        st.session_state["threads_view"] = "Threads"
        st.switch_page("app_pages/threads.py")


# ---------------------------------------------------------------- the switch: view and editor

FIELD_HELP = {
    "enabled": "Off stops reading; records already written stay.",
    "model": "The offered model that reads the threads.",
    "instructions": "What the model is told beyond the fixed rules, such as what is worth remembering here.",
    "types": "The record types the model may write.",
    "schedule_minutes": "How often a run starts.",
    "quiet_minutes": "A thread is read once nothing was added to it for this long.",
    "threads": "Only threads that name a person, or also threads that name nobody (their records are shared).",
    "episodes": "Also write one episode record per settled session.",
    "lessons": "Also draw lessons from episodes (needs episodes).",
    "key_ids": "Only threads written with one of these keys (none: every key).",
    "agent_ids": "Only threads one of these agents answered (none: every agent).",
}


def field_error(name: str) -> None:
    err: ApiError | None = st.session_state.get("extraction_error")
    if err is not None and extraction.field_of(err.param) == name:
        components.api_error(err, "save the switch")


def named(known: dict[str, str]) -> Any:
    def shown(item: str) -> str:
        return f"{known[item]} ({item})" if item in known else item
    return shown


def switch_editor(switch: ExtractionSwitchOut | None) -> None:
    start = extraction.editor_values(switch)
    loaded = (index_id, switch.set_at if switch else None)
    if st.session_state.get("extraction_loaded") != loaded:  # a new store or a saved switch: refill the editor
        for key in [k for k in st.session_state if str(k).startswith("extraction_field_")]:
            del st.session_state[key]
        st.session_state.pop("extraction_error", None)
        st.session_state["extraction_loaded"] = loaded
    labels = data.model_labels(client)
    models = list(labels)
    if start["model"] and start["model"] not in models:
        models = [start["model"], *models]  # shown as it is; saving it again is refused under the field
    assert org is not None
    keys = data.names(data.keys(client, org))
    agents = extraction.agent_names(client)
    with st.form("extraction_form", border=True):
        values: dict[str, Any] = {}
        top = st.columns([1, 2, 1, 1])
        values["enabled"] = top[0].checkbox("Enabled", value=start["enabled"], key="extraction_field_enabled",
                                            help=FIELD_HELP["enabled"])
        with top[1]:
            values["model"] = st.selectbox("Model", models, index=models.index(start["model"]) if start["model"] in
                                           models else None, key="extraction_field_model", help=FIELD_HELP["model"],
                                           placeholder="choose a model",
                                           format_func=lambda m: data.model_shown(m, labels))
            field_error("model")
        with top[2]:
            values["schedule_minutes"] = st.number_input("Run every (minutes)", min_value=1,
                                                         value=start["schedule_minutes"], step=1,
                                                         key="extraction_field_schedule_minutes",
                                                         help=FIELD_HELP["schedule_minutes"])
            field_error("schedule_minutes")
        with top[3]:
            values["quiet_minutes"] = st.number_input("Quiet for (minutes)", min_value=0,
                                                      value=start["quiet_minutes"], step=1,
                                                      key="extraction_field_quiet_minutes",
                                                      help=FIELD_HELP["quiet_minutes"])
            field_error("quiet_minutes")
        values["instructions"] = st.text_area("Instructions", value=start["instructions"], height=90,
                                              key="extraction_field_instructions", help=FIELD_HELP["instructions"])
        field_error("instructions")
        middle = st.columns([2, 1, 1, 1])
        with middle[0]:
            type_options = list(dict.fromkeys([*DEFAULT_TYPES, *start["types"]]))
            values["types"] = st.multiselect("Record types", type_options, default=start["types"],
                                             accept_new_options=True, key="extraction_field_types",
                                             help=FIELD_HELP["types"])
            field_error("types")
        with middle[1]:
            modes = ["with_person", "all"]
            values["threads"] = st.radio("Threads", modes, index=modes.index(start["threads"]),
                                         key="extraction_field_threads", help=FIELD_HELP["threads"],
                                         format_func=lambda m: "with a person" if m == "with_person" else "all")
        values["episodes"] = middle[2].checkbox("Episodes", value=start["episodes"], key="extraction_field_episodes",
                                                help=FIELD_HELP["episodes"])
        with middle[3]:
            values["lessons"] = st.checkbox("Lessons", value=start["lessons"], key="extraction_field_lessons",
                                            help=FIELD_HELP["lessons"])
            field_error("lessons")
        bottom = st.columns(2)
        for col, name, label, known in ((bottom[0], "key_ids", "Only keys", keys),
                                        (bottom[1], "agent_ids", "Only agents", agents)):
            with col:
                options = list(dict.fromkeys([*known, *start[name]]))
                values[name] = st.multiselect(label, options, default=start[name], key=f"extraction_field_{name}",
                                              format_func=named(known), help=FIELD_HELP[name])
                field_error(name)
        saved = st.form_submit_button("Save the switch", key="extraction_save", type="primary", icon=":material/save:")
    err: ApiError | None = st.session_state.get("extraction_error")
    if err is not None and extraction.field_of(err.param) not in FIELD_HELP:
        components.api_error(err, "save the switch")
    if not saved:
        return
    try:
        body = extraction.switch_body(values)
    except ValueError as exc:
        st.session_state["extraction_error"] = ApiError(0, "incomplete", str(exc), "model")
        st.rerun()
    try:
        client.set_extraction_switch(index_id, body)
    except ApiError as exc:
        st.session_state["extraction_error"] = exc
        st.rerun()
    st.session_state.pop("extraction_error", None)
    extraction.forget()
    st.session_state["extraction_notice"] = "Switch saved: you are its author now."
    st.rerun()


if found is None:
    components.empty_state("Extraction is not set up for this store: a model reads its quiet conversations and writes "
                           "what it learns as memory records. Choose a model below and press *Save the switch*.")
    st.subheader("Switch", anchor=False)
    switch_editor(None)
    st.stop()

state_row(found)
metric_area, run_area = st.columns([5, 1], vertical_alignment="center")
with metric_area:
    metrics(found)
with run_area:
    run_now(found)

try:
    page = extraction.windows(client, index_id, "hour", extraction.HOURS)
    runs = extraction.runs(client, index_id)
except ApiError as err:
    components.api_error(err, "read the store's windows and runs")
    st.stop()

left, right = st.columns([3, 2])
with left:
    windows_chart(extraction.per_hour(page, extraction.HOURS, tz))
with right:
    errors_chart(extraction.error_frame(page))
left, right = st.columns(2)
with left:
    runs_chart(runs, ["written", "confirmed", "replaced"], "records", "Records per run")
with right:
    runs_chart(runs, ["input_tokens", "output_tokens"], "tokens", "Model tokens per run", bars=True)
if runs.is_empty() and found.state == "active":
    st.caption("Press *Run now* to read the quiet threads without waiting for the schedule.")

failed_table(extraction.failed_frame(page.data), page.counts.failed)

st.subheader("Switch", anchor=False)
with st.expander("The switch as saved", icon=":material/data_object:"):
    components.fields_table(pl.DataFrame([{"field": k, "value": str(v)}
                                          for k, v in extraction.editor_values(found).items()],
                                         schema={"field": pl.String, "value": pl.String}),
                            key="extraction_switch_fields")
switch_editor(found)
