"""SQL of store settings."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Text, bindparam, func, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from backend.db.models import table_of
from backend.db.models_stores import StoreSettings
from backend.db.prepared import Prepared

T = table_of(StoreSettings)
# Read by every turn's injection build: compiled once (house rule 12).
_GET = Prepared(select(T).where(T.c.org_id == bindparam("org_id", type_=Text),
                                T.c.index_id == bindparam("index_id", type_=Text)))


async def get(db: AsyncSession, org_id: str, index_id: str) -> dict[str, Any] | None:
    return await _GET.first(db, {"org_id": org_id, "index_id": index_id})


async def get_for_update(db: AsyncSession, org_id: str, index_id: str) -> dict[str, Any] | None:
    query = select(T).where(T.c.org_id == org_id, T.c.index_id == index_id).with_for_update()
    row = (await db.execute(query)).first()
    return dict(row._mapping) if row else None


async def save_sections(db: AsyncSession, org_id: str, index_id: str, sections: dict[str, Any]) -> dict[str, Any]:
    statement = insert(T).values(org_id=org_id, index_id=index_id, sections=sections)
    statement = statement.on_conflict_do_update(index_elements=[T.c.org_id, T.c.index_id],
                                                set_={"sections": sections, "updated_at": func.now()})
    row = (await db.execute(statement.returning(T))).one()
    return dict(row._mapping)
