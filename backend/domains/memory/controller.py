"""HTTP routes: memory records (MEM-4 … MEM-18). Every list route takes the one query of `GET /memory`."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import timedelta
from typing import Annotated, Any

import msgspec
from litestar import Controller, Response, delete, get, patch, post
from litestar.di import Provide
from litestar.enums import MediaType
from litestar.openapi.datastructures import ResponseSpec
from litestar.openapi.spec import Example, OpenAPIMediaType, OpenAPIType, Operation, Reference, RequestBody, Schema
from litestar.params import Parameter

from backend.access.context import RequestContext
from backend.domains.memory import reads, writes
from backend.domains.memory import recall as recall_text
from backend.domains.memory.rules import converted, document, search_document
from backend.errors import ValidationFailed
from backend.params import Page, query_dependency
from shared.schemas.common import Model
from shared.schemas.memory import (
    MAX_BATCH,
    MemoryBatch,
    MemoryBatchOut,
    MemoryCreate,
    MemoryHistory,
    MemoryOut,
    MemoryPage,
    MemoryPatch,
    MemoryQuery,
    MemoryStats,
    SearchPage,
)

_WINDOW = re.compile(r"^(?P<n>[1-9][0-9]{0,5})(?P<unit>[hdw])$")
_UNIT_HOURS = {"h": 1, "d": 24, "w": 24 * 7}
MAX_WINDOW = timedelta(days=3660)

KeyId = Annotated[str | None, Parameter(description="Administrators: apply this key's half-lives (MEM-9)")]
provide_memory_query = query_dependency(MemoryQuery)


class _BatchRecords(Model):
    """`POST /memory/batch` as read before its records: each is converted in `create_batch`, in position order, with
    the record's other checks, so the error names the first invalid record whichever check refuses it (MEM-5)."""

    records: Annotated[list[Any], msgspec.Meta(min_length=1, max_length=MAX_BATCH)]


@dataclass
class BatchOperation(Operation):
    """The batch route reads its body as JSON (`_BatchRecords`); the document shows the contract, `MemoryBatch`."""

    def __post_init__(self) -> None:
        records = Schema(type=OpenAPIType.ARRAY, min_items=1, max_items=MAX_BATCH,
                         items=Reference(ref=f"#/components/schemas/{MemoryCreate.__name__}"))
        batch = Schema(type=OpenAPIType.OBJECT, title=MemoryBatch.__name__, required=["records"],
                       properties={"records": records}, additional_properties=False)
        self.request_body = RequestBody(content={"application/json": OpenAPIMediaType(schema=batch)}, required=True)


def _out(row: dict[str, Any]) -> MemoryOut:
    return msgspec.convert(document(row), MemoryOut)


def _page(rows: list[dict[str, Any]], next_cursor: str | None) -> MemoryPage:
    return MemoryPage(data=[_out(r) for r in rows], next_cursor=next_cursor)


def parse_window(within: str) -> timedelta:
    """`7d`, `12h`, `2w` (MEM-10)."""
    match = _WINDOW.match(within.strip())
    if not match:
        raise ValidationFailed("`within` is a number followed by h, d or w, such as `7d`.", param="within")
    window = timedelta(hours=int(match["n"]) * _UNIT_HOURS[match["unit"]])
    if window > MAX_WINDOW:
        raise ValidationFailed("`within` may be at most ten years.", param="within")
    return window


