"""EXT-6 with EXT-8: a window that failed after its model attempts and is queued again (the model, instructions or
types changed) is read anew with all its attempts; a parked window resumes with the attempts it had."""

from __future__ import annotations

from tests.extraction.util import answer, first_read_fails, new, records, run_now, switch_on

DUE = "UPDATE procrastinate_jobs SET scheduled_at = now() WHERE task_name = 'extraction.read_thread'"


def _window(db):
    return db.execute("SELECT state, attempts, error_code FROM extraction_windows").fetchall()


def test_ext_6_a_window_queued_again_after_failing_gets_all_its_attempts_back(client, org, db, scripted, run_jobs):
    index_id = first_read_fails(org, scripted, run_jobs)
    for _ in range(4):  # the read job's retries, made due at once instead of after their backoff
        db.execute(DUE)
        scripted.fail(500)
        run_jobs()
    (state, attempts, code), = _window(db)
    assert (state, attempts) == ("failed", 5) and code is not None
    switch_on(org, index_id, instructions="Note what people drink.")  # EXT-6: queued again under a new run
    scripted.fail(500)  # one transient error of the new read: the window waits for the job's retry
    run_jobs()
    assert _window(db) == [("queued", 1, None)]
    db.execute(DUE)
    scripted.reply(answer(new("preference", "Anna likes tea.")))
    run_jobs()
    assert _window(db) == [("ready", 1, None)]
    assert [r["text"] for r in records(org, index_id, "anna")] == ["Anna likes tea."]


def test_ext_8_a_parked_window_keeps_its_attempts_when_it_goes_on(client, org, db, scripted, run_jobs):
    index_id = first_read_fails(org, scripted, run_jobs)
    assert _window(db) == [("queued", 1, None)]
    client.patch(f"/tenants/{org.org_id}", headers=org.admin, json={"limits": {"monthly_model_tokens": 0}})
    db.execute(DUE)
    run_jobs()
    assert _window(db) == [("parked", 1, None)]
    client.patch(f"/tenants/{org.org_id}", headers=org.admin, json={"limits": {"monthly_model_tokens": None}})
    scripted.fail(500)
    run_now(org, index_id)  # its plan job queues the parked window again: the same read goes on
    run_jobs()
    assert _window(db) == [("queued", 2, None)]
