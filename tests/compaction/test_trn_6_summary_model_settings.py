"""TRN-6 with EXT-1: the summary job calls its model with CORE_MODEL_TIMEOUT_SECONDS and CORE_MODEL_MAX_RETRIES,
against a scripted server that answers later than the timeout allows."""

from __future__ import annotations

import asyncio

from backend.jobs.worker import run_worker
from tests.compaction.test_trn_6_summary_job import jobs, summaries_of
from tests.compaction.util import new_thread, schedule_job, write_turns
from tests.helpers import bearer

DELAY = 4.0  # seconds the scripted server waits before each answer


def test_trn_6_a_slow_model_fails_the_summary_job_after_the_configured_timeout(client, org, database_url, db,
                                                                               scripted, settings):
    tid = new_thread(client, bearer(org.key))["id"]
    write_turns(database_url, org.org_id, tid, 1, 8)
    scripted.respond = lambda request: "too late"
    scripted.respond_delay = DELAY
    assert schedule_job(database_url, org.org_id, tid, org.key_id)
    quick = settings.with_overrides(model_timeout_seconds=1.0, model_max_retries=1)
    asyncio.run(run_worker(database_url, quick, concurrency=1, wait=False, install_signal_handlers=False,
                           listen_notify=False))
    assert len(scripted.requests) == 2  # the call and its one retry, each given up after a second
    assert summaries_of(client, org, tid) == []
    assert jobs(db) == [("compaction.summarise", "todo", 1)]  # retried later with the queue's backoff
