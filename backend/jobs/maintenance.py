"""The maintenance pass (EXT-14 … EXT-16) as a periodic job: every five minutes it runs the pass of each store
whose `maintenance.enabled` holds and whose last run is an hour old; thin, each step in a transaction of its
own with a system context, the helper model called with none open."""

from __future__ import annotations

import logging

from procrastinate import JobContext

from backend.access.actor import Actor
from backend.db import locks
from backend.domains.maintenance import pass_
from backend.domains.maintenance import repository as repo
from backend.jobs.resources import Resources, resources

ACTOR = Actor("system", "maintenance")
TASK = "maintenance.pass"
log = logging.getLogger("coremem.maintenance")


async def maintain(context: JobContext, timestamp: int) -> int:
    """The due stores' passes; how many ran."""
    res = resources(context)
    async with res.sessionmaker() as db:
        due = await repo.due_stores(db, pass_.EVERY_MINUTES)
    ran = 0
    for row in due:
        try:
            ran += await run_store(res, row["org_id"], row["index_id"])
        except Exception:  # one store's failing pass must not stop the passes of the stores after it
            log.exception("maintenance of %s/%s failed; it stays due", row["org_id"], row["index_id"])
    return ran


async def run_store(res: Resources, org_id: str, index_id: str) -> int:
    """One store's pass now, due or not (the job above, and the demo after its extraction run); 1 when it ran.
    Skipped while another pass of the store runs: the store is marked as run only when a pass finishes, so a job
    that found it due meanwhile must not run a second pass beside the first."""
    async with locks.held(res.sessionmaker, f"maintenance:{org_id}:{index_id}") as ours:
        if not ours:
            return 0
        async with res.system(org_id, ACTOR) as ctx:
            plan = await pass_.prepare(ctx, index_id) if ctx is not None else None
        if plan is None:
            return 0
        await pass_.ask(plan)
        async with res.system(org_id, ACTOR) as ctx:
            if ctx is not None:
                counts = await pass_.finish(ctx, plan)
                log.info("maintenance of %s/%s: %s", org_id, index_id, counts)
        return 1
