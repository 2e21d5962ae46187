"""TRN-6: the summary job on the job queue, run by a real worker against the scripted model server: what it sent,
the summary and usage rows it wrote, retries, two workers, and threads deleted or people erased meanwhile."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from backend import contexts
from backend.db import job_queue
from backend.domains.compaction import CompactionSettings, service, summaries
from backend.domains.orgs import repository as orgs
from backend.jobs.compaction import ACTOR
from backend.jobs.worker import run_worker
from tests.compaction.util import in_transaction, new_thread, schedule_job, write_turns
from tests.helpers import bearer


def summaries_of(client: Any, org: Any, thread_id: str) -> list[tuple[int, int, int, str, str]]:
    rows = client.get(f"/threads/{thread_id}/summaries", headers=bearer(org.key)).json()["data"]
    return [(s["from_position"], s["to_position"], s["level"], s["model"], s["text"]) for s in rows]


def usage_rows(db: Any) -> list[tuple[Any, ...]]:
    return db.execute("SELECT key_id, job, model, input_tokens, output_tokens FROM usage_events ORDER BY id").fetchall()


def jobs(db: Any) -> list[tuple[Any, ...]]:
    return db.execute("SELECT task_name, status, attempts FROM procrastinate_jobs "
                      "WHERE task_name = 'compaction.summarise' ORDER BY id").fetchall()


def wait_for(condition: Any, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_trn_6_the_job_writes_the_first_summary_after_the_eighth_turn(client, org, database_url, db, scripted,
                                                                      run_jobs):
    tid = new_thread(client, bearer(org.key))["id"]
    write_turns(database_url, org.org_id, tid, 1, 7)
    assert schedule_job(database_url, org.org_id, tid, org.key_id)
    run_jobs()
    assert summaries_of(client, org, tid) == [] and scripted.requests == []
    write_turns(database_url, org.org_id, tid, 8, 8)
    scripted.reply("Asked three questions; each was answered.", usage=(120, 15))
    assert schedule_job(database_url, org.org_id, tid, org.key_id)
    run_jobs()
    assert summaries_of(client, org, tid) == [(1, 6, 1, "scripted", "Asked three questions; each was answered.")]
    sent = scripted.messages(0)
    assert scripted.last["model"] == "scripted" and [m["role"] for m in sent] == ["system", "user"]
    assert "summary" in sent[0]["content"]
    transcript = sent[1]["content"]
    assert "user: question 1" in transcript and "assistant: answer 3" in transcript
    assert "question 4" not in transcript  # turns 4-8 are the recent ones, sent in full
    assert usage_rows(db) == [(org.key_id, "compaction", "scripted", 120, 15)]
    assert jobs(db) == []  # done: the finished job leaves the queue
    assert db.execute("SELECT from_turn, to_turn FROM thread_summaries").fetchall() == [(1, 3)]


def test_trn_6_the_organisations_helper_model_writes_the_summaries(client, org, database_url, scripted, run_jobs):
    assert client.post("/admin/models", headers=org.admin, json={
        "id": "helper", "provider": "openai_compatible", "base_url": scripted.url, "model": "small-llm"}
    ).status_code == 201
    response = client.patch(f"/tenants/{org.org_id}", headers=org.admin,
                            json={"helper_model": {"provider": "openai_compatible", "model": "helper"}})
    assert response.status_code == 200, response.text
    tid = new_thread(client, bearer(org.key))["id"]
    write_turns(database_url, org.org_id, tid, 1, 8)
    scripted.reply("by the helper")
    schedule_job(database_url, org.org_id, tid, org.key_id)
    run_jobs()
    assert scripted.last["model"] == "small-llm"
    assert summaries_of(client, org, tid) == [(1, 6, 1, "helper", "by the helper")]
    # A helper model the organisation is not offered leaves the summaries to the turn's model.
    client.patch(f"/tenants/{org.org_id}", headers=org.admin,
                 json={"helper_model": {"provider": "openai_compatible", "model": "withdrawn"}})
    write_turns(database_url, org.org_id, tid, 9, 11)
    schedule_job(database_url, org.org_id, tid, org.key_id)
    run_jobs()
    assert scripted.last["model"] == "scripted" and summaries_of(client, org, tid)[1][:4] == (7, 12, 1, "scripted")


def test_trn_6_a_failed_model_call_is_retried_later_and_writes_the_summary_then(client, org, database_url, db,
                                                                                scripted, run_jobs):
    tid = new_thread(client, bearer(org.key))["id"]
    write_turns(database_url, org.org_id, tid, 1, 8)
    for _ in range(3):  # the call itself and the provider's two quick retries
        scripted.fail(500)
    schedule_job(database_url, org.org_id, tid, org.key_id)
    run_jobs()
    assert len(scripted.requests) == 3 and summaries_of(client, org, tid) == [] and usage_rows(db) == []
    assert jobs(db) == [("compaction.summarise", "todo", 1)]
    wait = db.execute("SELECT scheduled_at - now() FROM procrastinate_jobs WHERE task_name = 'compaction.summarise'"
                      ).fetchone()[0].total_seconds()
    assert 5 < wait <= 9  # the first backoff (backend/jobs/app.RETRY)
    run_jobs()  # not yet due: nothing runs
    assert len(scripted.requests) == 3
    db.execute("UPDATE procrastinate_jobs SET scheduled_at = now() WHERE task_name = 'compaction.summarise'")
    scripted.reply("second time lucky")
    run_jobs()
    assert summaries_of(client, org, tid) == [(1, 6, 1, "scripted", "second time lucky")]
    assert usage_rows(db) == [(org.key_id, "compaction", "scripted", 11, 7)] and jobs(db) == []


def _two_workers(database_url: str, settings: Any) -> None:
    async def both() -> None:
        await asyncio.gather(*(run_worker(database_url, settings, concurrency=1, wait=False, name=f"w{n}",
                                          install_signal_handlers=False, listen_notify=False) for n in (1, 2)))

    asyncio.run(both())


def _second_job(database_url: str, org: Any, tid: str, *, lock: str | None) -> None:
    """The same job queued again, past the queueing lock: what a stalled job's retry looks like to the queue."""
    args = service.job_args(org.org_id, tid, CompactionSettings(), org.key_id, "scripted")
    in_transaction(database_url, lambda db: job_queue.defer(db, task=service.TASK, queue=service.QUEUE, args=args,
                                                            lock=lock))


