"""HTTP routes: a store's extraction switch, its runs and its windows (EXT-2 … EXT-4)."""

from __future__ import annotations

import msgspec
from litestar import Controller, get, post, put
from litestar.di import Provide

from backend.access.context import RequestContext
from backend.domains.extraction import switch
from backend.params import Page, query_dependency
from shared.schemas.extraction import (
    ExtractionSwitchIn,
    ExtractionSwitchOut,
    RunPage,
    RunQueued,
    WindowPage,
    WindowQuery,
)


class ExtractionController(Controller):
    path = "/memory/stores/{index_id:str}/extraction"
    tags = ["extraction"]

    @put("", summary="Set the store's extraction switch, on or off; the sender becomes its author")
    async def put_switch(self, index_id: str, data: ExtractionSwitchIn, ctx: RequestContext) -> ExtractionSwitchOut:
        return msgspec.convert(await switch.put(ctx, index_id, data), ExtractionSwitchOut)

    @get("", summary="The switch, its author, state, last run, window counts and most common failure")
    async def get_switch(self, index_id: str, ctx: RequestContext) -> ExtractionSwitchOut:
        return msgspec.convert(await switch.get(ctx, index_id), ExtractionSwitchOut)

    @post("/run", status_code=202, summary="Queue a run now, without waiting for the schedule")
    async def run(self, index_id: str, ctx: RequestContext) -> RunQueued:
        return RunQueued(run_id=await switch.run_now(ctx, index_id))

    @get("/runs", summary="The switch's runs, newest first, with per-run counts and durations")
    async def runs(self, index_id: str, ctx: RequestContext, page: Page) -> RunPage:
        rows = await switch.runs(ctx, index_id, page.after(str), page.fetch(20))
        data, next_cursor = page.cut(rows, lambda row: row["id"])
        return msgspec.convert({"data": data, "next_cursor": next_cursor}, RunPage)

    @get("/windows", summary="Windows (filter by state, error code, run) with counts per state and error code and "
                             "finished windows per hour or day", dependencies={
                                 "filters": Provide(query_dependency(WindowQuery))})
    async def windows(self, index_id: str, ctx: RequestContext, filters: WindowQuery, page: Page) -> WindowPage:
        rows, extra = await switch.windows(ctx, index_id, filters, page.after(str), page.fetch())
        data, next_cursor = page.cut(rows, lambda row: row["id"])
        return msgspec.convert({"data": data, "next_cursor": next_cursor, **extra}, WindowPage)
