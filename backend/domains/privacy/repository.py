"""SQL of pseudonymisation (TRN-10, EXT-11): a thread's placeholders, the thread's mark, and erasure (MEM-19)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import BigInteger, cast, delete, func, or_, select, tuple_, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from backend.db.models import table_of
from backend.db.models_threads import Thread, ThreadPseudonym
from backend.providers.pii import Pseudonym, placeholder

P = table_of(ThreadPseudonym)
T = table_of(Thread)
_COLUMNS = (P.c.placeholder, P.c.kind, P.c.value, P.c.subject, P.c.belongs_to)
# Rounds of renumbering when concurrent turns keep taking the numbers this one picks; each round settles at
# least one value, so a turn adding N values needs at most N rounds against one other writer.
MAX_ROUNDS = 20


class PseudonymsBusy(Exception):
    """The thread's placeholders kept changing under this write (only with many concurrent writers)."""


def _entry(row: Any) -> Pseudonym:
    return Pseudonym(row.placeholder, row.kind, row.value, row.subject, row.belongs_to)


async def load(db: AsyncSession, org_id: str, thread_id: str) -> list[Pseudonym]:
    """The thread's whole mapping, by kind and number."""
    rows = (await db.execute(select(*_COLUMNS).where(P.c.org_id == org_id, P.c.thread_id == thread_id))).all()
    return sorted((_entry(r) for r in rows), key=lambda e: (e.kind, e.number))


async def _stored_for(db: AsyncSession, org_id: str, thread_id: str,
                      entries: Sequence[Pseudonym]) -> dict[tuple[str, str], Pseudonym]:
    wanted = [(e.kind, e.value) for e in entries]
    rows = (await db.execute(select(*_COLUMNS).where(
        P.c.org_id == org_id, P.c.thread_id == thread_id, tuple_(P.c.kind, P.c.value).in_(wanted)))).all()
    return {(r.kind, r.value): _entry(r) for r in rows}


async def _highest(db: AsyncSession, org_id: str, thread_id: str, kinds: set[str]) -> dict[str, int]:
    number = cast(func.substring(P.c.placeholder, r"_(\d+)>$"), BigInteger)
    rows = (await db.execute(select(P.c.kind, func.max(number)).where(
        P.c.org_id == org_id, P.c.thread_id == thread_id, P.c.kind.in_(sorted(kinds))).group_by(P.c.kind))).all()
    return {kind: int(high or 0) for kind, high in rows}


async def save_new(db: AsyncSession, org_id: str, thread_id: str,
                   entries: Sequence[Pseudonym]) -> list[Pseudonym]:
    """Store values a turn gave placeholders and answer the stored entry of each, in the same order.

    Safe against another turn of the thread adding values at the same time: an insert that meets a row of the
    same value (or the same placeholder) does nothing, waiting for the other transaction if it has not ended.
    The stored rows are then read again: a value the other turn stored first keeps the other turn's
    placeholder, and a value whose number the other turn took gets the next free number of its kind. So both
    turns end with the same placeholder for every value. Needs READ COMMITTED (the default), in which a
    statement sees what committed before it began.
    """
    pending = list({(e.kind, e.value): e for e in entries}.values())
    settled: dict[tuple[str, str], Pseudonym] = {}
    for _ in range(MAX_ROUNDS):
        if not pending:
            return [settled[(e.kind, e.value)] for e in entries]
        stmt = pg_insert(P).values([
            {"org_id": org_id, "thread_id": thread_id, "placeholder": e.placeholder, "kind": e.kind,
             "value": e.value, "subject": e.subject, "belongs_to": e.belongs_to} for e in pending
        ]).on_conflict_do_nothing().returning(P.c.kind, P.c.value)
        inserted = {(r.kind, r.value) for r in (await db.execute(stmt)).all()}
        for e in pending:
            if (e.kind, e.value) in inserted:
                settled[(e.kind, e.value)] = e
        refused = [e for e in pending if (e.kind, e.value) not in inserted]
        if not refused:
            pending = []
            continue
        stored = await _stored_for(db, org_id, thread_id, refused)
        settled.update(stored)
        pending = [e for e in refused if (e.kind, e.value) not in stored]
        if pending:
            # Their numbers were taken: renumber above everything stored now, in the order they came.
            high = await _highest(db, org_id, thread_id, {e.kind for e in pending})
            renumbered = []
            for e in pending:
                high[e.kind] = high.get(e.kind, 0) + 1
                renumbered.append(Pseudonym(placeholder(e.kind, high[e.kind]), e.kind, e.value, e.subject,
                                            e.belongs_to))
            pending = renumbered
    raise PseudonymsBusy(f"the placeholders of thread {thread_id} kept changing while they were saved")


async def mark_pseudonymized(db: AsyncSession, org_id: str, thread_id: str) -> bool:
    """EXT-11: mark the thread as written in by a pseudonymising key; True when the mark is new."""
    result = await db.execute(update(T).where(T.c.org_id == org_id, T.c.id == thread_id, T.c.pseudonymized.is_(False))
                              .values(pseudonymized=True).returning(T.c.id))
    return result.first() is not None


async def is_pseudonymized(db: AsyncSession, org_id: str, thread_id: str) -> bool:
    row = (await db.execute(select(T.c.pseudonymized).where(T.c.org_id == org_id, T.c.id == thread_id))).first()
    return bool(row and row[0])


async def delete_thread(db: AsyncSession, org_id: str, thread_id: str) -> int:
    """THR-6: a deleted thread keeps a tombstone row, so its placeholders (real values) are removed here."""
    result = await db.execute(delete(P).where(P.c.org_id == org_id, P.c.thread_id == thread_id)
                              .returning(P.c.placeholder))
    return len(result.all())


async def erase_subject(db: AsyncSession, org_id: str, subject_id: str) -> dict[str, int]:
    """MEM-19: every placeholder row of hers, in every thread of the organisation, also threads that stay:

    - rows of her own threads (they go with the threads anyway; counted here);
    - values first found in text she wrote (`subject`), since her items are erased;
    - values her subject attributes gave (`belongs_to`: her name, e-mail address, phone number), and every row
      of any thread holding one of those values in any case ("Anna de Vries" in a colleague's group thread,
      written before the colleague's turn knew it was hers);
    - rows whose value is her subject id (an id is often an e-mail address).
    A value removed from a thread whose remaining text still holds it gets a new placeholder on its next turn.
    """
    own = select(T.c.id).where(T.c.org_id == org_id, T.c.subject == subject_id)
    hers = select(func.md5(func.lower(P.c.value))).where(P.c.org_id == org_id, P.c.belongs_to == subject_id)
    lower_key = func.md5(func.lower(P.c.value))
    result = await db.execute(delete(P).where(P.c.org_id == org_id, or_(
        P.c.thread_id.in_(own), P.c.subject == subject_id, P.c.belongs_to == subject_id,
        lower_key.in_(hers.scalar_subquery()), lower_key == func.md5(func.lower(subject_id)),
    )).returning(P.c.placeholder))
    return {"pseudonyms": len(result.all())}
