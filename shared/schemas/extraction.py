"""HTTP contract of extraction (EXT-2 … EXT-11): the switch per store, its runs and its windows."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

import msgspec

from shared.schemas.common import Model

DEFAULT_TYPES = ("fact", "preference", "commitment", "behaviour")
TypeName = Annotated[str, msgspec.Meta(pattern=r"^[a-z][a-z0-9_]{0,31}$")]
Id = Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
WindowState = Literal["queued", "ready", "failed", "parked"]
SwitchState = Literal["active", "off", "author_unavailable", "model_unavailable", "objects_missing"]


class ExtractionFilters(Model):
    key_ids: Annotated[list[Id], msgspec.Meta(max_length=200)] = []
    agent_ids: Annotated[list[Id], msgspec.Meta(max_length=200)] = []


class ExtractionSwitchIn(Model):
    enabled: bool
    model: Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
    instructions: Annotated[str, msgspec.Meta(max_length=20_000)] = ""
    types: Annotated[list[TypeName], msgspec.Meta(min_length=1, max_length=32)] = msgspec.field(
        default_factory=lambda: list(DEFAULT_TYPES))
    schedule_minutes: Annotated[int, msgspec.Meta(ge=1, le=7 * 24 * 60)] = 60
    quiet_minutes: Annotated[int, msgspec.Meta(ge=0, le=7 * 24 * 60)] = 30
    threads: Literal["with_person", "all"] = "with_person"
    episodes: bool = False
    lessons: bool = False
    filters: ExtractionFilters = msgspec.field(default_factory=ExtractionFilters)


class WindowCounts(Model):
    ready: int
    failed: int
    queued: int
    parked: int


class RunOut(Model):
    id: str
    trigger: Literal["schedule", "manual", "requeue"]
    started_at: datetime
    finished_at: datetime | None
    windows: int
    windows_read: int
    written: int
    confirmed: int
    replaced: int
    dropped: int
    failures: int
    duration_ms: int | None
    input_tokens: int  # model tokens of the calls that finished its windows
    output_tokens: int


class ExtractionSwitchOut(Model):
    index_id: str
    enabled: bool
    model: str
    instructions: str
    types: list[str]
    schedule_minutes: int
    quiet_minutes: int
    threads: Literal["with_person", "all"]
    episodes: bool
    lessons: bool
    filters: ExtractionFilters
    author_key_id: str | None
    author_admin_id: str | None
    set_at: datetime
    state: SwitchState
    last_run: RunOut | None
    windows: WindowCounts
    error_code: str | None


class RunPage(Model):
    data: list[RunOut]
    next_cursor: str | None


class RunQueued(Model):
    run_id: str


class WindowOut(Model):
    id: str
    thread_id: str
    run_id: str
    first_position: int
    last_position: int
    items: int
    state: WindowState
    attempts: int
    error_code: str | None
    error: str | None
    written: int
    confirmed: int
    replaced: int
    dropped: int
    created_at: datetime
    finished_at: datetime | None
    # EXT-12: on the window that ends a session (its episode is written with it), where the session began.
    session_first_position: int | None = None


class WindowBucket(Model):
    """Windows finished in one hour or day, per state they ended in."""

    at: datetime
    ready: int
    failed: int


class WindowPage(Model):
    data: list[WindowOut]
    next_cursor: str | None
    counts: WindowCounts
    error_codes: dict[str, int]
    buckets: list[WindowBucket]


class WindowQuery(Model):
    state_: WindowState | None = msgspec.field(default=None, name="state")  # `state` is a name Litestar keeps
    error_code: Annotated[str, msgspec.Meta(max_length=64)] | None = None
    run_id: Id | None = None
    bucket: Literal["hour", "day"] = "hour"
    buckets: Annotated[int, msgspec.Meta(ge=1, le=366)] = 48


__all__ = (
    "DEFAULT_TYPES",
    "ExtractionFilters",
    "ExtractionSwitchIn",
    "ExtractionSwitchOut",
    "Id",
    "RunOut",
    "RunPage",
    "RunQueued",
    "SwitchState",
    "TypeName",
    "WindowBucket",
    "WindowCounts",
    "WindowOut",
    "WindowPage",
    "WindowQuery",
    "WindowState",
)
