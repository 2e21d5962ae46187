"""SQL of the erasure guard: per-person advisory locks and the record of who was erased when."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import DateTime, bindparam, exists, func, literal, select, text, update
from sqlalchemy.dialects.postgresql import ARRAY, TEXT
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from backend.db.models import table_of
from backend.db.models_memory import ErasedSubject
from backend.db.plan_mode import keep_plans_column
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


# Migration 0020's function: the shared side of each person's lock in the order given (callers sort, so two
# writers never cross), then whether one was erased after `since` (default: when this transaction began), read
# with a snapshot taken after the locks.
_ERASED_AFTER_LOCKING = func.coremem_erased_after_locking(
    bindparam("org_id", type_=TEXT), bindparam("hashes", type_=ARRAY(TEXT)),
    bindparam("since", type_=DateTime(timezone=True))).label("erased")
_LOCK_THEN_ERASED = {False: Prepared(select(_ERASED_AFTER_LOCKING)),
                     True: Prepared(select(_ERASED_AFTER_LOCKING, keep_plans_column().label("plans")))}


async def lock_shared_then_erased(db: AsyncSession, org_id: str, subject_hashes: Sequence[str],
                                  started_at: datetime | None, *, keep_plans: bool = False) -> bool:
    """Hold the shared side of each person's lock until the transaction ends, then: True when one of them was
    erased after `started_at` (default: when this transaction began). One round trip, which with `keep_plans`
    also lets the transaction's later statements keep plans (`plan_mode.let_key_checks_keep_plans`)."""
    row = await _LOCK_THEN_ERASED[keep_plans].first(db, {"org_id": org_id, "hashes": list(subject_hashes),
                                                         "since": started_at})
    return bool(row and row["erased"])


async def transaction_start(db: AsyncSession) -> datetime:
    return (await db.execute(select(func.now()))).scalar_one()


async def lock_exclusive(db: AsyncSession, org_id: str, subject_hash: str) -> None:
    await db.execute(select(func.pg_advisory_xact_lock(_subject_lock(org_id, literal(subject_hash)))))


# A guard refuses work that began before `erased_at`. Work that began after the erasure recorded itself but before
# it committed may still have read her data, so the time recorded with the erasure lies ahead of its commit; once
# it has committed, `settle_erased_at` sets the moment after the commit. Should that never run (the process died
# in between), writes naming her are refused for this long after the erasure, and allowed after.
_AHEAD = text("clock_timestamp() + interval '1 minute'")


async def mark_erased(db: AsyncSession, org_id: str, subject_hash: str) -> None:
    stmt = pg_insert(E).values(org_id=org_id, subject_hash=subject_hash, erased_at=_AHEAD)
    await db.execute(stmt.on_conflict_do_update(index_elements=[E.c.org_id, E.c.subject_hash],
                                                set_={"erased_at": _AHEAD}))


async def settle_erased_at(db: AsyncSession, org_id: str, subject_hash: str) -> None:
    """After the erasure committed, its time becomes now: every transaction that began before the commit began
    before this too; one that began between the commit and now is refused in vain (one round trip's worth)."""
    await db.execute(update(E).where(E.c.org_id == org_id, E.c.subject_hash == subject_hash,
                                     E.c.erased_at > func.clock_timestamp()).values(erased_at=func.clock_timestamp()))
