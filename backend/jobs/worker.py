"""Running a worker: `coremem worker` and the one `coremem run` starts beside the API."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import threading
from typing import Any

from backend.config import Settings
from backend.db.engine import make_engine, make_sessionmaker
from backend.jobs.app import make_app, recover_stalled
from backend.jobs.resources import KEY, Resources

log = logging.getLogger(__name__)
HEARTBEAT_SECONDS = 10.0  # at most; six beats fit in the stalled period (CORE_JOBS_STALLED_SECONDS)
SHUTDOWN_GRACE_SECONDS = 30.0  # on SIGTERM, running jobs get this long; the rest are retried by another worker


async def run_worker(url: str, settings: Settings, *, concurrency: int = 4, wait: bool = True,
                     name: str | None = None, install_signal_handlers: bool = True, **options: Any) -> None:
    """Take jobs from the queue, `concurrency` at a time, until stopped (SIGINT or SIGTERM) or, with
    `wait=False`, until the queue holds no job that may run now."""
    engine = make_engine(url, pool_size=concurrency)
    app = make_app(url, pool_size=concurrency + 4)  # + listening, heartbeats, fetching, recovering
    stalled = settings.jobs_stalled_seconds
    try:
        async with app.open_async():
            recovering = asyncio.create_task(_recover_stalled_jobs(app, stalled), name="recover stalled jobs")
            try:
                await app.run_worker_async(
                    concurrency=concurrency, wait=wait, name=name or f"{socket.gethostname()}-worker",
                    additional_context={KEY: Resources(settings, make_sessionmaker(engine))},
                    delete_jobs="successful", shutdown_graceful_timeout=SHUTDOWN_GRACE_SECONDS,
                    install_signal_handlers=install_signal_handlers,
                    update_heartbeat_interval=min(HEARTBEAT_SECONDS, stalled / 6), stalled_worker_timeout=stalled,
                    **options)
            finally:
                recovering.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await recovering
    finally:
        await engine.dispose()


async def _recover_stalled_jobs(app: Any, stalled_seconds: float) -> None:
    """At start (a worker restarted after a crash takes back what it left) and then four times per stalled
    period, at most every 15 s: jobs of workers without a heartbeat for `stalled_seconds` go back to the queue."""
    while True:
        try:
            await recover_stalled(app, stalled_seconds)
        except Exception:  # the database may be away for a moment; the next round tries again
            log.exception("recovering stalled jobs failed")
        await asyncio.sleep(min(15.0, stalled_seconds / 4))


class BackgroundWorker:
    """A worker on a thread of its own, beside the API in one process (`coremem run`): it stops with the
    process's own shutdown (`stop`), so Ctrl-C or SIGTERM never leaves it running."""

    def __init__(self, url: str, settings: Settings, *, concurrency: int = 1) -> None:
        self._run = run_worker(url, settings, concurrency=concurrency, name="beside-the-api",
                               install_signal_handlers=False)
        self._loop = asyncio.new_event_loop()
        self._task: asyncio.Task[None] | None = None
        self._running = threading.Event()
        self._thread = threading.Thread(target=self._main, name="coremem-worker", daemon=True)

    def start(self) -> BackgroundWorker:
        self._thread.start()
        return self

    def _main(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._task = self._loop.create_task(self._run)
        self._running.set()
        try:
            self._loop.run_until_complete(self._task)
        except asyncio.CancelledError:
            pass
        except Exception:
            log.exception("the background worker stopped")
        finally:
            self._loop.close()

    def stop(self, timeout: float = SHUTDOWN_GRACE_SECONDS + 10) -> None:
        """Running jobs finish (or are handed back after the grace period); the worker leaves the queue."""
        if self._running.wait(timeout=5) and self._task is not None:
            with contextlib.suppress(RuntimeError):  # its loop already ended: the worker stopped by itself
                self._loop.call_soon_threadsafe(self._task.cancel)
        self._thread.join(timeout)
