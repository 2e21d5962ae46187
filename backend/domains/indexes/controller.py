"""HTTP routes: knowledge indexes."""

from __future__ import annotations

from typing import Any

import msgspec
from litestar import Controller, delete, get, post
from litestar.datastructures import State
from sqlalchemy.ext.asyncio import AsyncSession

from backend.access.principal import Principal
from backend.access.scope import scope_for
from backend.domains.indexes import repository as repo
from backend.domains.indexes import service
from backend.http import decode_cursor, encode_cursor, page_limit
from shared.schemas.platform import IndexCreate, IndexOut, IndexPage


def _index(row: dict[str, Any]) -> IndexOut:
    return msgspec.convert(service.index_document(row), IndexOut)


class IndexController(Controller):
    path = "/indexes"
    tags = ["indexes"]

    @post("", summary="Create a knowledge index")
    async def create_index(self, data: IndexCreate, db: AsyncSession, principal: Principal, state: State) -> IndexOut:
        scope = await scope_for(db, principal)
        return _index(await service.create(db, principal, scope, data, state.settings.secret))

    @get("", summary="Indexes this credential reaches")
    async def list_indexes(self, db: AsyncSession, principal: Principal, cursor: str | None = None,
                           limit: int | None = None) -> IndexPage:
        principal.require("knowledge")
        scope = await scope_for(db, principal)
        size = page_limit(limit)
        rows = await repo.list_page(db, scope, decode_cursor(cursor), size + 1)
        more = len(rows) > size
        rows = rows[:size]
        return IndexPage(data=[_index(r) for r in rows], next_cursor=encode_cursor(rows[-1]["id"]) if more else None)

    @get("/{index_id:str}", summary="One index")
    async def get_index(self, index_id: str, db: AsyncSession, principal: Principal) -> IndexOut:
        principal.require("knowledge")
        scope = await scope_for(db, principal)
        return _index(await service.reachable(db, scope, index_id))

    @delete("/{index_id:str}", status_code=204, summary="Delete an index with its records and settings")
    async def delete_index(self, index_id: str, db: AsyncSession, principal: Principal, state: State) -> None:
        scope = await scope_for(db, principal)
        await service.delete(db, principal, scope, index_id, state.settings.secret)