def test_trn_6_two_workers_on_one_threads_jobs_write_one_summary(client, org, database_url, db, scripted, settings):
    tid = new_thread(client, bearer(org.key))["id"]
    write_turns(database_url, org.org_id, tid, 1, 8)
    assert schedule_job(database_url, org.org_id, tid, org.key_id)
    assert schedule_job(database_url, org.org_id, tid, org.key_id) is False  # one waiting job per thread
    _second_job(database_url, org, tid, lock=service.thread_lock(org.org_id, tid))
    scripted.reply("only once", delay=1.0)
    _two_workers(database_url, settings)
    # The thread's lock made the second job wait for the first, which it then found done.
    assert summaries_of(client, org, tid) == [(1, 6, 1, "scripted", "only once")]
    assert len(scripted.requests) == 1 and len(usage_rows(db)) == 1 and jobs(db) == []


def test_trn_6_a_doubled_job_running_at_once_still_writes_one_summary(client, org, database_url, db, scripted,
                                                                      settings):
    tid = new_thread(client, bearer(org.key))["id"]
    write_turns(database_url, org.org_id, tid, 1, 8)
    for _ in range(2):  # no lock at all: both workers ask the model at the same time
        _second_job(database_url, org, tid, lock=None)
        scripted.reply("written twice, stored once", delay=3.0)
    _two_workers(database_url, settings)
    assert len(scripted.requests) == 2
    assert summaries_of(client, org, tid) == [(1, 6, 1, "scripted", "written twice, stored once")]
    assert len(usage_rows(db)) == 2  # both calls were made, so both are metered
    assert jobs(db) == []


