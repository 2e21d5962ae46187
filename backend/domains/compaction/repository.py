"""SQL of compaction (TRN-6). The statements a turn runs (`history`) are compiled once and run as driver SQL
(house rule 12); each reads only the positions it needs, never the whole thread when summaries cover its start."""

from __future__ import annotations

from typing import Any

from sqlalchemy import BigInteger, Integer, Text, bindparam, func, select
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from backend.db.prepared import Prepared
from backend.domains.threads.repository import ITEM_COLUMNS, SUM, I, T

NO_LIMIT = 2**62  # `before` when the caller cuts nothing off
_ORG, _THREAD = bindparam("org_id", type_=Text), bindparam("thread_id", type_=Text)
_AFTER, _BEFORE = bindparam("after", type_=BigInteger), bindparam("before", type_=BigInteger)
_THREAD_ITEMS = (I.c.org_id == _ORG, I.c.thread_id == _THREAD)

# The summaries compaction wrote (those with turn numbers), without their text: where each starts and ends.
_SUMMARY_INDEX = Prepared(
    select(SUM.c.id, SUM.c.level, SUM.c.from_position, SUM.c.to_position, SUM.c.from_turn, SUM.c.to_turn)
    .where(SUM.c.org_id == _ORG, SUM.c.thread_id == _THREAD, SUM.c.from_turn.is_not(None),
           SUM.c.to_turn.is_not(None))
    .order_by(SUM.c.from_position, SUM.c.level))
_SUMMARIES_BY_ID = Prepared(
    select(SUM.c.id, SUM.c.thread_id, SUM.c.from_position, SUM.c.to_position, SUM.c.level, SUM.c.model,
           SUM.c.text, SUM.c.created_at)
    .where(SUM.c.org_id == _ORG, SUM.c.id == func.any(bindparam("ids", type_=ARRAY(Text))))
    .order_by(SUM.c.from_position, SUM.c.level))
_ITEMS_AFTER = Prepared(select(*ITEM_COLUMNS).where(*_THREAD_ITEMS, I.c.position > _AFTER, I.c.position < _BEFORE)
                        .order_by(I.c.position))
_LAST_ITEMS = Prepared(select(*ITEM_COLUMNS).where(*_THREAD_ITEMS, I.c.position < _BEFORE)
                       .order_by(I.c.position.desc()).limit(bindparam("count", type_=Integer)))
_LIGHT = (I.c.position, I.c.response_id, I.c.type, I.c.role, I.c.subject)


async def summary_index(db: AsyncSession, org_id: str, thread_id: str) -> list[dict[str, Any]]:
    return await _SUMMARY_INDEX.all(db, {"org_id": org_id, "thread_id": thread_id})


async def summaries_by_id(db: AsyncSession, org_id: str, ids: list[str]) -> list[dict[str, Any]]:
    if not ids:
        return []
    return await _SUMMARIES_BY_ID.all(db, {"org_id": org_id, "ids": ids})


async def items_after(db: AsyncSession, org_id: str, thread_id: str, after: int,
                      before: int = NO_LIMIT) -> list[dict[str, Any]]:
    """Item rows (as the threads repository returns them) at positions after `after` and before `before`."""
    return await _ITEMS_AFTER.all(db, {"org_id": org_id, "thread_id": thread_id, "after": after, "before": before})


async def last_items(db: AsyncSession, org_id: str, thread_id: str, count: int,
                     before: int = NO_LIMIT) -> list[dict[str, Any]]:
    """The last `count` items before `before`, in position order."""
    rows = await _LAST_ITEMS.all(db, {"org_id": org_id, "thread_id": thread_id, "before": before, "count": count})
    return rows[::-1]


# ---------------------------------------------------------------- the summary job

async def live_thread(db: AsyncSession, org_id: str, thread_id: str, *, share_lock: bool = False
                      ) -> dict[str, Any] | None:
    """The thread's owner and this transaction's start, or None once it was deleted. `share_lock` holds the
    row until the transaction ends, so a deletion (which updates the row first) waits or is seen."""
    query = select(T.c.subject, T.c.pseudonymized, func.now().label("now")).where(
        T.c.org_id == org_id, T.c.id == thread_id, T.c.deleted_at.is_(None))
    if share_lock:
        query = query.with_for_update(read=True)
    row = (await db.execute(query)).first()
    return dict(row._mapping) if row else None


async def light_items(db: AsyncSession, org_id: str, thread_id: str, after: int, upto: int | None = None
                      ) -> list[dict[str, Any]]:
    """Position, request, type, role and writer of the items after `after` (up to `upto`): enough to count
    turns without reading bodies."""
    query = select(*_LIGHT).where(I.c.org_id == org_id, I.c.thread_id == thread_id, I.c.position > after)
    if upto is not None:
        query = query.where(I.c.position <= upto)
    return [dict(r._mapping) for r in (await db.execute(query.order_by(I.c.position))).all()]


async def items_between(db: AsyncSession, org_id: str, thread_id: str, first: int, last: int
                        ) -> list[dict[str, Any]]:
    return await items_after(db, org_id, thread_id, first - 1, last + 1)


async def writers_between(db: AsyncSession, org_id: str, thread_id: str, first: int, last: int) -> list[str]:
    query = (select(I.c.subject).distinct()
             .where(I.c.org_id == org_id, I.c.thread_id == thread_id, I.c.position.between(first, last),
                    I.c.subject.is_not(None)))
    return [r[0] for r in (await db.execute(query)).all()]


async def insert_summary(db: AsyncSession, values: dict[str, Any]) -> str | None:
    """The new summary's id, or None when one of the same positions and level exists (a retry, a second
    worker): the unique constraint makes the write idempotent."""
    statement = (pg_insert(SUM).values(**values)
                 .on_conflict_do_nothing(index_elements=[SUM.c.org_id, SUM.c.thread_id, SUM.c.level,
                                                         SUM.c.from_position, SUM.c.to_position])
                 .returning(SUM.c.id))
    inserted: str | None = (await db.execute(statement)).scalar_one_or_none()
    return inserted
