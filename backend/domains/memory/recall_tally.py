"""Recall counts of turns, added up in this process and written together (INJ-8 allows batching).

Raising each injected record's `recall_count` in a turn's closing transaction cost the turn about 1.9 ms of
PostgreSQL's time (bench-turns' statement log, p50 for a block of ~20 records): every updated row gets a new
version in each of memory_records' indexes. A turn now only adds its injected ids to a tally once it has
committed; `recall_flush_seconds` after the first count that waits (CORE_RECALL_FLUSH_SECONDS, default 1), one
statement per organisation adds the tally to the records, so a record that many turns recalled meanwhile is
written once.

A count shows at most that long (plus its statement) after its turn. Stopping the server writes what waits (the
app's lifespan calls `settle`); a process killed outright loses its last interval's counts, which only break
ties between records of equal confidence. A write that fails keeps its counts for the next one.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from backend.db.tenant import use_org
from backend.domains.memory import repository as repo

log = logging.getLogger(__name__)


@dataclass
class _Tally:
    """The counts of one database (engine), kept on the loop that serves it."""
    loop: asyncio.AbstractEventLoop
    waiting: dict[str, Counter[str]] = field(default_factory=dict)  # organisation → record id → recalls
    writing: dict[str, Counter[str]] = field(default_factory=dict)  # what the busy write has taken
    timer: asyncio.Task[None] | None = None  # the coming write, while it sleeps
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)  # one write at a time


_tallies: dict[AsyncEngine, _Tally] = {}


def add(db: AsyncSession, org_id: str, ids: Sequence[str], after_seconds: float) -> None:
    """Count one recall of each record in `ids`; written within `after_seconds` on a session of its own."""
    if not ids:
        return
    engine = db.bind
    assert isinstance(engine, AsyncEngine), "sessions are made from the engine (backend/db/engine.py)"
    loop = asyncio.get_running_loop()
    tally = _tallies.setdefault(engine, _Tally(loop))
    tally.waiting.setdefault(org_id, Counter()).update(ids)
    if tally.timer is None:
        tally.timer = loop.create_task(_write_after(engine, tally, after_seconds))


def waiting(engine: AsyncEngine) -> dict[str, dict[str, int]]:
    """The counts not written yet, per organisation, those a write is busy with included (for tests and
    diagnostics)."""
    total: dict[str, Counter[str]] = {}
    tally = _tallies.get(engine)
    for counts in (tally.writing, tally.waiting) if tally else ():
        for org_id, recalls in counts.items():
            total.setdefault(org_id, Counter()).update(recalls)
    return {org_id: dict(recalls) for org_id, recalls in total.items()}


async def _write_after(engine: AsyncEngine, tally: _Tally, seconds: float) -> None:
    try:
        await asyncio.sleep(seconds)
    finally:
        tally.timer = None  # counts added from here on start a new interval
    if not await write(engine) and tally.timer is None:
        tally.timer = asyncio.get_running_loop().create_task(_write_after(engine, tally, seconds))


async def write(engine: AsyncEngine) -> bool:
    """Add every waiting count to its records now, one transaction per organisation; False when one failed (its
    counts wait again). A write already busy finishes first."""
    tally = _tallies.get(engine)
    if tally is None:
        return True
    async with tally.lock:
        written = True
        tally.writing, tally.waiting = tally.waiting, {}
        try:
            for org_id, counts in list(tally.writing.items()):
                try:
                    async with AsyncSession(engine) as db:
                        await use_org(db, org_id)
                        async with db.begin():
                            await repo.add_recalls(db, org_id, counts)
                except Exception:
                    log.exception("adding %d records' recall counts failed; they are tried again", len(counts))
                    written = False
                else:
                    del tally.writing[org_id]
        finally:  # what was not written (refused, or the write cancelled) waits for the next write
            for org_id, counts in tally.writing.items():
                tally.waiting.setdefault(org_id, Counter()).update(counts)
            tally.writing = {}
        return written


async def settle() -> None:
    """Write the counts of the databases served on this loop now (the app's shutdown): a write still sleeping is
    cancelled, one under way is waited for (the lock), and what is left is written."""
    loop = asyncio.get_running_loop()
    for engine, tally in [(e, t) for e, t in _tallies.items() if t.loop is loop]:
        if tally.timer is not None:
            tally.timer.cancel()
            await asyncio.gather(tally.timer, return_exceptions=True)
        if not await write(engine):
            log.warning("the recall counts of %d organisations are lost with this process", len(tally.waiting))
        del _tallies[engine]
