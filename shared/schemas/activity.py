"""HTTP contract of activity over time: counts per calendar day (records written, messages, audit events) and the
record changes feed (who changed which record, from record history)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

import msgspec

from shared.schemas.common import Model
from shared.schemas.memory import VersionActor

MAX_DAYS = 366
VersionAction = Literal["created", "updated", "confirmed", "replaced", "verified"]


class DailyQuery(Model):
    """How far back a per-day count looks: calendar days in the organisation's time zone, today included."""

    days: Annotated[int, msgspec.Meta(ge=1, le=MAX_DAYS, description="Calendar days ending today, in the "
                                                                     "organisation's time zone")] = 30


class DayCount(Model):
    day: str  # YYYY-MM-DD, a calendar day in the organisation's time zone
    name: str  # what was counted: a record version's action, a message's role, an audit event's action
    count: int


class DailyCounts(Model):
    timezone: str
    days: list[str]  # every day the count covers, oldest first (days without anything have no rows in `data`)
    data: list[DayCount]


class ChangeQuery(Model):
    """The filters of `GET /memory/changes`: every record version the request may see, newest first."""

    index_id: str | None = None
    subject: Annotated[str, msgspec.Meta(description="One person's records; for requests naming nobody and "
                                                     "administrators")] | None = None
    action: Annotated[list[VersionAction], msgspec.Meta(description="Repeatable: any of these")] = []
    actor_type: Literal["key", "admin", "subject", "system"] | None = None
    actor_id: str | None = None


class RecordChange(Model):
    """One version of one record: what it said after that write, who wrote it and when."""

    record_id: str
    index_id: str
    type: str
    subject: str | None  # the record's owner; null = shared
    version: int
    at: datetime
    action: VersionAction
    actor: VersionActor
    text: str
    status: Literal["active", "replaced"]


class RecordChangePage(Model):
    data: list[RecordChange]
    next_cursor: str | None


__all__ = (
    "MAX_DAYS",
    "ChangeQuery",
    "DailyCounts",
    "DailyQuery",
    "DayCount",
    "RecordChange",
    "RecordChangePage",
    "VersionAction",
)
