"""EXT-10 / MEM-21: two windows of one person that write the same two new texts, in opposite orders, at the same
moment: both commit (no deadlock aborts one), and each text is one record, written by one window and confirmed
by the other."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import psycopg

from backend.domains.audit.service import subject_hash
from backend.domains.extraction import planning, reading
from tests.extraction.test_ext_8_exactly_once import step
from tests.extraction.util import answer, conversation, new, new_store, records, run_now, switch_on
from tests.helpers import wait_for_lock_waiters

TEXTS = ("Anna likes tea.", "Anna lives in Delft.")


def test_ext_10_two_windows_writing_the_same_texts_in_opposite_orders_both_commit(
        client, org, db, scripted, database_url, settings):
    index_id = new_store(org)
    conversation(org, "anna", ("user", "I like tea and I live in Delft."))
    conversation(org, "anna", ("user", "Tea, and Delft, as I said."))
    switch_on(org, index_id)
    run_id = run_now(org, index_id)
    step(database_url, settings, org.org_id, lambda ctx: planning.plan_batch(ctx, index_id, run_id, ""))
    db.execute("DELETE FROM procrastinate_jobs")  # the windows are stored below, not by a worker
    threads = [str(r[0]) for r in db.execute("SELECT thread_id FROM extraction_windows ORDER BY thread_id")]
    assert len(threads) == 2
    ready = []
    for thread_id, texts in zip(threads, (TEXTS, TEXTS[::-1]), strict=True):
        scripted.reply(answer(*(new("fact", text) for text in texts)))
        work = step(database_url, settings, org.org_id,
                    lambda ctx, t=thread_id: reading.next_window(ctx, index_id, t))
        ready.append((work, asyncio.run(reading.ask_model(work))))

    # Anna's erasure lock, held here, lines both windows up: each waits for it before its first record, and both
    # go on together when it is let go.
    holder = psycopg.connect(db.info.dsn)
    holder.execute("SELECT pg_advisory_xact_lock(hashtextextended('subject:' || %s || ':' || %s, 0))",
                   (org.org_id, subject_hash(settings.secret, org.org_id, "anna")))
    outcomes: list[Any] = []

    def store(work: Any, answered: Any) -> None:
        try:
            outcomes.append(step(database_url, settings, org.org_id,
                                 lambda ctx: reading.store_window(ctx, work, answered)))
        except Exception as error:  # the outcome the assertion below names
            outcomes.append(error)

    runners = [threading.Thread(target=store, args=pair) for pair in ready]
    for runner in runners:
        runner.start()
    try:
        wait_for_lock_waiters(db, 2, "the two windows waiting on Anna's lock together")
    finally:
        holder.rollback()
        holder.close()
    for runner in runners:
        runner.join(60)
    assert outcomes == ["ready", "ready"], outcomes
    kept = {r["text"]: r["confirmations"] for r in records(org, index_id, "anna")}
    assert kept == {TEXTS[0]: 1, TEXTS[1]: 1}, kept
