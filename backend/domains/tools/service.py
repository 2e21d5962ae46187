"""Tools outside a turn (MEM-20 … MEM-22): listing the memory tools and running one with the same checks."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

from sqlalchemy.ext.asyncio import AsyncSession

from backend.access.principal import Principal
from backend.domains.indexes import repository as indexes_repo
from backend.domains.indexes import service as indexes
from backend.domains.memory import service as memory
from backend.domains.orgs.service import check_timezone
from backend.domains.tools import memory_tools as mt
from backend.errors import ApiError, BadRequest, NotFound

PAGE = 200


def zone_name(r: memory.Reader, requested: str | None) -> str:
    """The turn's zone: the request's `timezone`, else the organisation's, else UTC (MEM-21)."""
    if requested:
        return check_timezone(requested, "timezone")
    return str(r.org.get("timezone") or "UTC")


def offered(principal: Principal, kind: str) -> bool:
    """The key's `memory.retrieval_tool` / `memory.write_tool` decide which tool may be offered (MEM-20)."""
    if principal.key is None:
        return True
    config = principal.key.get("memory") or {}
    if kind == mt.SEARCH:
        return bool(config.get("retrieval_tool", True))
    return bool(config.get("write_tool", False))


def describe(r: memory.Reader, index: dict[str, Any], kind: str, zone: str) -> dict[str, Any]:
    if kind == mt.SEARCH:
        description, parameters = mt.search_description(index), mt.search_schema()
    else:
        types = memory.store_types(index)
        today = datetime.now(UTC).astimezone(ZoneInfo(zone)).date()
        description, parameters = mt.write_description(index, types, today, zone), mt.write_schema(types)
    return {"name": mt.tool_name(index["id"], kind), "type": "tool", "source": "memory", "index_id": index["id"],
            "description": description, "parameters": parameters, "offered": offered(r.principal, kind)}


async def list_tools(db: AsyncSession, principal: Principal, secret: str, source: str | None,
                     timezone: str | None) -> list[dict[str, Any]]:
    r = await memory.reader(db, principal, secret)
    if source not in (None, "memory"):
        raise BadRequest("Only `source=memory` is listed here.", param="source", code="unknown_source")
    zone = zone_name(r, timezone)
    tools: list[dict[str, Any]] = []
    after: str | None = None
    while True:
        page = await indexes_repo.list_page(db, r.scope, after, PAGE)
        for index in page:
            tools += [describe(r, index, mt.SEARCH, zone), describe(r, index, mt.WRITE, zone)]
        if len(page) < PAGE:
            return tools
        after = page[-1]["id"]


async def call(db: AsyncSession, principal: Principal, secret: str, name: str, arguments: dict[str, Any],
               timezone: str | None, *, provenance: dict[str, Any] | None = None) -> str:
    """Run a memory tool; errors are ApiErrors naming `arguments.…` (inside a turn: see tool_error_output)."""
    r = await memory.reader(db, principal, secret)
    memory.reject_nul(arguments, "arguments")
    parsed = mt.parse_name(name)
    if parsed is None:
        raise NotFound(f"There is no tool named {name!r}.", param="name", code="tool_not_found")
    index_id, kind = parsed
    index = await indexes.reachable(db, r.scope, index_id, param="name")
    if not offered(principal, kind):
        setting = "retrieval_tool" if kind == mt.SEARCH else "write_tool"
        raise BadRequest(f"This key's memory configuration does not offer {name!r} (`memory.{setting}`).",
                         param="name", code="tool_not_offered")
    zone_name(r, timezone)
    if kind == mt.SEARCH:
        return await mt.run_search(db, r, index, arguments, route="POST /tools/{name}/call")
    return await mt.run_write(db, r, index, arguments, provenance=provenance)


def tool_error_output(error: ApiError) -> str:
    """What a model reads when a platform tool refuses inside a turn."""
    return json.dumps({"error": {"code": error.code, "message": error.message, "param": error.param}},
                      ensure_ascii=False)
