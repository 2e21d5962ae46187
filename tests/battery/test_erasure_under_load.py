"""Issue 17 item 8, MEM-19: erasure under load.

Twenty people are erased while extraction jobs read their threads, summary jobs summarise their turns, turns
(POST /responses against the scripted model) continue their threads and appends add to them, all over real HTTP
against the API under uvicorn, with a job-queue worker beside it. Every text of theirs carries a canary; the
scripted model repeats every canary it is sent (into extracted records, summaries and answers). A person's load
stops when her erasure is sent (a request started after it may write for her id again, by design), so whatever
was in flight then must either have been erased or be refused. Pass: afterwards no text, varchar or JSON column
of any table (the job queue's and the audit trail's included) holds a canary or an erased id, once every job
ran; the five other people's counts are unchanged.
"""

from __future__ import annotations

import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from backend.domains.compaction import CompactionSettings
from backend.jobs.worker import BackgroundWorker
from tests.battery.conftest import scaled
from tests.compaction.util import schedule_job, write_turn
from tests.extraction.util import answer, new, new_store, run_now, switch_on
from tests.helpers import bearer
from tests.threads.util import msg, new_thread

ERASED = [f"gone-{n:02d}" for n in range(20)]
KEPT = [f"kept-{n}" for n in range(5)]
CANARY = re.compile(r"CANARY\w+")
RUNNABLE = ("SELECT count(*) FROM procrastinate_jobs WHERE status = 'doing' OR (status = 'todo' AND "
            "(scheduled_at IS NULL OR scheduled_at <= now()))")


def canary(person: str, n: int | str) -> str:
    return f"CANARY{person.replace('-', '')}x{n}"


def respond(request: dict[str, Any]) -> str:
    """Every canary the model is sent comes back: as liked things (extraction) or in the text (summaries, turns)."""
    sent = " ".join(str(m.get("content")) for m in request["messages"])
    found = sorted(set(CANARY.findall(sent)))
    if request.get("response_format") is not None:
        conversation = sent.split("\nConversation:\n", 1)[-1]
        return answer(*(new("preference", f"Likes {c}.") for c in sorted(set(CANARY.findall(conversation)))))
    return "Noted: " + " ".join(found) if found else "Noted."


def person_counts(db: Any, people: list[str]) -> list[tuple[Any, ...]]:
    return db.execute(
        "SELECT s, (SELECT count(*) FROM memory_records WHERE subject = s), (SELECT count(*) FROM threads WHERE "
        "subject = s), (SELECT count(*) FROM thread_items WHERE subject = s), (SELECT count(*) FROM thread_summaries "
        "ts JOIN threads t ON t.org_id = ts.org_id AND t.id = ts.thread_id WHERE t.subject = s) "
        "FROM unnest(%s::text[]) s ORDER BY s", (people,)).fetchall()


def text_columns(db: Any) -> list[tuple[str, str, str]]:
    return db.execute(
        "SELECT c.table_schema, c.table_name, c.column_name FROM information_schema.columns c JOIN "
        "information_schema.tables t ON t.table_schema = c.table_schema AND t.table_name = c.table_name "
        "WHERE c.table_schema NOT IN ('pg_catalog', 'information_schema') AND t.table_type = 'BASE TABLE' AND "
        "(c.data_type IN ('text', 'character varying', 'character', 'json', 'jsonb') OR c.data_type = 'ARRAY') "
        "ORDER BY 1, 2, 3").fetchall()


def leaks(db: Any, needles: list[str]) -> list[tuple[str, str, int]]:
    """(table, column, rows) of every column holding one of `needles` (case-insensitive, anywhere in the value)."""
    found = []
    pattern = "(" + "|".join(re.escape(n) for n in needles) + ")"
    for schema, table, column in text_columns(db):
        rows = db.execute(f'SELECT count(*) FROM "{schema}"."{table}" WHERE "{column}"::text ~* %s',
                          (pattern,)).fetchone()[0]
        if rows:
            found.append((table, column, int(rows)))
    return found


