"""The thread tools over MCP: search (THR-7), reading a thread's items, notes (THR-8) and working state (THR-11).

Each tool is a REST route in other clothes: its arguments are the route's parameters, checked against a JSON
Schema and then converted to the route's own Struct; it calls the route's service with the caller's request
context and answers the route's JSON body. A refusal names the argument at fault (`arguments.<name>`).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import msgspec

from backend.access.context import RequestContext
from backend.domains.threads import searching, service
from backend.domains.tools.memory_tools import check_arguments
from backend.errors import ApiError, ValidationFailed
from backend.params import MAX_PAGE, Page
from shared.schemas.threads import ItemSearchQuery, ItemsOut, NoteIn, NoteOut, SearchPage, StateOut

S = TypeVar("S", bound=msgspec.Struct)
_AT = re.compile(r" - at `\$\.?(?P<path>[^`]*)`")
THREAD_ID = {"type": "string", "minLength": 1, "description": "The thread's id (thr_…)."}
CURSOR = {"type": "string", "description": "`next_cursor` of the previous page; leave out for the first page."}


def _limit(default: int) -> dict[str, Any]:
    return {"type": "integer", "minimum": 1, "maximum": MAX_PAGE, "default": default,
            "description": f"Page size (at most {MAX_PAGE})."}


def _struct_properties(struct: type[msgspec.Struct]) -> dict[str, Any]:
    """The fields of a REST Struct as plain JSON Schema properties (optional fields without their `null`)."""
    doc = msgspec.json.schema(struct)
    properties: dict[str, Any] = {}
    for name, prop in doc["$defs"][struct.__name__]["properties"].items():
        variants = [v for v in prop.get("anyOf", []) if v != {"type": "null"}]
        properties[name] = dict(variants[0]) if len(variants) == 1 else \
            {k: v for k, v in prop.items() if k != "default"}
    return properties


def _object(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "additionalProperties": False, "required": required, "properties": properties}


def _convert(value: Mapping[str, Any], struct: type[S]) -> S:
    try:
        return msgspec.convert(dict(value), struct)
    except msgspec.ValidationError as exc:
        message = str(exc)
        found = _AT.search(message)
        path = found.group("path") if found else ""
        raise ValidationFailed(_AT.sub("", message) + ".", param=f"arguments.{path}" if path else "arguments"
                               ) from None


def _page(arguments: Mapping[str, Any]) -> Page:
    return Page(arguments.get("cursor"), arguments.get("limit"))


def _json(struct: type[msgspec.Struct], doc: Any) -> str:
    return msgspec.json.encode(msgspec.convert(doc, struct)).decode()


# ---------------------------------------------------------------- running each tool

async def _search(ctx: RequestContext, arguments: Mapping[str, Any]) -> str:
    query = _convert({k: v for k, v in arguments.items() if k not in ("cursor", "limit")}, ItemSearchQuery)
    return _json(SearchPage, await searching.search(ctx, query, _page(arguments)))


async def _read(ctx: RequestContext, arguments: Mapping[str, Any]) -> str:
    docs, next_cursor = await service.list_items(ctx, arguments["thread_id"], _page(arguments),
                                                 descending=arguments.get("order") == "desc")
    return _json(ItemsOut, {"items": docs, "next_cursor": next_cursor})


async def _note(ctx: RequestContext, arguments: Mapping[str, Any]) -> str:
    note = _convert({"metadata": arguments["metadata"]}, NoteIn)
    return _json(NoteOut, await service.put_note(ctx, arguments["thread_id"], arguments["item_id"], note.metadata))


async def _state_get(ctx: RequestContext, arguments: Mapping[str, Any]) -> str:
    return _json(StateOut, await service.get_state(ctx, arguments["thread_id"]))


async def _state_patch(ctx: RequestContext, arguments: Mapping[str, Any]) -> str:
    version = arguments.get("version")
    doc = await service.write_state(ctx, arguments["thread_id"], patch=arguments["patch"],
                                    if_match=None if version is None else str(version))
    return _json(StateOut, doc)


# ---------------------------------------------------------------- the catalogue

@dataclass(frozen=True)
class ThreadTool:
    name: str
    description: str
    schema: dict[str, Any]
    read_only: bool
    run: Callable[[RequestContext, Mapping[str, Any]], Awaitable[str]]
    # The REST route's parameter names that this tool's arguments spell differently.
    renamed: dict[str, str] = field(default_factory=dict)

    async def call(self, ctx: RequestContext, arguments: Mapping[str, Any]) -> str:
        check_arguments(self.schema, arguments)
        try:
            return await self.run(ctx, arguments)
        except ApiError as error:
            error.param = self._argument(error.param)
            raise

    def _argument(self, param: str | None) -> str | None:
        """A route's `param` (`thread_id`, `If-Match`, `state.a`) as the argument that caused it."""
        if param is None or param.startswith("arguments"):
            return param
        head = re.split(r"[.\[]", param, maxsplit=1)[0]
        if head not in self.renamed and head not in self.schema.get("properties", {}):
            return param  # a header (`X-Core-Subject`, `X-Core-Org`): sent over MCP as to the route
        return f"arguments.{self.renamed.get(head, head)}{param[len(head):]}"


