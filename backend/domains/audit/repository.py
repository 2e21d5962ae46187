"""SQL of the audit trail."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from sqlalchemy import Text, and_, bindparam, func, insert, select, text
from sqlalchemy.ext.asyncio import AsyncSession

from backend.db.models import AuditEvent, table_of
from backend.db.prepared import Prepared
from backend.db.tenant import every_org_id, use_org
from shared.schemas.platform import AuditQuery

T = table_of(AuditEvent)


# The append path runs in every audited request, so its statements are compiled once (backend/db/prepared.py).
_LOCK = Prepared(text("SELECT pg_advisory_xact_lock(hashtextextended('audit:' || :org_id, 0))")
                 .bindparams(bindparam("org_id", type_=Text)))
_HEAD = Prepared(select(T.c.seq, T.c.hash).where(T.c.org_id == bindparam("org_id", type_=Text))
                 .order_by(T.c.seq.desc()).limit(1))
_INSERT = Prepared(insert(T).values({column.name: bindparam(column.name, type_=column.type) for column in T.c}))


async def lock_chain_head(db: AsyncSession, org_id: str) -> tuple[int, str] | None:
    # One writer per organisation's chain at a time: the lock lasts until the transaction ends. The head is read by
    # a statement of its own, after the lock is held: its snapshot then sees the previous writer's event.
    await _LOCK.all(db, {"org_id": org_id})
    row = await _HEAD.first(db, {"org_id": org_id})
    return (int(row["seq"]), str(row["hash"])) if row else None


async def insert_event(db: AsyncSession, row: dict[str, Any]) -> None:
    await _INSERT.all(db, row)


async def list_events(db: AsyncSession, org_id: str, f: AuditQuery, subject_hash: str | None, *,
                      before_seq: int | None, limit: int) -> list[Any]:
    conditions = [T.c.org_id == org_id]
    if f.from_ is not None:
        conditions.append(T.c.at >= f.from_)
    if f.to is not None:
        conditions.append(T.c.at < f.to)
    if f.actor_type is not None:
        conditions.append(T.c.actor_type == f.actor_type)
    if f.actor_id is not None:
        conditions.append(T.c.actor_id == f.actor_id)
    if f.action:
        conditions.append(T.c.action.in_(f.action))
    if f.exclude_action:
        conditions.append(T.c.action.not_in(f.exclude_action))
    if f.object_type is not None:
        conditions.append(T.c.object_type == f.object_type)
    if f.object_id is not None:
        conditions.append(T.c.object_id == f.object_id)
    if subject_hash is not None:
        conditions.append(T.c.subject_hash == subject_hash)
    if f.outcome is not None:
        conditions.append(T.c.outcome == f.outcome)
    if before_seq is not None:
        conditions.append(T.c.seq < before_seq)
    query = select(T).where(and_(*conditions)).order_by(T.c.seq.desc()).limit(limit)
    return [dict(r._mapping) for r in (await db.execute(query)).all()]


async def org_ids(db: AsyncSession) -> list[str]:
    """Every organisation (the control plane's list: row-level security shows one organisation's events)."""
    return await every_org_id(db)


async def stream_chain(db: AsyncSession, org_id: str) -> AsyncIterator[list[Any]]:
    """The organisation's events in chain order, in batches (never the whole trail in memory)."""
    await use_org(db, org_id)
    last = 0
    while True:
        rows = [dict(r._mapping) for r in (await db.execute(
            select(T).where(T.c.org_id == org_id, T.c.seq > last).order_by(T.c.seq).limit(5000)
        )).all()]
        if not rows:
            return
        yield rows
        last = rows[-1]["seq"]


async def count(db: AsyncSession, org_id: str) -> int:
    return int((await db.execute(select(func.count()).where(T.c.org_id == org_id))).scalar_one())