def wait_drained(db: Any, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while db.execute(RUNNABLE).fetchone()[0]:
        assert time.monotonic() < deadline, db.execute("SELECT task_name, status FROM procrastinate_jobs").fetchall()
        time.sleep(0.1)


class Load:
    """Turns and appends for the erased people until each one's erasure is sent; what came back, by phase."""

    def __init__(self, base: str, key: str, threads: dict[str, str]) -> None:
        self.base, self.key, self.threads = base, key, threads
        self.stopped: set[str] = set()
        self.lock = threading.Lock()
        self.before: dict[int, int] = {}  # statuses of requests answered before their person's erasure was sent
        self.during: dict[int, int] = {}  # … of requests still running when it was sent
        self.sent = 0

    def run(self, person: str, turns: bool) -> None:
        http = httpx.Client(base_url=self.base, timeout=60, headers=bearer(self.key, person))
        n = 0
        while person not in self.stopped:
            n += 1
            text = f"I like {canary(person, ('t' if turns else 'a') + str(n))}."
            if turns:
                response = http.post("/responses", json={"model": "scripted", "input": text,
                                                         "thread_id": self.threads[person]})
            else:
                response = http.post(f"/threads/{self.threads[person]}/items", json={"items": [msg("user", text)]})
            phase = self.during if person in self.stopped else self.before
            with self.lock:
                self.sent += 1
                phase[response.status_code] = phase.get(response.status_code, 0) + 1


def test_mem_19_erasure_under_load_leaves_no_canary_and_nothing_comes_back(client, org, scripted, live_api,
                                                                          database_url, settings, db, report):
    scripted.respond = respond
    scripted.respond_delay = 0.05
    windows_each = scaled(3, 10)
    worker_settings = settings.with_overrides(extraction_window_messages=2)
    index_id = new_store(org)
    for person in KEPT:
        new_thread(client, bearer(org.key, person), items=[msg("user", f"I like tea, says {person}.")])
        client.post("/memory", headers=bearer(org.key, person), json={"index_id": index_id, "type": "fact",
                                                                      "text": f"{person} drinks tea."})
    switch_on(org, index_id)
    kept = person_counts(db, KEPT)
    # Each erased person: a record, a thread of several windows, and a thread of turns with a summary job queued.
    threads: dict[str, str] = {}
    for person in ERASED:
        headers = bearer(org.key, person)
        client.post("/memory", headers=headers, json={"index_id": index_id, "type": "fact",
                                                      "text": f"Remember {canary(person, 'record')}."})
        items = []
        for w in range(windows_each):
            items += [msg("user", f"I like {canary(person, w)}."), msg("assistant", "Noted.")]
        threads[person] = new_thread(client, headers, items=items)["id"]
        summary_thread = new_thread(client, headers)["id"]
        for n in range(3):
            write_turn(database_url, org.org_id, summary_thread, [msg("user", f"I like {canary(person, f's{n}')}."),
                                                                  msg("assistant", "Noted.")], subject=person)
        schedule_job(database_url, org.org_id, summary_thread, org.key_id,
                     CompactionSettings(keep_recent_turns=1, segment_turns=1))
    run_now(org, index_id)
    worker = BackgroundWorker(database_url, worker_settings, concurrency=4).start()
    load = Load(live_api, org.key, threads)
    erased: list[int] = []
    try:
        with ThreadPoolExecutor(max_workers=8) as pool:
            futures = [pool.submit(load.run, person, n % 2 == 0) for n, person in enumerate(ERASED)]
            time.sleep(2.0)  # jobs, turns and appends under way
            admin = httpx.Client(base_url=live_api, timeout=60, headers=org.admin)
            for person in ERASED:
                load.stopped.add(person)
                erased.append(admin.delete(f"/subjects/{person}").status_code)
            for future in futures:
                future.result()
        run_now(org, index_id)  # a later run finds nothing of theirs to read
        wait_drained(db, 180)
    finally:
        worker.stop()
    found = leaks(db, [CANARY.pattern.replace("\\w+", ""), *ERASED])
    columns = len(text_columns(db))
    report(erased=len(erased), requests=load.sent, before=load.before, during=load.during,
           columns_searched=columns, leaks=found)
    assert erased == [200] * len(ERASED)
    assert found == []
    assert person_counts(db, KEPT) == kept
    assert set(load.during) <= {201, 404, 409}, load.during  # in flight at the erasure: done before it, or refused
