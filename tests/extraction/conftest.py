"""Extraction's jobs queue further jobs while they run (a run's plan queues its threads' read jobs): `run_jobs`
here runs workers until no job that may run now is left."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

RUNNABLE = ("SELECT count(*) FROM procrastinate_jobs WHERE status = 'todo' "
            "AND (scheduled_at IS NULL OR scheduled_at <= now())")


@pytest.fixture
def run_jobs(database_url: str, settings: Any, db: Any) -> Any:
    from backend.jobs.worker import run_worker

    def run(concurrency: int = 2, settings_used: Any = None) -> None:
        for _ in range(20):
            asyncio.run(run_worker(database_url, settings_used or settings, concurrency=concurrency, wait=False,
                                   install_signal_handlers=False, listen_notify=False))
            if db.execute(RUNNABLE).fetchone()[0] == 0:
                return
        raise AssertionError("jobs kept coming")

    return run
