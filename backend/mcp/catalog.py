"""What one caller is offered over MCP and running it: the memory tools exactly as `GET /tools` lists them for
the same credential (only those its key offers), the thread tools when it holds `threads`, and a block resource
per store it reaches. Everything runs in the caller's request context through the REST routes' services."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import mcp_types as types

from backend.access.context import RequestContext
from backend.domains.indexes import repository as indexes_repo
from backend.domains.injection.own_block import read_block
from backend.domains.memory.rules import memory_scope, reject_nul
from backend.domains.tools import service as memory_tools
from backend.errors import BadRequest, NotFound
from backend.mcp.thread_tools import BY_NAME, THREAD_TOOLS
from backend.params import Page

BLOCK_TEMPLATE = "memory://{index_id}/block"
RESOURCE_PAGE = 100


def _annotations(read_only: bool) -> types.ToolAnnotations:
    return types.ToolAnnotations(read_only_hint=read_only, destructive_hint=False, open_world_hint=False)


async def list_tools(ctx: RequestContext) -> list[types.Tool]:
    _ = ctx.scope  # a key that requires a person refuses a request naming nobody here too (PLT-7)
    tools: list[types.Tool] = []
    if "memory" in ctx.principal.capabilities:
        for tool in await memory_tools.list_tools(ctx, "memory", None):
            if tool["offered"]:
                tools.append(types.Tool(name=tool["name"], description=tool["description"],
                                        input_schema=tool["parameters"],
                                        annotations=_annotations(tool["name"].endswith("__search"))))
    if "threads" in ctx.principal.capabilities:
        tools += [types.Tool(name=t.name, description=t.description, input_schema=t.schema,
                             annotations=_annotations(t.read_only)) for t in THREAD_TOOLS]
    return tools


async def call_tool(ctx: RequestContext, name: str, arguments: Mapping[str, Any]) -> str:
    """The text the caller reads: the REST answer's body (the memory tools' output, as in a turn)."""
    reject_nul(name, "name")
    reject_nul(dict(arguments), "arguments")
    reject_non_finite(dict(arguments), "arguments")
    tool = BY_NAME.get(name)
    if tool is not None:
        return await tool.call(ctx, arguments)
    return await memory_tools.call(ctx, name, dict(arguments), None)


def reject_non_finite(value: Any, param: str) -> None:
    """The SDK's JSON reader takes `NaN`, `Infinity` and `1e999`, which JSON has no number for: REST refuses them as
    an unreadable body, and stored they would turn into null. Refused here the same way, naming where."""
    if isinstance(value, float) and not math.isfinite(value):
        raise BadRequest(f"`{param}` is {value!r}, which is no JSON number; send a finite number.", param=param,
                         code="malformed_body")
    if isinstance(value, dict):
        for key, item in value.items():
            reject_non_finite(item, f"{param}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            reject_non_finite(item, f"{param}[{i}]")


# ---------------------------------------------------------------- resources

def block_uri(index_id: str) -> str:
    return BLOCK_TEMPLATE.format(index_id=index_id)


async def list_resources(ctx: RequestContext, cursor: str | None) -> tuple[list[types.Resource], str | None]:
    if "memory" not in ctx.principal.capabilities:
        _ = ctx.scope
        return [], None
    page = Page(cursor, RESOURCE_PAGE)
    rows = await indexes_repo.list_page(ctx.db, memory_scope(ctx), page.after(str), page.fetch())
    rows, next_cursor = page.cut(rows, lambda row: row["id"])
    return [types.Resource(uri=block_uri(row["id"]), name=f"{row['name']} block", mime_type="text/plain",
                           title=f"Injection block of {row['name']}",
                           description=f"What a turn for this caller would be given from the memory store "
                                       f"{row['name']!r} ({row['id']}); reading it counts no recall.")
            for row in rows], next_cursor


def block_template() -> types.ResourceTemplate:
    return types.ResourceTemplate(uri_template=BLOCK_TEMPLATE, name="injection block", mime_type="text/plain",
                                  description="The injection block of a memory store for this caller.")


async def read_resource(ctx: RequestContext, uri: str) -> types.TextResourceContents:
    reject_nul(uri, "uri")
    parts = urlsplit(uri)
    if parts.scheme != "memory" or not parts.netloc or parts.path != "/block" or parts.query or parts.fragment:
        raise NotFound(f"There is no resource {uri!r}; blocks are read as memory://<index_id>/block.",
                       param="uri", code="resource_not_found")
    block = await read_block(ctx, parts.netloc, route="MCP resources/read memory://{index_id}/block")
    meta = {k: block[k] for k in ("store_override", "reason", "injected_ids", "estimated_tokens")}
    return types.TextResourceContents(uri=uri, mime_type="text/plain", text=block["block"],
                                      _meta={"coremem/block": meta})
