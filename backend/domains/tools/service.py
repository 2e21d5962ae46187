"""Tools outside a turn (MEM-20 … MEM-22): listing the memory tools and running one with the same checks."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

from backend.access.context import RequestContext
from backend.domains.extraction.session_repository import switch_types
from backend.domains.indexes import repository as indexes_repo
from backend.domains.indexes import service as indexes
from backend.domains.memory.rules import memory_scope, reject_nul, store_types
from backend.domains.orgs.service import check_timezone
from backend.domains.tools import memory_tools as mt
from backend.errors import ApiError, BadRequest, NotFound

PAGE = 200


def zone_name(ctx: RequestContext, requested: str | None) -> str:
    """The turn's zone: the request's `timezone`, else the organisation's, else UTC (MEM-21)."""
    if requested is not None:  # "" is refused (422), not taken for the organisation's zone
        return check_timezone(requested, "timezone")
    return str(ctx.org.get("timezone") or "UTC")


async def with_store_types(ctx: RequestContext, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The index rows with the types their write tool takes (`store_types`: the extraction switch's, MEM-21)."""
    types = await switch_types(ctx.db, ctx.org_id, [row["id"] for row in rows])
    return [{**row, "store_types": types[row["id"]]} if row["id"] in types else row for row in rows]


def offered(ctx: RequestContext, kind: str) -> bool:
    """The key's `memory.retrieval_tool` / `memory.write_tool` decide which tool may be offered (MEM-20)."""
    key = ctx.principal.key
    if key is None:
        return True
    config = key.get("memory") or {}
    if kind == mt.SEARCH:
        return bool(config.get("retrieval_tool", True))
    return bool(config.get("write_tool", False))


def describe(ctx: RequestContext, index: dict[str, Any], kind: str, zone: str) -> dict[str, Any]:
    if kind == mt.SEARCH:
        description, parameters = mt.search_description(index), mt.search_schema()
    else:
        types = store_types(index)
        today = datetime.now(UTC).astimezone(ZoneInfo(zone)).date()
        description, parameters = mt.write_description(index, types, today, zone), mt.write_schema(types)
    return {"name": mt.tool_name(index["id"], kind), "type": "tool", "source": "memory", "index_id": index["id"],
            "description": description, "parameters": parameters, "offered": offered(ctx, kind)}


async def list_tools(ctx: RequestContext, source: str | None, timezone: str | None) -> list[dict[str, Any]]:
    scope = memory_scope(ctx)
    if source not in (None, "memory"):
        raise BadRequest("Only `source=memory` is listed here.", param="source", code="unknown_source")
    zone = zone_name(ctx, timezone)
    tools: list[dict[str, Any]] = []
    after: str | None = None
    while True:
        page = await indexes_repo.list_page(ctx.db, scope, after, PAGE)
        for index in await with_store_types(ctx, page):
            tools += [describe(ctx, index, mt.SEARCH, zone), describe(ctx, index, mt.WRITE, zone)]
        if len(page) < PAGE:
            return tools
        after = page[-1]["id"]


async def call(ctx: RequestContext, name: str, arguments: dict[str, Any], timezone: str | None, *,
               provenance: dict[str, Any] | None = None, index: dict[str, Any] | None = None,
               labels: dict[str, Any] | None = None, embed_later: list[str] | None = None,
               insert_later: list[mt.LaterStep] | None = None) -> str:
    """Run a memory tool; errors are ApiErrors naming `arguments.…` (inside a turn: see tool_error_output).

    `index`: the tool's index with its store types as this request already resolved it (a turn does when it
    accepts the tools it offers); the record a write tool writes is still checked against the write scope in SQL.
    `labels`: the labels of the thread a turn's write tool writes from (THR-5); the record starts with them.
    `embed_later`, `insert_later`: see `memory_tools.run_write`.
    """
    scope = memory_scope(ctx)
    reject_nul(arguments, "arguments")
    parsed = mt.parse_name(name)
    if parsed is None:
        raise NotFound(f"There is no tool named {name!r}.", param="name", code="tool_not_found")
    index_id, kind = parsed
    if index is None or index["id"] != index_id:
        index = await indexes.reachable_with_store_types(ctx.db, scope, index_id, param="name")
    if not offered(ctx, kind):
        setting = "retrieval_tool" if kind == mt.SEARCH else "write_tool"
        raise BadRequest(f"This key's memory configuration does not offer {name!r} (`memory.{setting}`).",
                         param="name", code="tool_not_offered")
    zone_name(ctx, timezone)
    if kind == mt.SEARCH:
        return await mt.run_search(ctx, index, arguments, route="POST /tools/{name}/call")
    return await mt.run_write(ctx, index, arguments, provenance=provenance, labels=labels,
                              embed_later=embed_later, insert_later=insert_later)


def tool_error_output(error: ApiError) -> str:
    """What a model reads when a platform tool refuses inside a turn."""
    return json.dumps({"error": {"code": error.code, "message": error.message, "param": error.param}},
                      ensure_ascii=False)
