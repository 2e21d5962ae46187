"""SQL of the erasure guard: per-person advisory locks and the record of who was erased when."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, exists, func, literal, select
from sqlalchemy.dialects.postgresql import ARRAY, TEXT
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from backend.db.models import table_of
from backend.db.models_memory import ErasedSubject

E = table_of(ErasedSubject)


def _subject_lock(org_id: Any, subject_hash: Any) -> Any:
    return func.hashtextextended(literal("subject:") + org_id + ":" + subject_hash, 0)


def locked_shared(org: Any, hashes: Any) -> Any:
    """A SQL expression taking the shared side of each person's lock, in array order (callers sort)."""
    each = func.unnest(hashes).table_valued("h").render_derived()
    return (select(func.count(func.pg_advisory_xact_lock_shared(_subject_lock(org, each.c.h))))
            .select_from(each).scalar_subquery())


def not_erased_since_now(org: Any, hashes: Any) -> Any:
    """A SQL boolean: none of these people was erased after this transaction began. Evaluate it in a statement
    after the one that took their locks (a statement sees what was committed before it started)."""
    return ~exists().where(E.c.org_id == org, E.c.subject_hash == func.any(hashes), E.c.erased_at > func.now())


async def lock_shared(db: AsyncSession, org_id: str, subject_hashes: Sequence[str]) -> None:
    """The shared side of each person's lock, in the order given (callers sort, so two writers never cross)."""
    locks = [func.pg_advisory_xact_lock_shared(_subject_lock(org_id, literal(h))) for h in subject_hashes]
    await db.execute(select(*locks))


async def lock_exclusive(db: AsyncSession, org_id: str, subject_hash: str) -> None:
    await db.execute(select(func.pg_advisory_xact_lock(_subject_lock(org_id, literal(subject_hash)))))


async def erased_since(db: AsyncSession, org_id: str, subject_hashes: Sequence[str],
                       started_at: datetime | None) -> bool:
    """True when one of the people was erased after `started_at` (default: when this transaction began)."""
    since: Any = func.now() if started_at is None else literal(started_at)
    hashes = bindparam("hashes", list(subject_hashes), type_=ARRAY(TEXT))
    query = select(E.c.subject_hash).where(E.c.org_id == org_id, E.c.subject_hash == func.any(hashes),
                                           E.c.erased_at > since).limit(1)
    return (await db.execute(query)).first() is not None


async def mark_erased(db: AsyncSession, org_id: str, subject_hash: str) -> None:
    stmt = pg_insert(E).values(org_id=org_id, subject_hash=subject_hash, erased_at=func.clock_timestamp())
    await db.execute(stmt.on_conflict_do_update(index_elements=[E.c.org_id, E.c.subject_hash],
                                                set_={"erased_at": func.clock_timestamp()}))
