"""SQL of MEM-21's same-words check: a record already held in the same words is confirmed, not written again.

A record not yet written has no row to lock, so writers lock its words (index, owner, type, normalised text) with
a transaction-level advisory lock, then look for it in a statement that sees the last holder's record.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import Text, bindparam, select, text
from sqlalchemy.ext.asyncio import AsyncSession

from backend.db.prepared import Prepared
from backend.domains.memory.expressions import R, active_now

__all__ = ["Words", "find", "lock"]

# (index_id, subject or None for a shared record, type, norm_hash)
Words = tuple[str, str | None, str, str]


def _find(shared: bool) -> Prepared:
    owner = R.c.subject.is_(None) if shared else R.c.subject == bindparam("subject", type_=Text)
    return Prepared(select(R.c.id).where(
        R.c.org_id == bindparam("org_id", type_=Text), R.c.index_id == bindparam("index_id", type_=Text),
        R.c.norm_hash == bindparam("norm_hash", type_=Text), owner, R.c.type == bindparam("type", type_=Text),
        *active_now()).order_by(R.c.id).limit(1).with_for_update())


_FIND = {True: _find(True), False: _find(False)}  # a shared record's, a person's
_LOCK = Prepared(text("SELECT pg_advisory_xact_lock(hashtextextended(concat_ws(':', 'same_words', :o, :i, :s, :t, "
                      ":h), 0))").bindparams(*(bindparam(n, type_=Text) for n in "oisth")))


async def lock(db: AsyncSession, org_id: str, words: Iterable[Words]) -> None:
    """Lock the words of several records in one order, the same for every writer: a writer that locked them in
    the order it met them could hold one while another held the second and waited for the first (a deadlock).
    Taking a lock this transaction holds already is free, so `find` may lock the same words again."""
    for index_id, subject, type_, norm_hash in sorted(set(words), key=lambda w: (w[0], w[1] or "", w[1] is None,
                                                                                w[2], w[3])):
        await _LOCK.all(db, {"o": org_id, "i": index_id, "s": subject, "t": type_, "h": norm_hash})


async def find(db: AsyncSession, org_id: str, words: Words) -> str | None:
    """The id of the owner's current record in these words, locked for update; its words locked first."""
    await lock(db, org_id, [words])
    index_id, subject, type_, norm_hash = words
    row = await _FIND[subject is None].first(db, {"org_id": org_id, "index_id": index_id, "subject": subject,
                                                  "norm_hash": norm_hash, "type": type_})
    return str(row["id"]) if row else None
