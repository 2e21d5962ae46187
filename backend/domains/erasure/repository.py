"""SQL of the erasure guard: per-person advisory locks and the record of who was erased when."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import DateTime, bindparam, exists, func, literal, select
from sqlalchemy.dialects.postgresql import ARRAY, TEXT
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from backend.db.models import table_of
from backend.db.models_memory import ErasedSubject
from backend.db.prepared import Prepared

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


_HASHES = bindparam("hashes", type_=ARRAY(TEXT))
_LOCK_SHARED = Prepared(select(locked_shared(bindparam("org_id", type_=TEXT), _HASHES)))
# Since when: the given instant, or when this transaction began.
_ERASED_SINCE = Prepared(select(E.c.subject_hash).where(
    E.c.org_id == bindparam("org_id"), E.c.subject_hash == func.any(_HASHES),
    E.c.erased_at > func.coalesce(bindparam("since", type_=DateTime(timezone=True)), func.now())).limit(1))


async def lock_shared(db: AsyncSession, org_id: str, subject_hashes: Sequence[str]) -> None:
    """The shared side of each person's lock, in the order given (callers sort, so two writers never cross)."""
    await _LOCK_SHARED.all(db, {"org_id": org_id, "hashes": list(subject_hashes)})


async def lock_exclusive(db: AsyncSession, org_id: str, subject_hash: str) -> None:
    await db.execute(select(func.pg_advisory_xact_lock(_subject_lock(org_id, literal(subject_hash)))))


async def erased_since(db: AsyncSession, org_id: str, subject_hashes: Sequence[str],
                       started_at: datetime | None) -> bool:
    """True when one of the people was erased after `started_at` (default: when this transaction began)."""
    found = await _ERASED_SINCE.all(db, {"org_id": org_id, "hashes": list(subject_hashes), "since": started_at})
    return bool(found)


async def mark_erased(db: AsyncSession, org_id: str, subject_hash: str) -> None:
    stmt = pg_insert(E).values(org_id=org_id, subject_hash=subject_hash, erased_at=func.clock_timestamp())
    await db.execute(stmt.on_conflict_do_update(index_elements=[E.c.org_id, E.c.subject_hash],
                                                set_={"erased_at": func.clock_timestamp()}))
