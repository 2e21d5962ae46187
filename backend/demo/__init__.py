"""The demo organisation that `coremem run` creates on an empty database and `coremem demo` adds to any.

Content is seeded: the same seed and day give the same people, records, threads, notes, states, stores and keys
(ids, secrets and creation times differ, as they must). It is written through the API, in this process
(`transport.in_process_api`), after `coremem bootstrap` made the organisation and its administrator.
"""

from __future__ import annotations

from collections import Counter
from datetime import date, datetime
from typing import Any
from zoneinfo import ZoneInfo

import httpx

from backend.demo.build import DEFAULT_SEED, STEPS, Demo, Step, build
from backend.demo.settings import TIMEZONE
from backend.demo.transport import in_process_api
from shared.client import CoreClient


def today() -> date:
    """The demo organisation's current day: due dates and expiries count from it, so the demo stays current."""
    return datetime.now(ZoneInfo(TIMEZONE)).date()


def write_demo(base_url: str, transport: httpx.BaseTransport | None, credentials: dict[str, Any], *,
               seed: int = DEFAULT_SEED, anchor: date | None = None) -> Counter[str]:
    """Fill the organisation `coremem bootstrap` answered with (`credentials`) through the API at `base_url`."""
    with CoreClient(base_url, credentials["admin_token"], transport=transport) as admin:
        demo = Demo(base_url=base_url, transport=transport, org_id=credentials["org_id"], admin=admin,
                    writer_key=credentials["key"], seed=seed, anchor=anchor or today())
        return build(demo)


def create_demo(database_url: str, credentials: dict[str, Any], *, seed: int = DEFAULT_SEED,
                anchor: date | None = None) -> Counter[str]:
    """`write_demo` through the real app running in this process, on `database_url`, then the job queue worked
    until it is empty, so that the demo's extraction run has finished when this returns."""
    with in_process_api(database_url) as (base_url, transport):
        counts = write_demo(base_url, transport, credentials, seed=seed, anchor=anchor)
    work_the_queue(database_url)
    maintain_now(database_url, credentials["org_id"])
    return counts


def maintain_now(database_url: str, org_id: str) -> None:
    """The maintenance pass of the organisation's maintained stores, once, now that the extraction run has written
    its records: the pass's analyses find the fact several people hold and propose it as a shared record."""
    import asyncio

    from backend.config import get_settings
    from backend.db.engine import make_engine, make_sessionmaker
    from backend.domains.maintenance import repository as maintained
    from backend.jobs.maintenance import run_store
    from backend.jobs.resources import Resources

    async def run() -> None:
        engine = make_engine(database_url)
        try:
            res = Resources(get_settings(), make_sessionmaker(engine))
            async with res.sessionmaker() as db:
                stores = [row["index_id"] for row in await maintained.due_stores(db, 0) if row["org_id"] == org_id]
            for index_id in stores:
                await run_store(res, org_id, index_id)
        finally:
            await engine.dispose()

    asyncio.run(run())


def work_the_queue(database_url: str) -> None:
    """A real worker in this process until no job may run now (the extraction run's plan and window jobs). One job
    at a time: with more, procrastinate stops at the first empty fetch while the plan job is still queueing the
    window jobs."""
    import asyncio

    from backend.config import get_settings
    from backend.jobs.worker import run_worker

    asyncio.run(run_worker(database_url, get_settings(), concurrency=1, wait=False, install_signal_handlers=False,
                           listen_notify=False))


__all__ = ["DEFAULT_SEED", "STEPS", "Demo", "Step", "create_demo", "maintain_now", "today", "work_the_queue",
           "write_demo"]
