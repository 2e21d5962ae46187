"""Vectors made after the write that kept their records has committed (PLT-13: "asynchronously is fine").

A turn's memory write tool would otherwise wait for the embedding provider (for a remote one, a request of its
own) and for the vector's insertion into the HNSW indexes, while the model waits for the tool's result. Its
record is kept at once without a vector, found by its words, and gets its vector in a task of this process
that runs while the model composes its next answer; search and ranking use the vector from the moment it is
stored. Should the task fail or the process stop first, the periodic re-embedding (`memory.reembed`, every five
minutes) gives the record its vector, as it does for any record whose provider failed at write time.

A `hashing` vector is not left for later: it costs microseconds, so the write's own statement stores it, and a
later task's transaction would cost the turn more than it saves (bench/results/turns.md).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from backend.db.tenant import use_org
from backend.domains.memory import reembed

log = logging.getLogger(__name__)
_running: set[asyncio.Task[None]] = set()


def soon(db: AsyncSession, org_id: str, index: Mapping[str, Any], ids: Sequence[str]) -> None:
    """Give the records `ids` of `index`, which `db` has committed without a vector, their vectors in a task of
    this loop, on a session of its own."""
    engine = db.bind
    assert isinstance(engine, AsyncEngine), "sessions are made from the engine (backend/db/engine.py)"
    setting = {"org_id": org_id, "id": index["id"], "embedding": index["embedding"]}
    task = asyncio.get_running_loop().create_task(_embed(engine, setting, list(ids)))
    _running.add(task)  # the loop keeps only weak references to its tasks
    task.add_done_callback(_running.discard)


async def _embed(engine: AsyncEngine, index: Mapping[str, Any], ids: list[str]) -> None:
    try:
        async with AsyncSession(engine) as db:
            await use_org(db, index["org_id"])
            async with db.begin():
                _, _, error = await reembed.embed_batch(db, index, "", len(ids), ids=ids)
        if error is not None:
            log.warning("embedding later failed for index %s: %s (the periodic re-embedding retries)",
                        index["id"], error)
    except Exception:  # a lost vector is made again by the periodic re-embedding
        log.exception("embedding later failed for index %s (the periodic re-embedding retries)", index["id"])


async def settle() -> None:
    """Wait for the vectors this loop is still making (the app's shutdown)."""
    loop = asyncio.get_running_loop()
    while mine := [task for task in _running if task.get_loop() is loop]:
        await asyncio.gather(*mine, return_exceptions=True)
