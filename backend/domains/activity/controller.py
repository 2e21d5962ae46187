"""HTTP routes: activity over time (per-day counts) and the record changes feed."""

from __future__ import annotations

import msgspec
from litestar import Controller, get
from litestar.di import Provide

from backend.access.context import RequestContext
from backend.domains.activity import service
from backend.params import Page, query_dependency
from shared.schemas.activity import ChangeQuery, DailyCounts, DailyQuery, RecordChangePage


class ActivityController(Controller):
    path = "/activity"
    tags = ["activity"]
    dependencies = {"daily": Provide(query_dependency(DailyQuery)), "changes": Provide(query_dependency(ChangeQuery))}

    @get("/records", summary="Record versions written per day (created, updated, confirmed, …), by action",
         description="Calendar days in the organisation's time zone, today included. Administrators and keys with "
                     "`management`; counts the records the request may read.")
    async def records(self, ctx: RequestContext, daily: DailyQuery) -> DailyCounts:
        return msgspec.convert(await service.records_per_day(ctx, daily.days), DailyCounts)

    @get("/messages", summary="Messages written per day, by role",
         description="Calendar days in the organisation's time zone, today included. Administrators and keys with "
                     "`management`; counts the threads the request may read.")
    async def messages(self, ctx: RequestContext, daily: DailyQuery) -> DailyCounts:
        return msgspec.convert(await service.messages_per_day(ctx, daily.days), DailyCounts)

    @get("/audit", summary="Audit events per day, by action (administrators)")
    async def audit(self, ctx: RequestContext, daily: DailyQuery) -> DailyCounts:
        return msgspec.convert(await service.events_per_day(ctx, daily.days), DailyCounts)

    @get("/changes", summary="Record versions across records, newest first: who changed which record, and when")
    async def record_changes(self, ctx: RequestContext, changes: ChangeQuery, page: Page) -> RecordChangePage:
        docs, next_cursor = await service.changes(ctx, changes, page)
        return msgspec.convert({"data": docs, "next_cursor": next_cursor}, RecordChangePage)
