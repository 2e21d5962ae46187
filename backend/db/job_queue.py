"""Queueing a background job in the caller's own transaction (the job queue is procrastinate's, migration 0013).

A domain queues work with `defer` on its session: the job commits with the change that asked for it, or not at
all, so a turn that rolls back leaves no job and a committed one never lacks its job. The worker side (the
procrastinate App and the task definitions) lives in backend/jobs; both agree on task names and queues only.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from sqlalchemy import text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

# procrastinate's own SQL entry point for deferring (the `defer_jobs` query of its 3.x releases).
_DEFER = text("SELECT unnest(procrastinate_defer_jobs_v1(ARRAY[ROW(CAST(:queue AS varchar), CAST(:task AS varchar), "
              "CAST(:priority AS integer), CAST(:lock AS text), CAST(:queueing_lock AS text), CAST(:args AS jsonb), "
              "CAST(NULL AS timestamptz))::procrastinate_job_to_defer_v1])) AS id")
_QUEUEING_LOCK_INDEX = "procrastinate_jobs_queueing_lock_idx_v1"


async def defer(db: AsyncSession, *, task: str, queue: str, args: Mapping[str, Any], lock: str | None = None,
                queueing_lock: str | None = None, priority: int = 0) -> int | None:
    """Queue one job; its id, or None when a job with the same `queueing_lock` is already waiting (that job
    will see whatever this one would have: it reads the database when it runs)."""
    values = {"queue": queue, "task": task, "priority": priority, "lock": lock, "queueing_lock": queueing_lock,
              "args": json.dumps(dict(args))}
    if queueing_lock is None:
        return int((await db.execute(_DEFER, values)).scalar_one())
    try:
        async with db.begin_nested():  # a refused insert must not end the caller's transaction
            return int((await db.execute(_DEFER, values)).scalar_one())
    except IntegrityError as exc:
        if getattr(getattr(exc.orig, "diag", None), "constraint_name", None) == _QUEUEING_LOCK_INDEX:
            return None
        raise
