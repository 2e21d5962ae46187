"""HTTP routes: memory records (MEM-4 … MEM-18)."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Annotated, Any

import msgspec
from litestar import Controller, Response, delete, get, patch, post
from litestar.datastructures import State
from litestar.di import Provide
from litestar.enums import MediaType
from litestar.openapi.datastructures import ResponseSpec
from litestar.openapi.spec import Example
from litestar.params import Parameter
from sqlalchemy.ext.asyncio import AsyncSession

from backend.access.principal import Principal
from backend.domains.memory import recall as recall_text
from backend.domains.memory import service
from backend.domains.memory.repository import Filters
from backend.errors import BadRequest, ValidationFailed
from backend.http import decode_cursor, encode_cursor, page_limit, parse_pairs, require_offset
from shared.schemas.common import Instant
from shared.schemas.memory import (
    MemoryBatch,
    MemoryBatchOut,
    MemoryCreate,
    MemoryHistory,
    MemoryOut,
    MemoryPage,
    MemoryPatch,
    MemoryStats,
    SearchPage,
)

_WINDOW = re.compile(r"^(?P<n>[1-9][0-9]{0,5})(?P<unit>[hdw])$")
_UNIT_HOURS = {"h": 1, "d": 24, "w": 24 * 7}
MAX_WINDOW = timedelta(days=3660)

MinConfidence = Annotated[float | None, Parameter(ge=0.0, le=1.0, description="Compared with the effective value")]
KeyId = Annotated[str | None, Parameter(description="Administrators: apply this key's half-lives (MEM-9)")]


def _out(row: dict[str, Any]) -> MemoryOut:
    return msgspec.convert(service.document(row), MemoryOut)


def _page(rows: list[dict[str, Any]], next_cursor: str | None) -> MemoryPage:
    return MemoryPage(data=[_out(r) for r in rows], next_cursor=next_cursor)


def _cursor_id(cursor: str | None) -> str | None:
    value = decode_cursor(cursor)
    if value is not None and not isinstance(value, str):
        raise BadRequest("This cursor is not one the API handed out.", param="cursor", code="invalid_cursor")
    return value


def parse_window(within: str) -> timedelta:
    """`7d`, `12h`, `2w` (MEM-10)."""
    match = _WINDOW.match(within.strip())
    if not match:
        raise ValidationFailed("`within` is a number followed by h, d or w, such as `7d`.", param="within")
    window = timedelta(hours=int(match["n"]) * _UNIT_HOURS[match["unit"]])
    if window > MAX_WINDOW:
        raise ValidationFailed("`within` may be at most ten years.", param="within")
    return window


def _filters(index_id: str | None, type_: list[str] | None, subject: str | None, metadata: list[str] | None,
             label: list[str] | None, tag: list[str] | None, min_confidence: float | None, after: Any, before: Any,
             include_expired: bool, include_replaced: bool, q: str | None, *, shared: bool = False) -> Filters:
    return Filters(index_id=index_id, types=list(type_ or []), subject=subject, shared=shared,
                   metadata=parse_pairs(metadata, "metadata"), labels=parse_pairs(label, "label"),
                   tags=[t.strip().lower() for t in tag or [] if t.strip()], min_confidence=min_confidence,
                   after=require_offset(after, "after"), before=require_offset(before, "before"),
                   include_expired=include_expired, include_replaced=include_replaced, q=q or None)


async def provide_list_filters(
    index_id: str | None = None,
    type_: Annotated[list[str] | None, Parameter(query="type")] = None,
    subject: Annotated[str | None, Parameter(description="Requests naming nobody and administrators")] = None,
    shared: Annotated[bool, Parameter(description="Only shared records (nobody's)")] = False,
    metadata: Annotated[list[str] | None, Parameter(description="`name:value`, repeatable, all must match")] = None,
    label: Annotated[list[str] | None, Parameter(description="`name:value`, repeatable")] = None,
    tag: list[str] | None = None,
    min_confidence: MinConfidence = None,
    after: Instant | None = None,
    before: Instant | None = None,
    include_expired: bool = False,
    include_replaced: bool = False,
    q: str | None = None,
) -> Filters:
    """The filters of `GET /memory`, shared by the routes that list or count what it lists."""
    return _filters(index_id, type_, subject, metadata, label, tag, min_confidence, after, before, include_expired,
                    include_replaced, q, shared=shared)


class MemoryController(Controller):
    path = "/memory"
    tags = ["memory"]
    dependencies = {"list_filters": Provide(provide_list_filters)}

    @post("", status_code=201, summary="Write a record (with `key`: update the record of that key in place)",
          responses={200: ResponseSpec(MemoryOut, description="The record of this key was updated (new version)")})
    async def create(self, data: MemoryCreate, db: AsyncSession, principal: Principal,
                     state: State) -> Response[MemoryOut]:
        r = await service.reader(db, principal, state.settings.secret)
        row, created = await service.create(db, r, data)
        return Response(_out(row), status_code=201 if created else 200)

    @post("/batch", status_code=201, summary="Write up to 1,000 records in one transaction (all or nothing)")
    async def batch(self, data: MemoryBatch, db: AsyncSession, principal: Principal, state: State) -> MemoryBatchOut:
        r = await service.reader(db, principal, state.settings.secret)
        rows, created = await service.create_batch(db, r, data.records)
        return MemoryBatchOut(data=[_out(row) for row in rows], created=sum(created),
                              updated=len(created) - sum(created))

    @get("", summary="List records the request sees, newest first")
    async def list_records(self, db: AsyncSession, principal: Principal, state: State, list_filters: Filters,
                           key_id: KeyId = None, cursor: str | None = None, limit: int | None = None) -> MemoryPage:
        r = await service.reader(db, principal, state.settings.secret, key_id=key_id)
        f = list_filters
        rows, more = await service.list_records(db, r, f, _cursor_id(cursor), page_limit(limit))
        return _page(rows, encode_cursor(rows[-1]["id"]) if more else None)

    @get("/stats", summary="Count the records the request sees, per index, type and owner kind",
         description="Takes the filters of `GET /memory` and counts every record that route would list, over all "
                     "its pages. Administrators' counts are audited as `memory.read`.")
    async def stats(self, db: AsyncSession, principal: Principal, state: State, list_filters: Filters,
                    key_id: KeyId = None) -> MemoryStats:
        r = await service.reader(db, principal, state.settings.secret, key_id=key_id)
        return msgspec.convert(await service.stats(db, r, list_filters), MemoryStats)

    @get("/expiring", summary="Records that expire within a window (`within=7d`; units h, d, w)")
    async def expiring(
        self, db: AsyncSession, principal: Principal, state: State,
        within: Annotated[str, Parameter(examples=[Example(value="7d")])] = "7d",
        index_id: str | None = None,
        type_: Annotated[list[str] | None, Parameter(query="type")] = None,
        subject: str | None = None,
        key_id: KeyId = None,
        cursor: str | None = None,
        limit: int | None = None,
    ) -> MemoryPage:
        window = parse_window(within)
        r = await service.reader(db, principal, state.settings.secret, key_id=key_id)
        f = Filters(index_id=index_id, types=list(type_ or []), subject=subject)
        rows, more = await service.expiring(db, r, f, window, decode_cursor(cursor), page_limit(limit))
        last = rows[-1] if rows else None
        next_cursor = encode_cursor([last["expires_at"].isoformat(), last["id"]]) if more and last else None
        return _page(rows, next_cursor)

    @get("/recall", media_type=MediaType.TEXT, summary="Plain-text recall for an LLM's context (Synapse layout)")
    async def recall(
        self, db: AsyncSession, principal: Principal, state: State,
        index_id: str | None = None,
        type_: Annotated[list[str] | None, Parameter(query="type")] = None,
        tag: list[str] | None = None,
        subject: str | None = None,
        min_confidence: MinConfidence = None,
        key_id: KeyId = None,
        limit: int | None = None,
    ) -> str:
        r = await service.reader(db, principal, state.settings.secret, key_id=key_id)
        f = _filters(index_id, type_, subject, None, None, tag, min_confidence, None, None, False, False, None)
        rows, total, verified = await service.recall(db, r, f, page_limit(limit))
        return recall_text.render(recall_text.owner_line(r.person, subject), rows, total, verified)

    @get("/by-tag", summary="Records carrying a tag (case-insensitive)")
    async def by_tag(
        self, db: AsyncSession, principal: Principal, state: State,
        tag: Annotated[list[str], Parameter(description="Repeatable; all must match")],
        index_id: str | None = None,
        type_: Annotated[list[str] | None, Parameter(query="type")] = None,
        subject: str | None = None,
        include_expired: bool = False,
        include_replaced: bool = False,
        key_id: KeyId = None,
        cursor: str | None = None,
        limit: int | None = None,
    ) -> MemoryPage:
        r = await service.reader(db, principal, state.settings.secret, key_id=key_id)
        f = _filters(index_id, type_, subject, None, None, tag, None, None, None, include_expired, include_replaced,
                     None)
        if not f.tags:
            raise ValidationFailed("Name a tag: `tag=docker`.", param="tag")
        rows, more = await service.list_records(db, r, f, _cursor_id(cursor), page_limit(limit),
                                                route="GET /memory/by-tag")
        return _page(rows, encode_cursor(rows[-1]["id"]) if more else None)

    @get("/search", summary="Find records by question: full text blended with vector similarity")
    async def search(
        self, db: AsyncSession, principal: Principal, state: State,
        q: Annotated[str, Parameter(min_length=1, max_length=1000, description="Web-search syntax")],
        index_id: str | None = None,
        tag: list[str] | None = None,
        type_: Annotated[list[str] | None, Parameter(query="type")] = None,
        subject: str | None = None,
        after: Instant | None = None,
        before: Instant | None = None,
        min_confidence: MinConfidence = None,
        key_id: KeyId = None,
        limit: int | None = None,
    ) -> SearchPage:
        r = await service.reader(db, principal, state.settings.secret, key_id=key_id)
        f = _filters(index_id, type_, subject, None, None, tag, min_confidence, after, before, False, False, None)
        rows = await service.search(db, r, f, q, page_limit(limit, default=20))
        return msgspec.convert({"data": [service.search_document(row) for row in rows], "next_cursor": None},
                               SearchPage)

    @get("/{record_id:str}", summary="One record")
    async def get_record(self, record_id: str, db: AsyncSession, principal: Principal, state: State,
                         key_id: KeyId = None) -> MemoryOut:
        r = await service.reader(db, principal, state.settings.secret, key_id=key_id)
        return _out(await service.get(db, r, record_id))

    @patch("/{record_id:str}", summary="Change a record: a new history version; restarts the decay age")
    async def patch_record(self, record_id: str, data: MemoryPatch, db: AsyncSession, principal: Principal,
                           state: State) -> MemoryOut:
        r = await service.reader(db, principal, state.settings.secret)
        return _out(await service.patch(db, r, record_id, data))

    @delete("/{record_id:str}", status_code=204, summary="Delete a record")
    async def delete_record(self, record_id: str, db: AsyncSession, principal: Principal, state: State) -> None:
        r = await service.reader(db, principal, state.settings.secret)
        await service.delete(db, r, record_id)

    @get("/{record_id:str}/history", summary="Versions, confirmations and the record it replaced or that replaced it")
    async def history(self, record_id: str, db: AsyncSession, principal: Principal, state: State) -> MemoryHistory:
        r = await service.reader(db, principal, state.settings.secret)
        return msgspec.convert(await service.history(db, r, record_id), MemoryHistory)

    @post("/{record_id:str}/verify", status_code=200, summary="Mark a record verified (administrators only)")
    async def verify(self, record_id: str, db: AsyncSession, principal: Principal, state: State) -> MemoryOut:
        r = await service.reader(db, principal, state.settings.secret)
        return _out(await service.verify(db, r, record_id))
