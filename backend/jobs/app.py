"""The procrastinate App: one per worker process, its tasks registered when it is made.

Retries are configured once (`RETRY`), for every task: a failed job waits 9 s, 21 s, 69 s, 261 s and 17 min
before its five retries. A job whose worker died (no heartbeat for `CORE_JOBS_STALLED_SECONDS`, a minute by
default) is put back in the queue by `recover_stalled`, which every worker runs when it starts and then a few
times per such period (backend/jobs/worker.py). Several workers on several machines share the queue safely:
each job is taken by one worker (row locks), and jobs sharing a `lock` run one at a time across all of them.
"""

from __future__ import annotations

import logging

import procrastinate
from procrastinate import RetryStrategy
from sqlalchemy.engine import make_url

from backend.db.engine import normalise_url
from backend.domains.compaction import service as compaction
from backend.domains.extraction import queue as xq

log = logging.getLogger(__name__)
RETRY = RetryStrategy(max_attempts=5, wait=5, exponential_wait=4)
MAINTENANCE_QUEUE = "maintenance"


def libpq_url(url: str) -> str:
    """The database URL as libpq takes it (the embedded server's Unix socket stays in `?host=`)."""
    return make_url(normalise_url(url)).set(drivername="postgresql").render_as_string(hide_password=False)


def make_app(url: str, *, pool_size: int = 4) -> procrastinate.App:
    from backend.jobs import extraction as x
    from backend.jobs import maintenance
    from backend.jobs.compaction import summarise

    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=libpq_url(url), min_size=1,
                                                                     max_size=pool_size))
    app.task(name=compaction.TASK, queue=compaction.QUEUE, pass_context=True, retry=RETRY)(summarise)
    app.task(name=xq.PLAN_TASK, queue=xq.QUEUE, pass_context=True, retry=RETRY)(x.plan)
    app.task(name=xq.READ_TASK, queue=xq.QUEUE, pass_context=True, retry=RETRY)(x.read_thread)
    scheduler = app.task(name=xq.SCHEDULE_TASK, queue=MAINTENANCE_QUEUE, pass_context=True,
                         queueing_lock=xq.SCHEDULE_TASK)(x.schedule)
    app.periodic(cron="* * * * *", periodic_id="extraction")(scheduler)
    reembedder = app.task(name=xq.REEMBED_TASK, queue=xq.REEMBED_QUEUE, pass_context=True,
                          queueing_lock=xq.REEMBED_TASK, lock=xq.REEMBED_TASK)(x.reembed_missing)
    app.periodic(cron="*/5 * * * *", periodic_id="reembed")(reembedder)
    maintainer = app.task(name=maintenance.TASK, queue=MAINTENANCE_QUEUE, pass_context=True,
                          queueing_lock=maintenance.TASK, lock=maintenance.TASK)(maintenance.maintain)
    app.periodic(cron="*/5 * * * *", periodic_id="maintenance")(maintainer)
    return app


async def recover_stalled(app: procrastinate.App, stalled_seconds: float) -> int:
    """Put the jobs of workers that stopped beating back in the queue (each retry starts the job again); how
    many. Two workers recovering at once: the second finds the job no longer running and leaves it."""
    manager = app.job_manager
    recovered = 0
    for job in await manager.get_stalled_jobs(seconds_since_heartbeat=stalled_seconds):
        try:
            await manager.retry_job(job)
        except Exception:  # procrastinate refuses a job that is no longer `doing`: another worker took it back
            continue
        log.warning("job %s (%s) was left running by a worker that stopped; queued again", job.id, job.task_name)
        recovered += 1
    return recovered
