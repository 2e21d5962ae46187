"""HTTP routes: threads, items, search, notes, working state, summaries (05-threads.md). HTTP only."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

import msgspec
from litestar import Controller, Request, Response, delete, get, patch, post, put
from litestar.di import Provide
from litestar.openapi.spec import Operation
from litestar.params import Parameter

from backend.access.context import RequestContext
from backend.domains.threads import searching, service
from backend.errors import ApiError
from backend.params import Page, query_dependency
from shared.schemas.threads import (
    ItemOut,
    ItemSearchQuery,
    ItemsIn,
    ItemsOut,
    NoteIn,
    NoteOut,
    NotePage,
    SearchPage,
    StateOut,
    StatePut,
    SummaryPage,
    ThreadCreate,
    ThreadCreated,
    ThreadOut,
    ThreadPage,
    ThreadPatch,
    ThreadQuery,
    ThreadStats,
)

MERGE_PATCH = "application/merge-patch+json"
IfMatch = Annotated[str | None, Parameter(header="If-Match", required=False,
                                          description="The version read from GET …/state; stale is 409")]


@dataclass
class MergePatchOperation(Operation):
    """The state PATCH takes the merge patch document itself, as `application/merge-patch+json` or JSON."""

    def __post_init__(self) -> None:
        body = self.request_body
        if body is not None and not isinstance(body, type(None)) and hasattr(body, "content"):
            json_media = body.content.get("application/json")
            if json_media is not None:
                body.content = {MERGE_PATCH: json_media, "application/json": json_media}


def _state_response(doc: dict[str, Any], status: int = 200) -> Response[StateOut]:
    return Response(msgspec.convert(doc, StateOut), status_code=status, headers={"ETag": f'"{doc["version"]}"'})


class ThreadController(Controller):
    path = "/threads"
    tags = ["threads"]
    dependencies = {"filters": Provide(query_dependency(ThreadQuery))}

    @post("", summary="Open a thread, optionally with items and a copy of another thread's working state")
    async def create_thread(self, data: ThreadCreate, ctx: RequestContext) -> ThreadCreated:
        return msgspec.convert(await service.create_thread(ctx, data), ThreadCreated)

    @get("", summary="Threads this request may read, newest first")
    async def list_threads(self, ctx: RequestContext, filters: ThreadQuery, page: Page,
                           order: Literal["asc", "desc"] = "desc") -> ThreadPage:
        docs, next_cursor = await service.list_threads(ctx, filters, page, descending=order == "desc")
        return msgspec.convert({"data": docs, "next_cursor": next_cursor}, ThreadPage)

    @get("/stats", summary="Count the threads this request may read, and their messages per role",
         description="Takes the filters of `GET /threads` and counts over all its pages. Administrators and keys "
                     "with `management`; `people` is null for a request that names a person.")
    async def thread_stats(self, ctx: RequestContext, filters: ThreadQuery) -> ThreadStats:
        return msgspec.convert(await service.thread_stats(ctx, filters), ThreadStats)

    @get("/{thread_id:str}", summary="One thread with its subject and message counts")
    async def get_thread(self, thread_id: str, ctx: RequestContext) -> ThreadOut:
        return msgspec.convert(await service.get_thread(ctx, thread_id), ThreadOut)

    @patch("/{thread_id:str}", summary="Replace a thread's metadata or labels")
    async def patch_thread(self, thread_id: str, data: ThreadPatch, ctx: RequestContext) -> ThreadOut:
        return msgspec.convert(await service.patch_thread(ctx, thread_id, data), ThreadOut)

    @delete("/{thread_id:str}", status_code=204,
            summary="Delete a thread's content (items, notes, working state, summaries); its id stays as a tombstone")
    async def delete_thread(self, thread_id: str, ctx: RequestContext) -> None:
        await service.delete_thread(ctx, thread_id)

    # ------------------------------------------------------------ items (THR-3, THR-4)

    @post("/{thread_id:str}/items", summary="Append items; each takes the next position as it arrives")
    async def append_items(self, thread_id: str, data: ItemsIn, ctx: RequestContext) -> ItemsOut:
        docs = await service.append_items(ctx, thread_id, list(data.items))
        return msgspec.convert({"items": docs, "next_cursor": None}, ItemsOut)

    @get("/{thread_id:str}/items", summary="A thread's items in position order")
    async def list_items(self, thread_id: str, ctx: RequestContext, page: Page,
                         order: Literal["asc", "desc"] = "asc") -> ItemsOut:
        docs, next_cursor = await service.list_items(ctx, thread_id, page, descending=order == "desc")
        return msgspec.convert({"items": docs, "next_cursor": next_cursor}, ItemsOut)

    @get("/{thread_id:str}/items/{item_id:str}", summary="One item")
    async def get_item(self, thread_id: str, item_id: str, ctx: RequestContext) -> ItemOut:
        return msgspec.convert(await service.get_item(ctx, thread_id, item_id), ItemOut)

    # ------------------------------------------------------------ notes (THR-8)

    @put("/{thread_id:str}/items/{item_id:str}/metadata", status_code=200,
         summary="Replace the request's person's own note on a message (the organisation's when nobody is named)")
    async def put_note(self, thread_id: str, item_id: str, data: NoteIn, ctx: RequestContext) -> NoteOut:
        return msgspec.convert(await service.put_note(ctx, thread_id, item_id, data.metadata), NoteOut)

    @get("/{thread_id:str}/items/{item_id:str}/metadata", summary="The notes on a message")
    async def list_notes(self, thread_id: str, item_id: str, ctx: RequestContext) -> NotePage:
        return msgspec.convert({"data": await service.list_notes(ctx, thread_id, item_id), "next_cursor": None},
                               NotePage)

    @delete("/{thread_id:str}/items/{item_id:str}/metadata", status_code=204,
            summary="Remove the request's person's own note on a message")
    async def delete_note(self, thread_id: str, item_id: str, ctx: RequestContext) -> None:
        await service.delete_note(ctx, thread_id, item_id)

    # ------------------------------------------------------------ working state (THR-11)

    @get("/{thread_id:str}/state", summary="The thread's working state, its version and size")
    async def get_state(self, thread_id: str, ctx: RequestContext) -> Response[StateOut]:
        return _state_response(await service.get_state(ctx, thread_id))

    @put("/{thread_id:str}/state", status_code=200, summary="Replace the working state (If-Match: version)")
    async def put_state(self, thread_id: str, data: StatePut, ctx: RequestContext,
                        if_match: IfMatch = None) -> Response[StateOut]:
        return _state_response(await service.write_state(ctx, thread_id, replace=data.state, if_match=if_match))

    @patch("/{thread_id:str}/state", operation_class=MergePatchOperation,
           summary="Apply a JSON merge patch (RFC 7386) to the working state (If-Match: version)")
    async def patch_state(self, thread_id: str, data: dict[str, Any], request: Request[Any, Any, Any],
                          ctx: RequestContext, if_match: IfMatch = None) -> Response[StateOut]:
        media = (request.headers.get("content-type") or "").split(";")[0].strip().lower()
        if media not in (MERGE_PATCH, "application/json"):
            raise ApiError(f"Send the merge patch as {MERGE_PATCH} or application/json.", status=415,
                           code="unsupported_media_type")
        return _state_response(await service.write_state(ctx, thread_id, patch=data, if_match=if_match))

    # ------------------------------------------------------------ summaries (THR-13)

    @get("/{thread_id:str}/summaries", summary="Compaction summaries: positions covered, level, model, text")
    async def list_summaries(self, thread_id: str, ctx: RequestContext, page: Page) -> SummaryPage:
        docs, next_cursor = await service.list_summaries(ctx, thread_id, page)
        return msgspec.convert({"data": docs, "next_cursor": next_cursor}, SummaryPage)


class ThreadItemSearchController(Controller):
    path = "/thread-items"
    tags = ["threads"]
    dependencies = {"filters": Provide(query_dependency(ItemSearchQuery))}

    @get("", summary="Search messages and refusals (web-search syntax) or find messages by note, newest first")
    async def search(self, ctx: RequestContext, filters: ItemSearchQuery, page: Page) -> SearchPage:
        return msgspec.convert(await searching.search(ctx, filters, page), SearchPage)
