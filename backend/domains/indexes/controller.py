"""HTTP routes: knowledge indexes."""

from __future__ import annotations

from typing import Any

import msgspec
from litestar import Controller, delete, get, patch, post

from backend.access.context import RequestContext
from backend.domains.indexes import repository as repo
from backend.domains.indexes import service
from backend.params import Page
from shared.schemas.platform import IndexCreate, IndexOut, IndexPage, IndexPatch


def _index(row: dict[str, Any]) -> IndexOut:
    return msgspec.convert(service.index_document(row), IndexOut)


class IndexController(Controller):
    path = "/indexes"
    tags = ["indexes"]

    @post("", summary="Create a knowledge index")
    async def create_index(self, data: IndexCreate, ctx: RequestContext) -> IndexOut:
        return _index(await service.create(ctx, data))

    @get("", summary="Indexes this credential reaches")
    async def list_indexes(self, ctx: RequestContext, page: Page) -> IndexPage:
        ctx.require("knowledge")
        rows = await repo.list_page(ctx.db, ctx.scope, page.after(str), page.fetch())
        rows, next_cursor = page.cut(rows, lambda row: row["id"])
        return IndexPage(data=[_index(r) for r in rows], next_cursor=next_cursor)

    @get("/{index_id:str}", summary="One index")
    async def get_index(self, index_id: str, ctx: RequestContext) -> IndexOut:
        ctx.require("knowledge")
        return _index(await service.reachable(ctx.db, ctx.scope, index_id))

    @patch("/{index_id:str}", summary="Rename an index or change its embedding (its records are re-embedded)")
    async def update_index(self, index_id: str, data: IndexPatch, ctx: RequestContext) -> IndexOut:
        return _index(await service.update(ctx, index_id, data))

    @delete("/{index_id:str}", status_code=204, summary="Delete an index with its records and settings")
    async def delete_index(self, index_id: str, ctx: RequestContext) -> None:
        await service.delete(ctx, index_id)
