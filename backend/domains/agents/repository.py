"""SQL of agents and their versions."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Integer, Select, Text, and_, bindparam, func, insert, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from backend.db.models import table_of
from backend.db.models_agents import Agent, AgentVersionRow
from backend.db.prepared import Prepared

A = table_of(Agent)
V = table_of(AgentVersionRow)
_JOIN = and_(V.c.org_id == A.c.org_id, V.c.agent_id == A.c.id)
# A version's row with the agent's dates: what documents and turns read.
_COLUMNS = (V, A.c.version.label("current_version"), A.c.created_at.label("agent_created_at"),
            A.c.updated_at.label("agent_updated_at"), A.c.deleted_at)


def _current() -> Select[Any]:
    return select(*_COLUMNS).join(A, and_(_JOIN, V.c.version == A.c.version))


# Turns resolve an agent on every request (house rule 12): one statement, compiled once.
_RESOLVE = Prepared(select(*_COLUMNS).join(A, _JOIN).where(
    A.c.org_id == bindparam("org_id", type_=Text), A.c.id == bindparam("agent_id", type_=Text),
    V.c.version == func.coalesce(bindparam("version", type_=Integer), A.c.version)))


async def resolve(db: AsyncSession, org_id: str, agent_id: str, version: int | None) -> dict[str, Any] | None:
    """The named version (the current one when None), deleted agents included; the caller decides."""
    return await _RESOLVE.first(db, {"org_id": org_id, "agent_id": agent_id, "version": version})


async def insert_agent(db: AsyncSession, agent: dict[str, Any], first: dict[str, Any]) -> bool:
    """The agent with its version 1; False (nothing written) when a live agent has the name already."""
    added = (await db.execute(pg_insert(A).values(**agent).on_conflict_do_nothing(
        index_elements=[A.c.org_id, A.c.name], index_where=A.c.deleted_at.is_(None)).returning(A.c.id))).first()
    if added is None:
        return False
    await db.execute(insert(V).values(**first))
    return True


async def current(db: AsyncSession, org_id: str, agent_id: str, *, lock: bool = False) -> dict[str, Any] | None:
    """A live agent's current version; `lock` holds the agent's row so changes to one agent queue up.

    The lock is taken by a statement of its own: a locking join would recheck a row changed meanwhile against
    the version row it read before waiting, find no match and answer nothing. The read after it sees the
    version that the change it waited for committed.
    """
    live = and_(A.c.org_id == org_id, A.c.id == agent_id, A.c.deleted_at.is_(None))
    if lock and (await db.execute(select(A.c.id).where(live).with_for_update())).first() is None:
        return None
    row = (await db.execute(_current().where(live))).first()
    return dict(row._mapping) if row else None


async def add_version(db: AsyncSession, values: dict[str, Any]) -> bool:
    """Write the next version and make it current; False (nothing written) when its name is another's."""
    try:
        async with db.begin_nested():
            await db.execute(update(A).where(A.c.org_id == values["org_id"], A.c.id == values["agent_id"])
                             .values(version=values["version"], name=values["name"], updated_at=func.now()))
            await db.execute(insert(V).values(**values))
    except IntegrityError:
        return False
    return True


async def mark_deleted(db: AsyncSession, org_id: str, agent_id: str) -> None:
    await db.execute(update(A).where(A.c.org_id == org_id, A.c.id == agent_id).values(deleted_at=func.now()))


async def list_page(db: AsyncSession, org_id: str, after_id: str | None, limit: int) -> list[dict[str, Any]]:
    query = _current().where(A.c.org_id == org_id, A.c.deleted_at.is_(None))
    if after_id:
        query = query.where(A.c.id > after_id)
    return [dict(r._mapping) for r in (await db.execute(query.order_by(A.c.id).limit(limit))).all()]


async def versions_page(db: AsyncSession, org_id: str, agent_id: str, before: int | None,
                        limit: int) -> list[dict[str, Any]]:
    """Newest version first."""
    query = select(V).where(V.c.org_id == org_id, V.c.agent_id == agent_id)
    if before is not None:
        query = query.where(V.c.version < before)
    return [dict(r._mapping) for r in (await db.execute(query.order_by(V.c.version.desc()).limit(limit))).all()]
