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

from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from backend.db.tenant import use_org
from backend.domains.memory import repository as repo

log = logging.getLogger(__name__)
_waiting: dict[AsyncEngine, dict[str, Counter[str]]] = {}  # per database: organisation → record id → recalls
_timers: dict[AsyncEngine, asyncio.Task[None]] = {}  # the write each database with counts waiting has coming


def add(db: AsyncSession, org_id: str, ids: Sequence[str], after_seconds: float) -> None:
    """Count one recall of each record in `ids`; written within `after_seconds` on a session of its own."""
    if not ids:
        return
    engine = db.bind
    assert isinstance(engine, AsyncEngine), "sessions are made from the engine (backend/db/engine.py)"
    _waiting.setdefault(engine, {}).setdefault(org_id, Counter()).update(ids)
    if engine not in _timers:
        _timers[engine] = asyncio.get_running_loop().create_task(_write_after(engine, after_seconds))


def waiting(engine: AsyncEngine) -> dict[str, dict[str, int]]:
    """The counts not written yet, per organisation (for tests and diagnostics)."""
    return {org: dict(counts) for org, counts in _waiting.get(engine, {}).items()}


async def _write_after(engine: AsyncEngine, seconds: float) -> None:
    try:
        await asyncio.sleep(seconds)
    finally:
        _timers.pop(engine, None)  # counts added from here on start a new interval
    if not await write(engine) and engine not in _timers:
        _timers[engine] = asyncio.get_running_loop().create_task(_write_after(engine, seconds))


async def write(engine: AsyncEngine) -> bool:
    """Add every waiting count to its records now, one transaction per organisation; False when one failed (its
    counts wait again)."""
    written = True
    for org_id, counts in _waiting.pop(engine, {}).items():
        try:
            async with AsyncSession(engine) as db:
                await use_org(db, org_id)
                async with db.begin():
                    await repo.add_recalls(db, org_id, counts)
        except Exception:
            log.exception("adding %d records' recall counts failed; they are tried again", len(counts))
            _waiting.setdefault(engine, {}).setdefault(org_id, Counter()).update(counts)
            written = False
    return written


async def settle() -> None:
    """Write the counts waiting for databases whose write is due on this loop (the app's shutdown)."""
    loop = asyncio.get_running_loop()
    for engine, timer in [(e, t) for e, t in _timers.items() if t.get_loop() is loop]:
        timer.cancel()
        await asyncio.gather(timer, return_exceptions=True)
        await write(engine)