class MemoryController(Controller):
    path = "/memory"
    tags = ["memory"]
    dependencies = {"filters": Provide(provide_memory_query)}

    @post("", status_code=201, summary="Write a record (with `key`: update the record of that key in place)",
          responses={200: ResponseSpec(MemoryOut, description="The record of this key was updated (new version)")})
    async def create(self, data: MemoryCreate, ctx: RequestContext) -> Response[MemoryOut]:
        row, created = await writes.create(ctx, data)
        return Response(_out(row), status_code=201 if created else 200)

    @post("/batch", status_code=201, operation_class=BatchOperation,
          summary="Write up to 1,000 records in one transaction (all or nothing)")
    async def batch(self, data: dict[str, Any], ctx: RequestContext) -> MemoryBatchOut:
        rows, created = await writes.create_batch(ctx, converted(data, _BatchRecords, "").records)
        return MemoryBatchOut(data=[_out(row) for row in rows], created=sum(created),
                              updated=len(created) - sum(created))

    @get("", summary="List records the request sees, newest first")
    async def list_records(self, ctx: RequestContext, filters: MemoryQuery, page: Page,
                           key_id: KeyId = None) -> MemoryPage:
        return _page(*await reads.list_records(ctx, filters, page, key_id))

    @get("/stats", summary="Count the records the request sees, per index, type and owner kind",
         description="Takes the filters of `GET /memory` and counts every record that route would list, over all "
                     "its pages. Administrators' counts are audited as `memory.read`.")
    async def stats(self, ctx: RequestContext, filters: MemoryQuery, key_id: KeyId = None) -> MemoryStats:
        return msgspec.convert(await reads.stats(ctx, filters, key_id), MemoryStats)

    @get("/expiring", summary="Records that expire within a window (`within=7d`; units h, d, w)")
    async def expiring(self, ctx: RequestContext, filters: MemoryQuery, page: Page, key_id: KeyId = None,
                       within: Annotated[str, Parameter(examples=[Example(value="7d")])] = "7d") -> MemoryPage:
        return _page(*await reads.expiring(ctx, filters, parse_window(within), page, key_id))

    @get("/recall", media_type=MediaType.TEXT, summary="Plain-text recall for an LLM's context (Synapse layout)")
    async def recall(self, ctx: RequestContext, filters: MemoryQuery, page: Page, key_id: KeyId = None) -> str:
        rows, total, verified = await reads.recall(ctx, filters, page.limit(), key_id)
        return recall_text.render(recall_text.owner_line(ctx.person, filters.subject), rows, total, verified)

    @get("/by-tag", summary="Records carrying a tag (case-insensitive); all of the given tags must match")
    async def by_tag(self, ctx: RequestContext, filters: MemoryQuery, page: Page, key_id: KeyId = None
                     ) -> MemoryPage:
        if not any(t.strip() for t in filters.tag):
            raise ValidationFailed("Name a tag: `tag=docker`.", param="tag")
        return _page(*await reads.list_records(ctx, filters, page, key_id, route="GET /memory/by-tag"))

    @get("/search", summary="Find records by question: full text blended with vector similarity")
    async def search(self, ctx: RequestContext, filters: MemoryQuery, page: Page, key_id: KeyId = None
                     ) -> SearchPage:
        rows = await reads.search(ctx, filters, page.limit(20), key_id=key_id)
        return msgspec.convert({"data": [search_document(row) for row in rows], "next_cursor": None}, SearchPage)

    @get("/{record_id:str}", summary="One record")
    async def get_record(self, record_id: str, ctx: RequestContext, key_id: KeyId = None) -> MemoryOut:
        return _out(await reads.get(ctx, record_id, key_id))

    @patch("/{record_id:str}", summary="Change a record: a new history version; restarts the decay age")
    async def patch_record(self, record_id: str, data: MemoryPatch, ctx: RequestContext) -> MemoryOut:
        return _out(await writes.patch(ctx, record_id, data))

    @delete("/{record_id:str}", status_code=204, summary="Delete a record")
    async def delete_record(self, record_id: str, ctx: RequestContext) -> None:
        await writes.delete(ctx, record_id)

    @get("/{record_id:str}/history", summary="Versions, confirmations and the record it replaced or that replaced it")
    async def history(self, record_id: str, ctx: RequestContext) -> MemoryHistory:
        return msgspec.convert(await reads.history(ctx, record_id), MemoryHistory)

    @post("/{record_id:str}/verify", status_code=200, summary="Mark a record verified (administrators only)")
    async def verify(self, record_id: str, ctx: RequestContext) -> MemoryOut:
        return _out(await writes.verify(ctx, record_id))
