"""HTTP routes: tools outside a turn (MEM-20 … MEM-22)."""

from __future__ import annotations

from typing import Annotated

import msgspec
from litestar import Controller, get, post
from litestar.params import Parameter

from backend.access.context import RequestContext
from backend.domains.tools import service
from shared.schemas.memory import ToolCall, ToolPage, ToolResult


class ToolController(Controller):
    path = "/tools"
    tags = ["tools"]

    @get("", summary="The memory tools of every index this credential reaches, with argument schemas")
    async def list_tools(
        self, ctx: RequestContext,
        source: Annotated[str | None, Parameter(description="`memory`")] = None,
        timezone: Annotated[str | None, Parameter(description="IANA zone for today's date in the write tool")] = None,
    ) -> ToolPage:
        tools = await service.list_tools(ctx, source, timezone)
        return msgspec.convert({"data": tools, "next_cursor": None}, ToolPage)

    @post("/{name:str}/call", status_code=200, summary="Run a tool outside a turn, with the same checks")
    async def call(self, name: str, data: ToolCall, ctx: RequestContext) -> ToolResult:
        return ToolResult(name=name, output=await service.call(ctx, name, data.arguments, data.timezone))
