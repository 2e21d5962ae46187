"""HTTP routes: threads, items, search, notes, working state, summaries (05-threads.md). HTTP only."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

import msgspec
from litestar import Controller, Request, Response, delete, get, patch, post, put
from litestar.datastructures import State
from litestar.openapi.spec import Operation
from litestar.params import Parameter
from sqlalchemy.ext.asyncio import AsyncSession

from backend.access.principal import Principal
from backend.domains.threads import service
from backend.errors import ApiError
from backend.http import decode_cursor, encode_cursor, page_limit, parse_pairs, settings_of
from shared.schemas.common import Instant
from shared.schemas.threads import (
    ItemOut,
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


async def _ctx(db: AsyncSession, principal: Principal, state: State) -> service.Ctx:
    return await service.context(db, principal, settings_of(state))


def _state_response(doc: dict[str, Any], status: int = 200) -> Response[StateOut]:
    return Response(msgspec.convert(doc, StateOut), status_code=status, headers={"ETag": f'"{doc["version"]}"'})


class ThreadController(Controller):
    path = "/threads"
    tags = ["threads"]

    @post("", summary="Open a thread, optionally with items and a copy of another thread's working state")
    async def create_thread(self, data: ThreadCreate, db: AsyncSession, principal: Principal,
                            state: State) -> ThreadCreated:
        ctx = await _ctx(db, principal, state)
        return msgspec.convert(await service.create_thread(db, ctx, data), ThreadCreated)

    @get("", summary="Threads this request may read, newest first")
    async def list_threads(
        self, db: AsyncSession, principal: Principal, state: State,
        metadata: Annotated[list[str] | None, Parameter(description="`key:value`, repeatable; all must match")] = None,
        label: Annotated[list[str] | None, Parameter(description="`name:value`, repeatable")] = None,
        subject: Annotated[str | None, Parameter(description="Owner filter for requests naming nobody; "
                                                             "empty for shared threads")] = None,
        order: Literal["asc", "desc"] = "desc", cursor: str | None = None, limit: int | None = None,
    ) -> ThreadPage:
        ctx = await _ctx(db, principal, state)
        size = page_limit(limit)
        docs, last = await service.list_threads(
            db, ctx, metadata=parse_pairs(metadata, "metadata"), labels=parse_pairs(label, "label"),
            subject=subject, cursor=decode_cursor(cursor), descending=order == "desc", limit=size)
        return msgspec.convert({"data": docs, "next_cursor": encode_cursor(last) if last else None}, ThreadPage)

    @get("/stats", summary="Count the threads this request may read, and their messages per role",
         description="Takes the filters of `GET /threads` and counts over all its pages. Administrators and keys "
                     "with `management`; `people` is null for a request that names a person.")
    async def thread_stats(
        self, db: AsyncSession, principal: Principal, state: State,
        metadata: Annotated[list[str] | None, Parameter(description="`key:value`, repeatable; all must match")] = None,
        label: Annotated[list[str] | None, Parameter(description="`name:value`, repeatable")] = None,
        subject: Annotated[str | None, Parameter(description="Owner filter for requests naming nobody; "
                                                             "empty for shared threads")] = None,
    ) -> ThreadStats:
        ctx = await _ctx(db, principal, state)
        return msgspec.convert(await service.thread_stats(
            db, ctx, metadata=parse_pairs(metadata, "metadata"), labels=parse_pairs(label, "label"),
            subject=subject), ThreadStats)

    @get("/{thread_id:str}", summary="One thread with its subject and message counts")
    async def get_thread(self, thread_id: str, db: AsyncSession, principal: Principal, state: State) -> ThreadOut:
        ctx = await _ctx(db, principal, state)
        return msgspec.convert(await service.get_thread(db, ctx, thread_id), ThreadOut)

    @patch("/{thread_id:str}", summary="Replace a thread's metadata or labels")
    async def patch_thread(self, thread_id: str, data: ThreadPatch, db: AsyncSession, principal: Principal,
                           state: State) -> ThreadOut:
        ctx = await _ctx(db, principal, state)
        return msgspec.convert(await service.patch_thread(db, ctx, thread_id, data), ThreadOut)

    @delete("/{thread_id:str}", status_code=204,
            summary="Delete a thread's content (items, notes, working state, summaries); its id stays as a tombstone")
    async def delete_thread(self, thread_id: str, db: AsyncSession, principal: Principal, state: State) -> None:
        ctx = await _ctx(db, principal, state)
        await service.delete_thread(db, ctx, thread_id)

    # ------------------------------------------------------------ items (THR-3, THR-4)

    @post("/{thread_id:str}/items", summary="Append items; each takes the next position as it arrives")
    async def append_items(self, thread_id: str, data: ItemsIn, db: AsyncSession, principal: Principal,
                           state: State) -> ItemsOut:
        ctx = await _ctx(db, principal, state)
        docs = await service.append_items(db, ctx, thread_id, list(data.items))
        return msgspec.convert({"items": docs, "next_cursor": None}, ItemsOut)

    @get("/{thread_id:str}/items", summary="A thread's items in position order")
    async def list_items(self, thread_id: str, db: AsyncSession, principal: Principal, state: State,
                         order: Literal["asc", "desc"] = "asc", cursor: str | None = None,
                         limit: int | None = None) -> ItemsOut:
        ctx = await _ctx(db, principal, state)
        docs, last = await service.list_items(db, ctx, thread_id, cursor=decode_cursor(cursor),
                                              descending=order == "desc", limit=page_limit(limit, 100))
        return msgspec.convert({"items": docs, "next_cursor": encode_cursor(last) if last is not None else None},
                               ItemsOut)

    @get("/{thread_id:str}/items/{item_id:str}", summary="One item")
    async def get_item(self, thread_id: str, item_id: str, db: AsyncSession, principal: Principal,
                       state: State) -> ItemOut:
        ctx = await _ctx(db, principal, state)
        return msgspec.convert(await service.get_item(db, ctx, thread_id, item_id), ItemOut)

    # ------------------------------------------------------------ notes (THR-8)

    @put("/{thread_id:str}/items/{item_id:str}/metadata", status_code=200,
         summary="Replace the request's person's own note on a message (the organisation's when nobody is named)")
    async def put_note(self, thread_id: str, item_id: str, data: NoteIn, db: AsyncSession, principal: Principal,
                       state: State) -> NoteOut:
        ctx = await _ctx(db, principal, state)
        return msgspec.convert(await service.put_note(db, ctx, thread_id, item_id, data.metadata), NoteOut)

    @get("/{thread_id:str}/items/{item_id:str}/metadata", summary="The notes on a message")
    async def list_notes(self, thread_id: str, item_id: str, db: AsyncSession, principal: Principal,
                         state: State) -> NotePage:
        ctx = await _ctx(db, principal, state)
        return msgspec.convert({"data": await service.list_notes(db, ctx, thread_id, item_id), "next_cursor": None},
                               NotePage)

    @delete("/{thread_id:str}/items/{item_id:str}/metadata", status_code=204,
            summary="Remove the request's person's own note on a message")
    async def delete_note(self, thread_id: str, item_id: str, db: AsyncSession, principal: Principal,
                          state: State) -> None:
        ctx = await _ctx(db, principal, state)
        await service.delete_note(db, ctx, thread_id, item_id)

    # ------------------------------------------------------------ working state (THR-11)

    @get("/{thread_id:str}/state", summary="The thread's working state, its version and size")
    async def get_state(self, thread_id: str, db: AsyncSession, principal: Principal,
                        state: State) -> Response[StateOut]:
        ctx = await _ctx(db, principal, state)
        return _state_response(await service.get_state(db, ctx, thread_id))

    @put("/{thread_id:str}/state", status_code=200, summary="Replace the working state (If-Match: version)")
    async def put_state(self, thread_id: str, data: StatePut, db: AsyncSession, principal: Principal,
                        state: State, if_match: IfMatch = None) -> Response[StateOut]:
        ctx = await _ctx(db, principal, state)
        return _state_response(await service.write_state(db, ctx, thread_id, replace=data.state, if_match=if_match))

    @patch("/{thread_id:str}/state", operation_class=MergePatchOperation,
           summary="Apply a JSON merge patch (RFC 7386) to the working state (If-Match: version)")
    async def patch_state(self, thread_id: str, data: dict[str, Any], request: Request[Any, Any, Any],
                          db: AsyncSession, principal: Principal, state: State,
                          if_match: IfMatch = None) -> Response[StateOut]:
        ctx = await _ctx(db, principal, state)
        media = (request.headers.get("content-type") or "").split(";")[0].strip().lower()
        if media not in (MERGE_PATCH, "application/json"):
            raise ApiError(f"Send the merge patch as {MERGE_PATCH} or application/json.", status=415,
                           code="unsupported_media_type")
        return _state_response(await service.write_state(db, ctx, thread_id, patch=data, if_match=if_match))

    # ------------------------------------------------------------ summaries (THR-13)

    @get("/{thread_id:str}/summaries", summary="Compaction summaries: positions covered, level, model, text")
    async def list_summaries(self, thread_id: str, db: AsyncSession, principal: Principal, state: State,
                             cursor: str | None = None, limit: int | None = None) -> SummaryPage:
        ctx = await _ctx(db, principal, state)
        docs, last = await service.list_summaries(db, ctx, thread_id, cursor=decode_cursor(cursor),
                                                  limit=page_limit(limit))
        return msgspec.convert({"data": docs, "next_cursor": encode_cursor(last) if last else None}, SummaryPage)


class ThreadItemSearchController(Controller):
    path = "/thread-items"
    tags = ["threads"]

    @get("", summary="Search messages and refusals (web-search syntax) or find messages by note, newest first")
    async def search(
        self, db: AsyncSession, principal: Principal, state: State,
        q: Annotated[str | None, Parameter(description='Words, "a phrase", `or`, `-word`')] = None,
        thread_id: str | None = None,
        thread_metadata: Annotated[list[str] | None, Parameter(description="`key:value`, repeatable")] = None,
        role: Literal["user", "assistant", "developer"] | None = None,
        from_: Annotated[Instant | None, Parameter(query="from")] = None,
        to: Instant | None = None,
        metadata: Annotated[list[str] | None, Parameter(description="Note filter `key:value`, repeatable")] = None,
        metadata_by: Annotated[str | None, Parameter(description="Whose notes (a person's id)")] = None,
        cursor: str | None = None, limit: int | None = None,
    ) -> SearchPage:
        ctx = await service.search_context(db, principal, settings_of(state))
        page = await service.search(
            db, ctx, q=q, thread_id=thread_id, thread_metadata=parse_pairs(thread_metadata, "thread_metadata"),
            role=role, from_=from_, to=to, metadata=parse_pairs(metadata, "metadata"), metadata_by=metadata_by,
            cursor=decode_cursor(cursor), limit=page_limit(limit, 20))
        nxt = page["next_cursor"]
        return msgspec.convert({**page, "next_cursor": encode_cursor(nxt) if nxt else None}, SearchPage)
