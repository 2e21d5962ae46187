"""EXT-8 exactly once, EXT-11 pseudonymisation and MEM-19: a window's records and its `ready` mark commit
together, so a failure at any step, or a job run again after its work committed, loses and duplicates nothing;
a person erased while her window is read leaves nothing of hers."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from backend import contexts
from backend.domains.extraction import planning, queue, reading
from backend.domains.orgs import repository as orgs
from backend.jobs.extraction import ACTOR
from tests.extraction.util import answer, conversation, new, new_store, records, run_now, switch_on, windows
from tests.helpers import bearer, in_transaction
from tests.threads.util import append, msg


class Crash(Exception):
    """Stands for a worker dying at that point: the transaction never commits."""


def step(database_url: str, settings: Any, org_id: str, work: Any, *, crash: bool = False) -> Any:
    """One transaction of the read job with its system context; with `crash`, rolled back at its end."""

    async def go(db: Any) -> Any:
        ctx = await contexts.for_system(db, settings, await orgs.get(db, org_id), ACTOR)
        result = await work(ctx)
        if crash:
            raise Crash
        return result

    return in_transaction(database_url, go)


def planned(org: Any, index_id: str, db: Any, database_url: str, settings: Any) -> str:
    """Plan a run and leave its read job unrun (as if its worker died before taking it); the thread's id."""
    run_id = run_now(org, index_id)
    step(database_url, settings, org.org_id, lambda ctx: planning.plan_batch(ctx, index_id, run_id, ""))
    db.execute("DELETE FROM procrastinate_jobs")
    return str(db.execute("SELECT thread_id FROM extraction_windows").fetchone()[0])


def test_ext_8_a_crash_after_the_model_answered_and_a_rerun_after_commit_write_each_record_once(
        client, org, db, scripted, run_jobs, database_url, settings):
    index_id = new_store(org)
    conversation(org, "anna", ("user", "I like tea and I moved to Delft."))
    switch_on(org, index_id)
    thread_id = planned(org, index_id, db, database_url, settings)
    reply = answer(new("preference", "Anna likes tea."), new("fact", "Anna lives in Delft."))
    scripted.reply(reply).reply(reply)
    work = step(database_url, settings, org.org_id, lambda ctx: reading.next_window(ctx, index_id, thread_id))
    answered = asyncio.run(reading.ask_model(work))
    # The worker dies after the model answered, before the records committed: nothing was written.
    with pytest.raises(Crash):
        step(database_url, settings, org.org_id, lambda ctx: reading.store_window(ctx, work, answered), crash=True)
    assert records(org, index_id, "anna") == [] and windows(db, index_id)[0][3] == "queued"
    # The retry reads the window again and commits it; the one after that finds it done.
    work = step(database_url, settings, org.org_id, lambda ctx: reading.next_window(ctx, index_id, thread_id))
    answered = asyncio.run(reading.ask_model(work))
    assert step(database_url, settings, org.org_id, lambda ctx: reading.store_window(ctx, work, answered)) == "ready"
    # Killed between the commit and the queue's acknowledgement: the job runs again and finds nothing to do.
    assert step(database_url, settings, org.org_id, lambda ctx: reading.store_window(ctx, work, answered)) == "done"
    in_transaction(database_url, lambda s: queue.queue_thread(s, org.org_id, index_id, thread_id))
    run_jobs()
    assert len(scripted.requests) == 2
    assert sorted(r["text"] for r in records(org, index_id, "anna")) == ["Anna likes tea.", "Anna lives in Delft."]
    assert db.execute("SELECT count(*) FROM memory_versions").fetchone()[0] == 2
    # The usage row commits with the window: a call whose worker died before that commit is not metered.
    assert db.execute("SELECT count(*) FROM usage_events").fetchone()[0] == 1


def test_ext_8_failures_before_and_during_the_model_call_leave_the_window_queued(client, org, db, scripted,
                                                                                 run_jobs):
    index_id = new_store(org)
    conversation(org, "anna", ("user", "I like tea."))
    switch_on(org, index_id)
    scripted.fail(503)  # the server fails while answering
    run_now(org, index_id)
    run_jobs()
    assert windows(db, index_id)[0][3] == "queued" and records(org, index_id, "anna") == []
    db.execute("UPDATE procrastinate_jobs SET scheduled_at = now() WHERE task_name = 'extraction.read_thread'")
    scripted.malformed()  # an answer cut off mid-way: not the asked shape
    run_jobs()
    assert windows(db, index_id)[0][3:5] == ("failed", "invalid_model_output")
    assert records(org, index_id, "anna") == []


def test_mem_19_a_person_erased_while_her_window_is_read_leaves_nothing_of_hers(client, org, db, scripted,
                                                                               run_jobs):
    index_id = new_store(org)
    conversation(org, "anna", ("user", "I like tea."))
    shared = conversation(org, None, ("user", "Bert likes coffee."))
    db.execute("UPDATE thread_items SET subject = 'bert' WHERE thread_id = %s", (shared,))  # his words
    switch_on(org, index_id, threads="all")
    erased: list[int] = []

    def erase(person: str) -> Any:
        return lambda: erased.append(client.delete(f"/subjects/{person}", headers=org.admin).status_code)

    scripted.reply(answer(new("preference", "Anna likes tea.")), before=erase("anna"))
    scripted.reply(answer(new("preference", "Bert likes coffee.")), before=erase("bert"))
    run_now(org, index_id)
    run_jobs(concurrency=1)
    assert erased == [200, 200]
    assert db.execute("SELECT subject, text FROM memory_records").fetchall() == []
    assert [w[3:5] for w in windows(db, index_id)] == [("failed", "subject_erased")]  # anna's thread is gone


def test_ext_11_placeholders_are_sent_and_real_values_stored(client, org, db, scripted, run_jobs, settings):
    index_id = new_store(org)
    tid = conversation(org, "anna", ("user", "Write to me at anna@example.com please."))
    db.execute("UPDATE threads SET pseudonymized = true WHERE id = %s", (tid,))
    switch_on(org, index_id)
    scripted.reply(answer(new("fact", "Anna's e-mail address is <EMAIL_1>.")))
    run_now(org, index_id)
    run_jobs()
    sent = scripted.last["messages"][-1]["content"]
    assert "<EMAIL_1>" in sent and "anna@example.com" not in sent
    assert [r["text"] for r in records(org, index_id, "anna")] == ["Anna's e-mail address is anna@example.com."]
    # When the personal data cannot be hidden, the window is not read.
    append(client, bearer(org.key, "anna"), tid, msg("user", "Call me on +31 6 12345678."))
    run_now(org, index_id)
    run_jobs(settings_used=settings.with_overrides(pii_detector="tests.pii.plugins:Broken"))
    assert len(scripted.requests) == 1
    assert windows(db, index_id)[1][3:5] == ("failed", "pii_unavailable")