def test_trn_6_storing_the_same_summary_again_writes_nothing(client, org, database_url, db, scripted, settings):
    tid = new_thread(client, bearer(org.key))["id"]
    write_turns(database_url, org.org_id, tid, 1, 8)

    async def in_system(db_session: Any) -> Any:
        return await contexts.for_system(db_session, settings, await orgs.get(db_session, org.org_id), ACTOR)

    async def find(db_session: Any) -> Any:
        return await summaries.next_summary(await in_system(db_session), tid, CompactionSettings(), "scripted")

    work = in_transaction(database_url, find)
    assert (work.unit.key, work.from_position, work.to_position) == ((1, 1, 3), 1, 6)
    scripted.reply("retry-safe")
    answer = asyncio.run(summaries.ask_model(work))

    async def store(db_session: Any) -> bool:
        return await summaries.store_summary(await in_system(db_session), work, answer, org.key_id)

    assert in_transaction(database_url, store) is True
    assert in_transaction(database_url, store) is False  # a retry after a crash between commit and done mark
    assert len(summaries_of(client, org, tid)) == 1
    assert in_transaction(database_url, find) is None  # nothing left to write


def test_trn_6_a_thread_deleted_before_or_while_the_job_runs_gets_no_summary(client, org, database_url, db,
                                                                            scripted, run_jobs, background_worker):
    key = bearer(org.key)
    gone = new_thread(client, key)["id"]
    write_turns(database_url, org.org_id, gone, 1, 8)
    schedule_job(database_url, org.org_id, gone, org.key_id)
    assert client.delete(f"/threads/{gone}", headers=key).status_code == 204
    run_jobs()
    assert scripted.requests == [] and jobs(db) == []

    tid = new_thread(client, key)["id"]
    write_turns(database_url, org.org_id, tid, 1, 8)
    scripted.reply("too late", delay=2.0)
    schedule_job(database_url, org.org_id, tid, org.key_id)
    background_worker()
    wait_for(lambda: len(scripted.requests) == 1)  # the model is writing
    assert client.delete(f"/threads/{tid}", headers=key).status_code == 204
    wait_for(lambda: jobs(db) == [])
    assert db.execute("SELECT count(*) FROM thread_summaries").fetchone()[0] == 0
    assert len(usage_rows(db)) == 1  # the call was made; its tokens stay metered


def test_trn_6_erasing_a_person_while_the_model_writes_keeps_her_words_out(client, org, database_url, db, scripted,
                                                                           background_worker):
    tid = new_thread(client, bearer(org.key))["id"]  # a shared thread: erasing her leaves it standing
    write_turns(database_url, org.org_id, tid, 1, 8)
    db.execute("UPDATE thread_items SET subject = 'anna' WHERE position = 3")
    scripted.reply("anna said things", delay=2.0)
    schedule_job(database_url, org.org_id, tid, org.key_id)
    background_worker()
    wait_for(lambda: len(scripted.requests) == 1)
    assert "question 2" in scripted.messages(0)[1]["content"]  # her words went to the model
    erased = client.delete("/subjects/anna", headers=org.admin)
    assert erased.status_code == 200, erased.text
    wait_for(lambda: jobs(db) == [])
    assert db.execute("SELECT count(*) FROM thread_summaries").fetchone()[0] == 0
    assert db.execute("SELECT count(*) FROM thread_items").fetchone()[0] == 15  # only hers went


def test_trn_6_erasure_removes_the_summaries_holding_her_words_in_others_threads(client, org, database_url, db):
    from tests.compaction.test_trn_6_history import summarise_directly

    tid = new_thread(client, bearer(org.key))["id"]
    write_turns(database_url, org.org_id, tid, 1, 14)
    summarise_directly(db, org.org_id, tid, [(1, 1, 3), (1, 4, 6), (1, 7, 9)])
    db.execute("UPDATE thread_items SET subject = 'bob' WHERE position IN (9, 10)")  # bob's turn 5
    assert client.delete("/subjects/bob", headers=org.admin).json()["counts"]["summaries"] == 2
    assert db.execute("SELECT from_turn, to_turn FROM thread_summaries").fetchall() == [(1, 3)]
