"""What the extraction health page and the overview read: a store's switch, its windows counted by the API, its runs,
and the switch's editor values (DSH-5, DSH-2). Every chart is drawn from aggregates the API computes; no page of
windows is walked to count."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import polars as pl

from dashboard.data import _cached
from shared.client import ApiError, CoreClient
from shared.schemas.extraction import DEFAULT_TYPES, ExtractionSwitchOut, WindowOut, WindowPage, WindowQuery

STATES = ("ready", "failed", "queued", "parked")
HOURS = 48  # the windows-by-state chart's hours
RUNS_SHOWN = 30
FAILED_SHOWN = 50
NOT_SET = "not_set"  # a store whose switch was never sent


@dataclass(frozen=True)
class StateText:
    label: str
    colour: str
    fix: str


STATE_TEXT: dict[str, StateText] = {
    "active": StateText("active", "green", "Extraction reads quiet threads on its schedule; nothing to fix."),
    "off": StateText("off", "gray", "Switched off: tick *Enabled* in the switch below and save it to read threads "
                                    "again. What was written stays."),
    "author_unavailable": StateText(
        "author unavailable", "red", "The key that set the switch was revoked, expired or deleted: save the switch "
                                     "again and you become its author."),
    "model_unavailable": StateText(
        "model unavailable", "orange", "The switch's model is no longer offered to this organisation: pick an "
                                       "offered model in the switch and save it."),
    "objects_missing": StateText("store missing", "red", "The store's index was deleted: create it again, then save "
                                                         "the switch."),
    NOT_SET: StateText("not set up", "gray", "Extraction was never switched on for this store: set the switch to "
                                             "let a model read its threads."),
}


def state_text(state: str) -> StateText:
    return STATE_TEXT.get(state, StateText(state.replace("_", " "), "gray", "Save the switch again."))


# ---------------------------------------------------------------- reads (cached per session, like every page)


@_cached
def switch(client: CoreClient, index_id: str) -> ExtractionSwitchOut | None:
    """The store's switch, or None when it was never sent (the API's `switch_not_found`)."""
    try:
        return client.extraction_switch(index_id)
    except ApiError as err:
        if err.code == "switch_not_found":
            return None
        raise


@_cached
def windows(client: CoreClient, index_id: str, bucket: str, buckets: int) -> WindowPage:
    """The newest failed windows, with the counts per state, per error code and the finished windows per `bucket`
    (one call, aggregated by the API)."""
    query = WindowQuery(state_="failed", bucket=bucket, buckets=buckets)  # type: ignore[arg-type]
    return client.extraction_windows(index_id, query, limit=FAILED_SHOWN)


@_cached
def runs(client: CoreClient, index_id: str) -> pl.DataFrame:
    """The newest runs, oldest first (as a chart reads them)."""
    rows = [{"run": r.id, "trigger": r.trigger, "started_at": r.started_at, "finished_at": r.finished_at,
             "windows": r.windows, "read": r.windows_read, "failures": r.failures, "written": r.written,
             "confirmed": r.confirmed, "replaced": r.replaced, "dropped": r.dropped, "duration_ms": r.duration_ms,
             "input_tokens": r.input_tokens, "output_tokens": r.output_tokens}
            for r in client.extraction_runs(index_id, limit=RUNS_SHOWN).data]
    instant = pl.Datetime("us", "UTC")
    schema: dict[str, Any] = {"run": pl.String, "trigger": pl.String, "started_at": instant, "finished_at": instant,
                              "windows": pl.Int64, "read": pl.Int64, "failures": pl.Int64, "written": pl.Int64,
                              "confirmed": pl.Int64, "replaced": pl.Int64, "dropped": pl.Int64,
                              "duration_ms": pl.Int64, "input_tokens": pl.Int64, "output_tokens": pl.Int64}
    return pl.DataFrame(rows, schema=schema).reverse()


@_cached
def agent_names(client: CoreClient) -> dict[str, str]:
    return {a.id: a.name for a in client.all_agents()}


# ---------------------------------------------------------------- shapes for the page


def changes(found: ExtractionSwitchOut) -> dict[str, int | None]:
    """What the last run changed per state: windows it read (ready), failed, and left waiting (queued or parked,
    shown on queued); None where nothing is known."""
    last = found.last_run
    if last is None:
        return dict.fromkeys(STATES, None)
    waiting = max(last.windows - last.windows_read - last.failures, 0)
    return {"ready": last.windows_read, "failed": last.failures, "queued": waiting, "parked": None}


def per_hour(page: WindowPage, hours: int, tz: str, now: datetime | None = None) -> pl.DataFrame:
    """Windows finished per hour and state over the last `hours` hours (quiet hours as zeros): hour, state, windows."""
    zone = ZoneInfo(tz)
    top = (now or datetime.now(zone)).astimezone(zone).replace(minute=0, second=0, microsecond=0)
    found = {b.at.astimezone(zone).replace(tzinfo=None): b for b in page.buckets}
    rows = []
    for n in range(hours - 1, -1, -1):
        hour = (top - timedelta(hours=n)).replace(tzinfo=None)
        bucket = found.get(hour)
        rows.append({"hour": hour, "state": "ready", "windows": bucket.ready if bucket else 0})
        rows.append({"hour": hour, "state": "failed", "windows": bucket.failed if bucket else 0})
    return pl.DataFrame(rows, schema={"hour": pl.Datetime("us"), "state": pl.String, "windows": pl.Int64})


def per_day(page: WindowPage, tz: str) -> pl.DataFrame:
    """Windows finished per calendar day and state: day, name (state), count."""
    zone = ZoneInfo(tz)
    rows = [{"day": f"{b.at.astimezone(zone):%Y-%m-%d}", "name": state, "count": count} for b in page.buckets
            for state, count in (("ready", b.ready), ("failed", b.failed)) if count]
    return pl.DataFrame(rows, schema={"day": pl.String, "name": pl.String, "count": pl.Int64})


def error_frame(page: WindowPage) -> pl.DataFrame:
    rows = [{"error_code": code, "windows": n} for code, n in page.error_codes.items()]
    return pl.DataFrame(rows, schema={"error_code": pl.String, "windows": pl.Int64})


def failed_frame(found: list[WindowOut]) -> pl.DataFrame:
    rows = [{"thread": w.thread_id, "items": f"{w.first_position}–{w.last_position}", "attempts": w.attempts,
             "error_code": w.error_code or "", "error": w.error or "", "finished_at": w.finished_at, "run": w.run_id,
             "window": w.id} for w in found]
    instant = pl.Datetime("us", "UTC")
    return pl.DataFrame(rows, schema={"thread": pl.String, "items": pl.String, "attempts": pl.Int64,
                                      "error_code": pl.String, "error": pl.String, "finished_at": instant,
                                      "run": pl.String, "window": pl.String})


def runs_long(frame: pl.DataFrame, columns: list[str], name: str) -> pl.DataFrame:
    """Per-run counts as long rows (run, started_at, `name`, value) for a line chart."""
    return frame.select("run", "started_at", *columns).unpivot(index=["run", "started_at"], variable_name=name,
                                                                value_name="value")


# ---------------------------------------------------------------- the switch's editor


def editor_values(found: ExtractionSwitchOut | None) -> dict[str, Any]:
    """What the editor starts from: the switch as it is, or the API's defaults for a new one."""
    if found is None:
        return {"enabled": True, "model": None, "instructions": "", "types": list(DEFAULT_TYPES),
                "schedule_minutes": 60, "quiet_minutes": 30, "threads": "with_person", "episodes": False,
                "lessons": False, "key_ids": [], "agent_ids": []}
    return {"enabled": found.enabled, "model": found.model, "instructions": found.instructions,
            "types": list(found.types), "schedule_minutes": found.schedule_minutes,
            "quiet_minutes": found.quiet_minutes, "threads": found.threads, "episodes": found.episodes,
            "lessons": found.lessons, "key_ids": list(found.filters.key_ids),
            "agent_ids": list(found.filters.agent_ids)}


