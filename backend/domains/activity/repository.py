"""SQL of activity over time: per-day counts and the record changes feed. Every read of records or threads takes a
Scope and applies it in SQL (house rule 2); each count reads an index range on `(org_id, <time>)`."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, and_, func, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from backend.access.scope import Scope
from backend.db.models import AuditEvent, table_of
from backend.db.models_threads import Thread, ThreadItem
from backend.domains.memory.expressions import R, V, readable
from shared.schemas.activity import ChangeQuery

A = table_of(AuditEvent)
T = table_of(Thread)
I = table_of(ThreadItem)  # noqa: E741


def _day(column: Any, timezone: str) -> ColumnElement[str]:
    """The calendar day of an instant in the organisation's zone, as `YYYY-MM-DD`."""
    return func.to_char(func.timezone(timezone, column), "YYYY-MM-DD")


async def _per_day(db: AsyncSession, day: ColumnElement[str], name: Any, *where: Any,
                   source: Any = None) -> list[dict[str, Any]]:
    query = select(day.label("day"), name.label("name"), func.count().label("n"))
    if source is not None:
        query = query.select_from(source)
    query = query.where(*where).group_by(day, name).order_by(day, name)
    return [{"day": r.day, "name": r.name, "count": int(r.n)} for r in (await db.execute(query)).all()]


async def versions_per_day(db: AsyncSession, scope: Scope, since: datetime, timezone: str) -> list[dict[str, Any]]:
    """Record versions written since `since` (created, updated, confirmed, …) per day and action, of the records the
    scope reads; a deleted record's versions went with it."""
    day = _day(V.c.at, timezone)
    return await _per_day(db, day, V.c.action, V.c.org_id == scope.org_id, V.c.at >= since,
                          V.c.record_id == R.c.id, R.c.org_id == V.c.org_id, *readable(scope))


async def messages_per_day(db: AsyncSession, scope: Scope, since: datetime, timezone: str) -> list[dict[str, Any]]:
    """Messages written since `since` per day and role, in the threads the scope reads."""
    day = _day(I.c.created_at, timezone)
    # An explicit join: a policy that shows no thread makes the WHERE clause plain `false`, and the tables would
    # then stand side by side in FROM (no rows either way, but a cartesian product to the planner and SQLAlchemy).
    joined = I.join(T, and_(T.c.org_id == I.c.org_id, T.c.id == I.c.thread_id))
    return await _per_day(db, day, I.c.role, I.c.org_id == scope.org_id, I.c.created_at >= since,
                          I.c.type == "message", T.c.deleted_at.is_(None),
                          scope.visible("thread", "see", T.c.subject, T.c.labels), source=joined)


async def events_per_day(db: AsyncSession, org_id: str, since: datetime, timezone: str) -> list[dict[str, Any]]:
    """Audit events since `since` per day and action."""
    day = _day(A.c.at, timezone)
    return await _per_day(db, day, A.c.action, A.c.org_id == org_id, A.c.at >= since)


async def changes(db: AsyncSession, scope: Scope, f: ChangeQuery, after: tuple[datetime, str, int] | None,
                  limit: int) -> list[dict[str, Any]]:
    """Record versions newest first (by time, then record and version), of the records the scope reads."""
    where: list[Any] = [V.c.org_id == scope.org_id, R.c.org_id == V.c.org_id, R.c.id == V.c.record_id,
                        *readable(scope)]
    if f.index_id is not None:
        where.append(R.c.index_id == f.index_id)
    if f.subject is not None:
        where.append(R.c.subject == f.subject)
    if f.action:
        where.append(V.c.action.in_(f.action))
    if f.actor_type is not None:
        where.append(V.c.actor_type == f.actor_type)
    if f.actor_id is not None:
        where.append(V.c.actor_id == f.actor_id)
    if after is not None:
        at, record_id, version = after
        where.append(or_(V.c.at < at, and_(V.c.at == at, or_(V.c.record_id < record_id, and_(
            V.c.record_id == record_id, V.c.version < version)))))
    query = (select(V.c.record_id, R.c.index_id, R.c.type, R.c.subject, V.c.version, V.c.at, V.c.action,
                    V.c.actor_type, V.c.actor_id, V.c.text, V.c.status).where(*where)
             .order_by(V.c.at.desc(), V.c.record_id.desc(), V.c.version.desc()).limit(limit))
    return [{str(k): v for k, v in r._mapping.items()} for r in (await db.execute(query)).all()]
