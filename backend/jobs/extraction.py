"""The extraction jobs (EXT-7 … EXT-11) and the periodic re-embedding (PLT-13): thin; each step runs in a
transaction of its own with a system context, the model call with none open."""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

from procrastinate import JobContext

from backend.access.actor import Actor
from backend.access.context import RequestContext
from backend.domains.extraction import planning, reading
from backend.domains.extraction import repository as repo
from backend.domains.extraction.switch import start_run, state_of
from backend.domains.memory import reembed
from backend.jobs.resources import resources
from backend.providers.chat import ChatAnswer, ModelError

ACTOR = Actor("system", "extraction")
REEMBED_ACTOR = Actor("system", "reembed")
MOST_PER_JOB = 100  # windows one read job reads at most; a thread with more queues its job again
log = logging.getLogger("coremem.extraction")
System = Callable[[str, Actor], AbstractAsyncContextManager[RequestContext | None]]  # Resources.system


async def schedule(context: JobContext, timestamp: int) -> int:
    """Every minute: start a run of each enabled switch whose `schedule_minutes` have passed (EXT-7)."""
    res = resources(context)
    async with res.sessionmaker() as db:
        due = await repo.due_switches(db)
    started = 0
    for row in due:
        async with res.system(row["org_id"], ACTOR) as ctx:
            if ctx is None:
                continue
            switch = await repo.lock_if_due(ctx.db, ctx.org_id, row["index_id"])
            if switch is None:
                continue
            if await state_of(ctx, switch) != "active":
                await repo.mark_scheduled(ctx.db, ctx.org_id, row["index_id"])
                continue
            await start_run(ctx, row["index_id"], "schedule")
            started += 1
    return started


async def plan(context: JobContext, *, org_id: str, index_id: str, run_id: str) -> int:
    """Cut the run's eligible threads into windows, a batch per transaction, and queue their read jobs."""
    system = resources(context).system
    async with system(org_id, ACTOR) as ctx:
        if ctx is not None:
            await planning.unpark(ctx, index_id, run_id)
    after = ""
    batches = 0
    while True:
        async with system(org_id, ACTOR) as ctx:
            last = await planning.plan_batch(ctx, index_id, run_id, after) if ctx else None
        batches += 1
        if last is None:
            break
        after = last
    async with system(org_id, ACTOR) as ctx:
        if ctx is not None:
            await repo.mark_planned(ctx.db, org_id, run_id)
    return batches


async def read_thread(context: JobContext, *, org_id: str, index_id: str, thread_id: str) -> int:
    """Read the thread's queued windows, oldest first; returns how many were read."""
    system = resources(context).system
    read = 0
    for _ in range(MOST_PER_JOB):
        async with system(org_id, ACTOR) as ctx:
            work = await reading.next_window(ctx, index_id, thread_id) if ctx else None
        if work is None:
            return read
        if isinstance(work, str):
            continue
        try:
            answer = await reading.ask_model(work)
        except ModelError as error:
            async with system(org_id, ACTOR) as ctx:
                closed = ctx is None or await reading.model_failed(ctx, work, error)
            if closed:
                continue
            raise  # the job is retried with backoff (backend/jobs/app.RETRY)
        except Exception as error:  # ask_model raises ModelError only: anything else fails the window below
            if reading.transient(error):
                raise
            await _unexpected(system, org_id, work, error, None)
            continue
        try:
            async with system(org_id, ACTOR) as ctx:
                if ctx is not None:
                    await reading.store_window(ctx, work, answer)
        except Exception as error:  # its transaction rolled back: the window fails in one of its own
            if reading.transient(error):
                raise
            await _unexpected(system, org_id, work, error, answer)
            continue
        read += 1
    async with system(org_id, ACTOR) as ctx:  # more than one job's worth: the rest in a job of its own
        if ctx is not None:
            from backend.domains.extraction.queue import queue_thread

            await queue_thread(ctx.db, org_id, index_id, thread_id)
    return read


async def _unexpected(system: System, org_id: str, work: reading.WindowWork, error: Exception,
                      answer: ChatAnswer | None) -> None:
    """Fail the window (and meter its answer) on an error the read could not handle; retrying would repeat it."""
    async with system(org_id, ACTOR) as ctx:
        code = await reading.unexpected(ctx, work, error, answer) if ctx is not None else "done"
    log.log(logging.ERROR if code == "internal_error" else logging.WARNING, "extraction: window %s of %s: %s",
            work.window_id, org_id, code, exc_info=error)


async def reembed_missing(context: JobContext, timestamp: int) -> int:
    """Every few minutes: records of embedding indexes written without a vector get it (PLT-13)."""
    res = resources(context)
    outcomes = await reembed.run(res.sessionmaker, res.settings.secret, actor=REEMBED_ACTOR)
    return sum(o.embedded for o in outcomes)