def switch_body(values: dict[str, Any]) -> dict[str, Any]:
    """The editor's values as the PUT body: a mapping, so the API judges them and names a refused field."""
    if not values.get("model"):
        raise ValueError("Pick the model that reads the threads.")
    return {"enabled": bool(values["enabled"]), "model": values["model"], "instructions": values["instructions"],
            "types": list(values["types"]), "schedule_minutes": int(values["schedule_minutes"]),
            "quiet_minutes": int(values["quiet_minutes"]), "threads": values["threads"],
            "episodes": bool(values["episodes"]), "lessons": bool(values["lessons"]),
            "filters": {"key_ids": list(values["key_ids"]), "agent_ids": list(values["agent_ids"])}}


def field_of(param: str | None) -> str | None:
    """The editor field an API refusal names: `filters.agent_ids[0]` → `agent_ids`, `types[2]` → `types`."""
    if not param:
        return None
    head = param.split("[", 1)[0]
    return head.removeprefix("filters.")


# ---------------------------------------------------------------- every store at once (the overview)


def store_states(client: CoreClient, names: dict[str, str]) -> pl.DataFrame:
    """Each store's extraction state with its label and fix: store, state, label, colour, fix, failed."""
    rows = []
    for index_id, name in names.items():
        found = switch(client, index_id)
        state = found.state if found is not None else NOT_SET
        text = state_text(state)
        rows.append({"store": name, "index_id": index_id, "state": state, "label": text.label, "colour": text.colour,
                     "fix": text.fix, "failed": found.windows.failed if found is not None else 0})
    return pl.DataFrame(rows, schema={"store": pl.String, "index_id": pl.String, "state": pl.String,
                                      "label": pl.String, "colour": pl.String, "fix": pl.String,
                                      "failed": pl.Int64})


def windows_per_day(client: CoreClient, index_ids: list[str], days: int, tz: str) -> pl.DataFrame:
    """Windows finished per day and state over the last `days` days, summed over the stores with a switch."""
    frames = [per_day(windows(client, index_id, "day", days), tz) for index_id in index_ids]
    if not frames:
        return pl.DataFrame(schema={"day": pl.String, "name": pl.String, "count": pl.Int64})
    return pl.concat(frames).group_by("day", "name").agg(pl.col("count").sum()).sort("day", "name")


def forget() -> None:
    """After a change (switch saved, run queued), ask the API again."""
    for fn in (switch, windows, runs):
        fn.clear()
