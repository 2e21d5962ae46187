"""MEM-21 / EXT-10: the same words written twice at the same moment make one record, confirmed once."""

from __future__ import annotations

import json
import threading
from typing import Any

import psycopg

from backend.domains.audit.service import subject_hash
from tests.helpers import wait_for_lock_waiters


def test_mem_21_same_words_at_once_make_one_record(mem: Any, client: Any, db: Any, settings: Any) -> None:
    client.get("/memory", params={"index_id": mem.index_id}, headers=mem.anna())  # the app is warm
    # Holding Anna's erasure lock lines the calls up: each waits there, after its transaction began and before it
    # looks for the same words, and all go on together when it is let go.
    holder = psycopg.connect(db.info.dsn)
    holder.execute("SELECT pg_advisory_xact_lock(hashtextextended('subject:' || %s || ':' || %s, 0))",
                   (mem.org.org_id, subject_hash(settings.secret, mem.org.org_id, "anna")))
    answers: dict[str, list[Any]] = {"same": [], "other": []}

    def call(kind: str, text: str) -> None:
        answers[kind].append(client.post(mem.tool("write"), json={"arguments": {"type": "fact", "text": text}},
                                         headers=mem.anna()))

    threads = [threading.Thread(target=call, args=("same", text))
               for text in ("Allergic to peanuts.", "allergic to  PEANUTS")]
    threads.append(threading.Thread(target=call, args=("other", "Likes tea.")))
    for t in threads:
        t.start()
    try:
        wait_for_lock_waiters(db, 3, "the three calls waiting on Anna's lock together")
    finally:
        holder.rollback()
        holder.close()
    for t in threads:
        t.join(30)
    for response in [*answers["same"], *answers["other"]]:
        assert response.status_code == 200, response.text
    same = sorted((json.loads(r.json()["output"]) for r in answers["same"]), key=lambda a: a["action"])
    assert [a["action"] for a in same] == ["confirmed", "created"]
    assert same[0]["memory_id"] == same[1]["memory_id"]
    assert json.loads(answers["other"][0].json()["output"])["action"] == "created"  # other words are not held back
    rows = dict(db.execute("SELECT text, confirmations FROM memory_records WHERE index_id = %s AND subject = 'anna'",
                           (mem.index_id,)).fetchall())
    assert len(rows) == 2 and rows.pop("Likes tea.") == 0, rows
    assert list(rows.values()) == [1], rows  # one record of the allergy, confirmed once
