"""Queueing the summary job after a turn (TRN-6)."""

from __future__ import annotations

from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from backend.access.context import RequestContext
from backend.db import job_queue
from backend.domains.compaction.settings import CompactionSettings

TASK = "compaction.summarise"  # the name backend/jobs registers the task under
QUEUE = "compaction"


def thread_lock(org_id: str, thread_id: str) -> str:
    """One summary job of a thread runs at a time, on every worker (procrastinate's `lock`), and at most one
    waits (its `queueing_lock`): a waiting job reads the thread when it runs, so it covers later turns too."""
    return f"compaction:{org_id}:{thread_id}"


def job_args(org_id: str, thread_id: str, settings: CompactionSettings, key_id: str | None,
             model_id: str) -> dict[str, Any]:
    return {"org_id": org_id, "thread_id": thread_id, "settings": settings.to_json(), "key_id": key_id,
            "model_id": model_id}


async def schedule(db_or_ctx: AsyncSession | RequestContext, org_id: str, thread_id: str,
                   settings: CompactionSettings, key_id: str | None, model_id: str) -> bool:
    """Queue the summary job for a thread, in the caller's transaction (it runs once that commits). False when
    there is nothing to summarise (`window`) or a job for the thread is already waiting."""
    if settings.mode == "window":
        return False
    db = db_or_ctx.db if isinstance(db_or_ctx, RequestContext) else db_or_ctx
    lock = thread_lock(org_id, thread_id)
    job_id = await job_queue.defer(db, task=TASK, queue=QUEUE, args=job_args(org_id, thread_id, settings, key_id,
                                                                            model_id),
                                   lock=lock, queueing_lock=lock)
    return job_id is not None
