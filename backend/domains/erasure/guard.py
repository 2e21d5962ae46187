"""Work that began before a person was erased never writes her back (MEM-19).

Every write that stores something of a person (her records, threads, items, notes, the working state of her
thread, her id in a `participants` label) first calls `refuse_if_erased` for the people it names. It holds the
shared side of each person's lock until the transaction ends, so an erasure (which takes the lock exclusively)
waits for writes in flight and then removes what they wrote; a write whose transaction began before an erasure
that has since committed is refused with 409 `subject_erased`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from backend.domains.audit.service import subject_hash
from backend.domains.erasure import repository as repo
from backend.errors import Conflict

PERSON_LABEL = "participants"  # the label whose values are people's ids (THR-9); erasure takes her id out


def people_in_labels(labels: Mapping[str, Any] | None, before: Mapping[str, Any] | None = None) -> set[str]:
    """The ids a write adds under the `participants` label."""

    def values(raw: Mapping[str, Any] | None) -> set[str]:
        value = (raw or {}).get(PERSON_LABEL)
        if isinstance(value, list):
            return {v for v in value if isinstance(v, str)}
        return {value} if isinstance(value, str) else set()

    return values(labels) - values(before)


async def refuse_if_erased(db: AsyncSession, org_id: str, secret: str, people: Iterable[str | None], *,
                           started_at: datetime | None = None, seen: set[str] | None = None,
                           keep_plans: bool = False) -> bool:
    """Lock each named person (shared) and refuse when one was erased after `started_at` (default: when this
    transaction began). `seen` skips people already checked in this transaction. With `keep_plans` the same round
    trip lets the transaction's later statements keep plans (db/plan_mode.py). Whether a statement ran (none when
    nobody new is named)."""
    named = sorted({p for p in people if p is not None} - (seen or set()))
    if not named:
        return False
    hashes = [h for h in (subject_hash(secret, org_id, p) for p in named) if h is not None]
    if await repo.lock_shared_then_erased(db, org_id, hashes, started_at, keep_plans=keep_plans):
        raise erased_meanwhile()
    if seen is not None:
        seen.update(named)
    return True


async def transaction_start(db: AsyncSession) -> datetime:
    """When this transaction began, by the database's clock (the time `refuse_if_erased` compares with)."""
    return await repo.transaction_start(db)


def erased_meanwhile() -> Conflict:
    return Conflict("A person this write names was erased while it ran; nothing of hers is written back.",
                    code="subject_erased")