SEARCH_PROPERTIES = {
    **_struct_properties(ItemSearchQuery),
    "cursor": CURSOR,
    "limit": _limit(20),
}

THREAD_TOOLS: tuple[ThreadTool, ...] = (
    ThreadTool(
        "threads__search",
        "Search the messages of the conversation threads this caller may read, newest first (GET /thread-items). "
        '`q` is web-search syntax: words, "a quoted phrase", `or` between alternatives, -word to exclude; or find '
        "messages by note with `metadata` (`key:value`) and `metadata_by`. A page searches one slice of history, "
        "so it may come back short or empty and still carry a `next_cursor`; `searched_to` is the day it reached.",
        _object(SEARCH_PROPERTIES, []), True, _search),
    ThreadTool(
        "threads__read",
        "Read the items of one conversation thread in position order (GET /threads/{id}/items): messages, tool "
        "calls and their results. Pass `next_cursor` back as `cursor` for the next page.",
        _object({"thread_id": THREAD_ID, "cursor": CURSOR, "limit": _limit(100),
                 "order": {"type": "string", "enum": ["asc", "desc"], "default": "asc"}}, ["thread_id"]),
        True, _read),
    ThreadTool(
        "threads__note",
        "Keep this caller's own note on one message of a thread (PUT /threads/{id}/items/{item_id}/metadata): "
        "at most 16 keys, each value a string (at most 512 characters), a number or a boolean. It replaces the "
        "caller's earlier note on that message; notes are never shown to a model.",
        _object({"thread_id": THREAD_ID,
                 "item_id": {"type": "string", "minLength": 1, "description": "The message's item id (itm_…)."},
                 "metadata": _struct_properties(NoteIn)["metadata"]}, ["thread_id", "item_id", "metadata"]),
        False, _note),
    ThreadTool(
        "working_state__get",
        "Read a thread's working state with its `version` (GET /threads/{id}/state); pass that version to "
        "working_state__patch so a change made meanwhile is not overwritten.",
        _object({"thread_id": THREAD_ID}, ["thread_id"]), True, _state_get),
    ThreadTool(
        "working_state__patch",
        "Change a thread's working state with a JSON merge patch (RFC 7386: objects merge, null removes a key, "
        "anything else replaces) (PATCH /threads/{id}/state). With `version`, the patch applies only if the state "
        "is still at that version; otherwise the answer is a `stale_version` conflict: read it again and retry.",
        _object({"thread_id": THREAD_ID,
                 "patch": {"type": "object", "description": "The merge patch document."},
                 "version": {"type": "integer", "minimum": 0,
                             "description": "The version read by working_state__get (If-Match)."}},
                ["thread_id", "patch"]),
        False, _state_patch, renamed={"If-Match": "version", "state": "patch"}),
)
BY_NAME = {tool.name: tool for tool in THREAD_TOOLS}
