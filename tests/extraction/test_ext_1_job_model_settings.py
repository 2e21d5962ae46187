"""EXT-1: CORE_MODEL_TIMEOUT_SECONDS and CORE_MODEL_MAX_RETRIES govern the background jobs' model calls too:
extraction (with no SDK retries, EXT-8) and the maintenance pass's helper model, against a scripted server that
answers later than the timeout allows."""

from __future__ import annotations

import json

from tests.extraction.maintenance_util import improvements_on, maintain, write
from tests.extraction.util import answer, conversation, new, new_store, run_now, switch_on

DELAY = 4.0  # seconds the scripted server waits before each answer


def test_ext_8_a_read_job_gives_up_on_a_slow_model_after_the_configured_timeout(client, org, db, scripted, run_jobs,
                                                                                 settings):
    index_id = new_store(org)
    conversation(org, "anna", ("user", "I like tea."))
    switch_on(org, index_id)
    scripted.respond = lambda request: answer(new("preference", "Anna likes tea."))
    scripted.respond_delay = DELAY
    run_now(org, index_id)
    run_jobs(settings_used=settings.with_overrides(model_timeout_seconds=1.0, model_max_retries=3))
    state, attempts, error = db.execute("SELECT state, attempts, error FROM extraction_windows").fetchone()
    assert (state, attempts) == ("queued", 1) and "did not answer within 1 s" in error
    assert len(scripted.requests) == 1  # no SDK retries: the window's attempts are the retries (EXT-8)


def test_ext_16_the_helper_model_is_asked_with_the_configured_timeout_and_retries(client, org, db, scripted,
                                                                                   run_jobs, database_url, settings):
    improvements_on(org)
    index_id = new_store(org)
    monday = write(org, index_id, "anna", "The team meeting is on Monday.")
    scripted.respond = lambda request: json.dumps({"contradictions": [0]})
    scripted.respond_delay = DELAY
    write(org, index_id, "anna", "The team meeting is on Tuesday.")
    quick = settings.with_overrides(model_timeout_seconds=1.0, model_max_retries=1)
    maintain(database_url, lambda: run_jobs(settings_used=quick))
    assert len(scripted.requests) == 2  # the call and its one retry, each given up after a second
    got = client.get(f"/memory/{monday['id']}", headers=org.full).json()
    assert got["contested"] is False
    assert client.get(f"/memory/stores/{index_id}", headers=org.full).json()["last_maintenance_run_at"] is not None
