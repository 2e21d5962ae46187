"""MEM-19: a turn that began while a person's erasure was committing. The erasure had recorded itself but not
committed when the turn read its thread (whose labels still named her); the turn then waited for her lock, and
once the erasure committed it found her erased before its own start by the erasure's recorded time. The time an
erasure records is now one no transaction that could have read her data before the commit precedes."""

from __future__ import annotations

import threading
from typing import Any

import psycopg

from tests.helpers import Org, wait_for_lock_waiters
from tests.turns.conftest import anna


def test_mem_19_a_turn_accepted_while_an_erasure_commits_does_not_keep_her_id(client: Any, org: Org, db: Any,
                                                                               scripted: Any) -> None:
    thread = client.post("/threads", headers=anna(org), json={"labels": {"participants": ["anna", "bob"]}})
    assert thread.status_code == 201, thread.text
    # The organisation's audit trail, held here, stops the erasure after it recorded itself, before it commits.
    holder = psycopg.connect(db.info.dsn)
    holder.execute("SELECT pg_advisory_xact_lock(hashtextextended('audit:' || %s, 0))", (org.org_id,))
    answers: dict[str, Any] = {}

    def call(name: str, send: Any) -> None:
        answers[name] = send()

    eraser = threading.Thread(target=call, args=("erasure", lambda: client.delete("/subjects/bob",
                                                                                  headers=org.admin)))
    turn = threading.Thread(target=call, args=("turn", lambda: client.post("/responses", headers=anna(org), json={
        "model": "scripted", "input": "Hello", "thread_id": thread.json()["id"]})))
    scripted.reply("Hello Anna.")
    try:
        eraser.start()
        wait_for_lock_waiters(db, 1, "the erasure waiting to append its audit event")
        turn.start()  # begins after the erasure recorded itself; reads the thread as it was before
        wait_for_lock_waiters(db, 2, "the turn waiting for Bob's lock")
    finally:
        holder.rollback()
        holder.close()
    eraser.join(30)
    turn.join(30)
    assert answers["erasure"].status_code == 200, answers["erasure"].text
    assert answers["turn"].status_code == 409 and answers["turn"].json()["code"] == "subject_erased", \
        answers["turn"].text
    assert db.execute("SELECT count(*) FROM responses WHERE labels::text LIKE '%%\"bob\"%%'").fetchone()[0] == 0
    assert db.execute("SELECT count(*) FROM threads WHERE labels::text LIKE '%%\"bob\"%%'").fetchone()[0] == 0
