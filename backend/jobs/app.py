"""The procrastinate App: one per worker process, its tasks registered when it is made.

Retries are configured once (`RETRY`), for every task: a failed job waits 9 s, 21 s, 69 s, 261 s and 17 min
before its five retries. A job whose worker died (no heartbeat for a minute) is put back in the queue by the
`retry_stalled_jobs` task, which every worker defers each minute (procrastinate defers a periodic job once,
however many workers ask). Several workers on several machines share the queue safely: each job is taken by
one worker (row locks), and jobs sharing a `lock` run one at a time across all of them.
"""

from __future__ import annotations

import logging

import procrastinate
from procrastinate import JobContext, RetryStrategy
from sqlalchemy.engine import make_url

from backend.db.engine import normalise_url
from backend.domains.compaction import service as compaction
from backend.domains.extraction import queue as xq

log = logging.getLogger(__name__)
RETRY = RetryStrategy(max_attempts=5, wait=5, exponential_wait=4)
STALLED_AFTER_SECONDS = 60  # six missed heartbeats (workers beat every 10 s)
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
    stalled = app.task(name="jobs.retry_stalled_jobs", queue=MAINTENANCE_QUEUE, pass_context=True,
                       queueing_lock="retry_stalled_jobs")(retry_stalled_jobs)
    app.periodic(cron="* * * * *", periodic_id="stalled")(stalled)
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


async def retry_stalled_jobs(context: JobContext, timestamp: int) -> int:
    """Put the jobs of workers that stopped beating back in the queue; each retry starts it again."""
    manager = context.app.job_manager
    stalled = list(await manager.get_stalled_jobs(seconds_since_heartbeat=STALLED_AFTER_SECONDS))
    for job in stalled:
        log.warning("job %s (%s) was left running by a worker that stopped; queued again", job.id, job.task_name)
        await manager.retry_job(job)
    return len(stalled)
