"""The extraction jobs' names and how a domain queues them (house rule 8: in the caller's transaction)."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession

from backend.db import job_queue

QUEUE = "extraction"
PLAN_TASK = "extraction.plan"  # cut a run's eligible threads into windows
READ_TASK = "extraction.read_thread"  # read a thread's queued windows, oldest first
SCHEDULE_TASK = "extraction.schedule"  # periodic: start the runs that are due
REEMBED_TASK = "memory.reembed"  # periodic: give records without a vector their vector (PLT-13)
REEMBED_QUEUE = "maintenance"


def thread_lock(org_id: str, index_id: str, thread_id: str) -> str:
    """One reader of a thread per switch at a time on every worker (procrastinate's `lock`), at most one waiting
    (its `queueing_lock`): the waiting job reads every window queued when it runs."""
    return f"extraction:{org_id}:{index_id}:{thread_id}"


async def queue_plan(db: AsyncSession, org_id: str, index_id: str, run_id: str) -> None:
    await job_queue.defer(db, task=PLAN_TASK, queue=QUEUE,
                          args={"org_id": org_id, "index_id": index_id, "run_id": run_id},
                          lock=f"extraction-plan:{org_id}:{index_id}")


async def queue_thread(db: AsyncSession, org_id: str, index_id: str, thread_id: str) -> bool:
    lock = thread_lock(org_id, index_id, thread_id)
    job_id = await job_queue.defer(db, task=READ_TASK, queue=QUEUE, lock=lock, queueing_lock=lock,
                                   args={"org_id": org_id, "index_id": index_id, "thread_id": thread_id})
    return job_id is not None


async def queue_reembed(db: AsyncSession, timestamp: int) -> bool:
    """A run of the periodic re-embedding job now (an index changed its model); at most one waits, since a waiting
    run embeds every record that lacks a vector of its index's setting when it starts."""
    job_id = await job_queue.defer(db, task=REEMBED_TASK, queue=REEMBED_QUEUE, args={"timestamp": timestamp},
                                   lock=REEMBED_TASK, queueing_lock=REEMBED_TASK)
    return job_id is not None
