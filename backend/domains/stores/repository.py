"""SQL of store settings."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Text, and_, bindparam, func, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from backend.access.scope import Scope
from backend.db.models import KnowledgeIndex, table_of
from backend.db.models_stores import StoreSettings
from backend.db.plan_mode import custom_plans_column, serial_plans_column
from backend.db.prepared import Prepared, PreparedByShape

T = table_of(StoreSettings)
INDEXES = table_of(KnowledgeIndex)
# Read by every turn's injection build: compiled once (house rule 12).
_GET = Prepared(select(T).where(T.c.org_id == bindparam("org_id", type_=Text),
                                T.c.index_id == bindparam("index_id", type_=Text)))


async def get(db: AsyncSession, org_id: str, index_id: str) -> dict[str, Any] | None:
    return await _GET.first(db, {"org_id": org_id, "index_id": index_id})


_STORES = PreparedByShape()


async def index_and_sections(db: AsyncSession, scope: Scope, index_id: str
                             ) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The index if the scope reaches it, with its store's saved sections (None when none were saved): what a
    turn's injection build reads first, in one round trip. One statement per set of indexes a policy names.

    It also has the rest of the transaction planned serially and for its values, for the build's candidates
    statement that follows (`plan_mode.serial_plans_column`, `plan_mode.custom_plans_column`)."""
    statement = _STORES.get(scope.indexes, lambda: (
        select(INDEXES, T.c.sections.label("store_sections"), serial_plans_column().label("serial"),
               custom_plans_column().label("custom"))
        .select_from(INDEXES.outerjoin(T, and_(T.c.org_id == INDEXES.c.org_id, T.c.index_id == INDEXES.c.id)))
        .where(INDEXES.c.org_id == bindparam("org_id", type_=Text),
               INDEXES.c.id == bindparam("index_id", type_=Text), scope.index_clause(INDEXES.c.id))))
    row = await statement.first(db, {"org_id": scope.org_id, "index_id": index_id})
    if row is None:
        return None, None
    del row["serial"], row["custom"]
    sections = row.pop("store_sections")
    return row, sections


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
