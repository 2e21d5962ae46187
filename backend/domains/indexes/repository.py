"""SQL of knowledge indexes."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Text, bindparam, delete, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from backend.access.scope import Scope
from backend.db.models import KnowledgeIndex, table_of
from backend.db.models_extraction import ExtractionSwitch
from backend.db.prepared import PreparedByShape

T = table_of(KnowledgeIndex)
SW = table_of(ExtractionSwitch)


NAME_UNIQUE = "uq_indexes_org_id_name"


async def insert_index(db: AsyncSession, values: dict[str, Any]) -> dict[str, Any] | None:
    """The new index, or None when another index has its name (one created at the same moment included)."""
    statement = pg_insert(T).values(**values).on_conflict_do_nothing(index_elements=[T.c.org_id, T.c.name])
    row = (await db.execute(statement.returning(T))).first()
    return dict(row._mapping) if row else None


async def name_taken(db: AsyncSession, org_id: str, name: str) -> bool:
    return (await db.execute(select(T.c.id).where(T.c.org_id == org_id, T.c.name == name))).first() is not None


_reachable = PreparedByShape()


async def get(db: AsyncSession, scope: Scope, index_id: str) -> dict[str, Any] | None:
    """The index, if the scope reaches it: one statement per set of indexes a policy names, built once."""
    statement = _reachable.get(scope.indexes, lambda: select(T).where(
        T.c.org_id == bindparam("org_id", type_=Text), T.c.id == bindparam("index_id", type_=Text),
        scope.index_clause(T.c.id)))
    return await statement.first(db, {"org_id": scope.org_id, "index_id": index_id})


_with_store_types = PreparedByShape()


async def get_with_store_types(db: AsyncSession, scope: Scope, index_id: str) -> dict[str, Any] | None:
    """`get`, with the `types` of the store's extraction switch as `store_types` when it has one (what its write
    tool takes, MEM-21), in the same statement."""
    statement = _with_store_types.get(scope.indexes, lambda: (
        select(T, SW.c.types.label("store_types"))
        .outerjoin(SW, (SW.c.org_id == T.c.org_id) & (SW.c.index_id == T.c.id))
        .where(T.c.org_id == bindparam("org_id", type_=Text), T.c.id == bindparam("index_id", type_=Text),
               scope.index_clause(T.c.id))))
    row = await statement.first(db, {"org_id": scope.org_id, "index_id": index_id})
    if row is not None and row["store_types"] is None:
        del row["store_types"]
    return row


async def list_page(db: AsyncSession, scope: Scope, after_id: str | None, limit: int) -> list[dict[str, Any]]:
    query = select(T).where(T.c.org_id == scope.org_id, scope.index_clause(T.c.id))
    if after_id:
        query = query.where(T.c.id > after_id)
    return [dict(r._mapping) for r in (await db.execute(query.order_by(T.c.id).limit(limit))).all()]


async def update_index(db: AsyncSession, org_id: str, index_id: str, values: dict[str, Any]) -> dict[str, Any] | None:
    """The changed index, or None when the new name is another index's (one renamed at the same moment included):
    an UPDATE has no ON CONFLICT, so the savepoint keeps the request's transaction usable."""
    statement = update(T).where(T.c.org_id == org_id, T.c.id == index_id).values(**values).returning(T)
    try:
        async with db.begin_nested():
            return dict((await db.execute(statement)).one()._mapping)
    except IntegrityError as error:
        if getattr(getattr(error.orig, "diag", None), "constraint_name", None) != NAME_UNIQUE:
            raise
        return None


async def delete_index(db: AsyncSession, org_id: str, index_id: str) -> None:
    await db.execute(delete(T).where(T.c.org_id == org_id, T.c.id == index_id))


async def exists(db: AsyncSession, org_id: str, index_id: str) -> bool:
    return (await db.execute(select(T.c.id).where(T.c.org_id == org_id, T.c.id == index_id))).first() is not None


async def embedding_indexes(db: AsyncSession, scope: Scope) -> list[dict[str, Any]]:
    query = select(T).where(T.c.org_id == scope.org_id, scope.index_clause(T.c.id), T.c.embedding.is_not(None))
    return [dict(r._mapping) for r in (await db.execute(query.order_by(T.c.id))).all()]
