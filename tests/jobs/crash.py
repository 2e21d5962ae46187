"""What the crash tests of the job queue share: a world of extraction windows, compaction summaries, records
to re-embed and a store for the maintenance pass in one organisation, `coremem worker` subprocesses, and what the
run left (to compare two runs).

The scripted model answers each request from what it was sent (`respond`), so two runs over equal worlds get
equal answers however their jobs interleave: an extraction window's answer is read off its own lines, a summary's
text is a hash of its transcript, and the helper model's judgements are read off the lines it is shown.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from backend.db import job_queue
from backend.domains.compaction import CompactionSettings
from backend.domains.extraction.queue import REEMBED_TASK
from backend.jobs.maintenance import TASK as MAINTENANCE_TASK
from tests.compaction.util import schedule_job, write_turns
from tests.extraction.maintenance_util import improvements_on, store_settings, write
from tests.extraction.util import answer, new, new_store, run_now, switch_on
from tests.helpers import bearer, in_transaction
from tests.jobs.test_job_queue import coremem, env_for
from tests.threads.util import msg, new_thread

PEOPLE = 10
FULL = os.environ.get("CORE_BATTERY_FULL", "") not in ("", "0", "false")  # the battery's full counts
STALLED_SECONDS = 3  # the workers' CORE_JOBS_STALLED_SECONDS: a killed worker's jobs come back after this
SUMMARY_SETTINGS = CompactionSettings(keep_recent_turns=1, segment_turns=1)
LIKES = re.compile(r"I like ([\w-]+)\.")
# The maintained store: people who park in two garages (a contradiction the helper model names), facts two
# people hold (proposed by their records), and one person's facts the helper model judges general knowledge.
PARKS = ("Parks the car in garage north.", "Parks the car in garage south.")
PARKERS = 5
SHARED = ("The canteen serves soup on Fridays.", "Visitors sign in at the front desk.", "The library opens at nine.")
GENERAL = ("The office wifi network is called blue.", "The bike shed closes at midnight.",
           "The coffee machine is cleaned on Mondays.")
NUMBERED = re.compile(r"^(\d+)\. (.*)$")


def respond(request: dict[str, Any]) -> str:
    """The scripted model's answer, a function of the request alone."""
    sent = request["messages"][-1]["content"]
    asked_for = (request.get("response_format") or {}).get("json_schema", {}).get("name")
    if asked_for == "maintenance":  # the helper model: contradictions, or facts of general knowledge
        lines = [(int(m[1]), m[2]) for m in map(NUMBERED.match, sent.splitlines()) if m]
        if request["messages"][0]["content"].startswith("Each numbered line holds two statements"):
            return json.dumps({"contradictions": [n for n, line in lines if line == " | ".join(PARKS)
                                                  or line == " | ".join(reversed(PARKS))]})
        return json.dumps({"general": [n for n, line in lines if line in GENERAL]})
    if request.get("response_format") is not None:  # an extraction window: what its person says she likes
        conversation = sent.split("\nConversation:\n", 1)[1]
        liked = [m for line in conversation.splitlines() if line.startswith("user: ") for m in LIKES.findall(line)]
        return answer(*(new("preference", f"Likes {thing}.") for thing in liked))
    return "Summary " + hashlib.sha1(sent.encode()).hexdigest()[:12]


@dataclass
class World:
    org: Any
    index_id: str
    windows: int
    summary_threads: list[str] = field(default_factory=list)
    summaries: int = 0  # summaries the world's compaction jobs write in all
    embed_records: int = 0
    maintained_index: str | None = None  # the store the maintenance pass works on


def build(client: Any, org: Any, database_url: str, *, threads: int, windows_per_thread: int, summary_threads: int,
          turns: int, embed_records: int, maintenance: bool = False) -> World:
    """Threads of PEOPLE people cut into windows of two messages each (CORE_EXTRACTION_WINDOW_MESSAGES=2 in the
    workers), each window's person liking a new thing and, from the second on, the thread's first thing again (a
    confirmation); threads without a person with `turns` turns and their summary job; records without a vector;
    with `maintenance`, a store for the maintenance pass (`maintained`)."""
    index_id = new_store(org)
    for t in range(threads):
        person = f"p{t % PEOPLE}"
        items = []
        for w in range(windows_per_thread):
            said = f"I like thing-{t}-{w}." + (f" I like thing-{t}-0." if w else "")
            items += [msg("user", said), msg("assistant", "Noted.")]
        new_thread(client, bearer(org.key, person), items=items)
    switch_on(org, index_id)
    world = World(org, index_id, threads * windows_per_thread)
    for _ in range(summary_threads):
        tid = new_thread(client, bearer(org.key))["id"]
        write_turns(database_url, org.org_id, tid, 1, turns)
        schedule_job(database_url, org.org_id, tid, org.key_id, SUMMARY_SETTINGS)
        world.summary_threads.append(tid)
        world.summaries += turns - SUMMARY_SETTINGS.keep_recent_turns
    if embed_records:
        embedded = client.post("/indexes", headers=org.full, json={"name": "embedded", "embedding": {
            "provider": "hashing", "model": "words", "dimensions": 64}}).json()["id"]
        for n in range(embed_records):
            response = client.post("/memory", headers=org.full, json={"index_id": embedded, "type": "fact",
                                                                       "text": f"Fact number {n}."})
            assert response.status_code == 201, response.text
        world.embed_records = embed_records
    if maintenance:
        world.maintained_index = maintained(org)
    return world


def maintained(org: Any) -> str:
    """The store the maintenance pass works on, with the organisation's improvements and helper model on; the
    world's other stores are left out of maintenance, so what the pass does cannot depend on how far the other
    jobs got."""
    improvements_on(org)
    stores = org.client.get("/indexes", headers=org.full).json()["data"]
    for store in stores:
        store_settings(org, store["id"], maintenance={"enabled": False})
    index_id = new_store(org, "maintained")
    store_settings(org, index_id, promotion={"enabled": True, "labels": {"audience": "everyone"}})
    for n in range(PARKERS):
        for text in PARKS:  # preferences: contested, never proposed (only facts are)
            write(org, index_id, f"p{n}", text, "preference")
    for n, text in enumerate(SHARED):
        for person in (f"p{n}", f"p{n + 1}"):
            write(org, index_id, person, text)
    for n, text in enumerate(GENERAL):
        write(org, index_id, f"p{PEOPLE - 1 - n}", text)
    return index_id


def start(world: World, database_url: str) -> None:
    """Queue the world's work: the extraction run (its plan job queues the read jobs) and a re-embedding job."""
    run_now(world.org, world.index_id)
    if world.embed_records:
        in_transaction(database_url, lambda s: s.execute(_NO_VECTORS, {"org": world.org.org_id}))
        in_transaction(database_url, lambda s: job_queue.defer(s, task=REEMBED_TASK, queue="maintenance",
                                                               args={"timestamp": 0}))
    if world.maintained_index:  # as the periodic schedule queues it, with its lock: one pass at a time
        in_transaction(database_url, lambda s: job_queue.defer(s, task=MAINTENANCE_TASK, queue="maintenance",
                                                               args={"timestamp": 0}, lock=MAINTENANCE_TASK))


class Workers:
    """`coremem worker` subprocesses against the test database, their output in one log file."""

    def __init__(self, database_url: str, tmp_path: Path, concurrency: int = 4) -> None:
        self.env = {**env_for(database_url, tmp_path), "CORE_EXTRACTION_WINDOW_MESSAGES": "2",
                    "CORE_JOBS_STALLED_SECONDS": str(STALLED_SECONDS), "CORE_LOG_LEVEL": "WARNING"}
        self.log = tmp_path / "workers.log"
        self.concurrency = concurrency
        self.running: list[subprocess.Popen[Any]] = []

    def start(self) -> subprocess.Popen[Any]:
        with self.log.open("a") as out:
            proc = subprocess.Popen(coremem("worker", "--concurrency", str(self.concurrency)), env=self.env,
                                    stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        self.running.append(proc)
        return proc

    def kill(self, proc: subprocess.Popen[Any]) -> None:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        self.running.remove(proc)

    def stop_all(self) -> None:
        for proc in list(self.running):
            proc.send_signal(signal.SIGTERM)
        for proc in self.running:
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.running.clear()


def latest_worker(db: Any) -> int:
    return int(db.execute("SELECT coalesce(max(id), 0) FROM procrastinate_workers").fetchone()[0])


def jobs_running(db: Any, worker_id: int) -> int:
    return int(db.execute("SELECT count(*) FROM procrastinate_jobs WHERE status = 'doing' AND worker_id = %s",
                          (worker_id,)).fetchone()[0])


def pending_jobs(db: Any) -> list[tuple[Any, ...]]:
    """Jobs not finished: running, failed, or waiting to run now (a periodic job waiting for its minute is not)."""
    return db.execute("SELECT id, task_name, status, attempts FROM procrastinate_jobs WHERE status IN "
                      "('doing', 'failed') OR (status = 'todo' AND (scheduled_at IS NULL OR scheduled_at <= now()))"
                      " ORDER BY id").fetchall()


def done(db: Any, world: World) -> bool:
    org = world.org.org_id
    ready = db.execute("SELECT count(*) FILTER (WHERE state = 'ready'), count(*) FROM extraction_windows "
                       "WHERE org_id = %s", (org,)).fetchone()
    summaries = db.execute("SELECT count(*) FROM thread_summaries WHERE org_id = %s", (org,)).fetchone()[0]
    missing = db.execute(_MISSING, (org,)).fetchone()[0]
    maintained = world.maintained_index is None or db.execute(
        "SELECT last_maintenance_run_at IS NOT NULL FROM store_settings WHERE org_id = %s AND index_id = %s",
        (org, world.maintained_index)).fetchone() == (True,)
    return (ready == (world.windows, world.windows) and summaries >= world.summaries and missing == 0
            and maintained and not pending_jobs(db))


def wait_done(db: Any, world: World, workers: Workers, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not done(db, world):
        for proc in workers.running:
            assert proc.poll() is None, workers.log.read_text()[-5000:]
        assert time.monotonic() < deadline, (state(db, world), pending_jobs(db), workers.log.read_text()[-5000:])
        time.sleep(0.2)


def state(db: Any, world: World) -> dict[str, Any]:
    """What the world's jobs left, without ids: records with confirmations and history length, windows,
    summaries per thread (in the world's thread order), usage rows per job, vectors."""
    org = world.org.org_id
    records = db.execute(
        "SELECT r.subject, r.type, r.text, r.confirmations, r.source, (SELECT count(*) FROM memory_versions v "
        "WHERE v.org_id = r.org_id AND v.record_id = r.id) FROM memory_records r "
        "WHERE r.org_id = %s AND r.index_id = %s ORDER BY 1, 2, 3, 4", (org, world.index_id)).fetchall()
    windows = db.execute("SELECT state, count(*), sum(written), sum(confirmed), sum(replaced), sum(dropped) "
                         "FROM extraction_windows WHERE org_id = %s GROUP BY state ORDER BY state", (org,)).fetchall()
    summaries = [db.execute("SELECT from_position, to_position, level, text FROM thread_summaries WHERE "
                            "org_id = %s AND thread_id = %s ORDER BY from_position, level", (org, tid)).fetchall()
                 for tid in world.summary_threads]
    usage = db.execute("SELECT job, count(*) FROM usage_events WHERE org_id = %s GROUP BY job ORDER BY job",
                       (org,)).fetchall()
    vectors = db.execute("SELECT count(*) FILTER (WHERE embedding IS NOT NULL), count(*) FROM memory_records "
                         "WHERE org_id = %s AND index_id <> %s", (org, world.index_id)).fetchone()
    found = {"records": records, "windows": windows, "summaries": summaries, "usage": usage, "vectors": vectors}
    if world.maintained_index:
        found["maintained"] = db.execute(
            "SELECT r.subject, r.text, r.contested, p.text FROM memory_records r LEFT JOIN memory_records p "
            "ON p.org_id = r.org_id AND p.id = r.contested_with WHERE r.org_id = %s AND r.index_id = %s "
            "ORDER BY 1, 2", (org, world.maintained_index)).fetchall()
        found["proposals"] = db.execute(
            "SELECT p.type, p.text, p.basis, p.status, array_agg(e.subject ORDER BY e.subject) FROM memory_proposals p "
            "JOIN memory_proposal_evidence e ON e.org_id = p.org_id AND e.proposal_id = p.id WHERE p.org_id = %s "
            "GROUP BY p.org_id, p.id ORDER BY 2", (org,)).fetchall()
    return found


def counted(found: dict[str, Any]) -> dict[str, int]:
    return {"records": len(found["records"]), "confirmations": sum(r[3] for r in found["records"]),
            "windows": sum(w[1] for w in found["windows"]), "summaries": sum(len(s) for s in found["summaries"]),
            "vectors": found["vectors"][0], "contested": sum(bool(r[2]) for r in found.get("maintained", ())),
            "proposals": len(found.get("proposals", ()))}


def dump(found: dict[str, Any]) -> str:
    return json.dumps(found, default=str)[:3000]


_NO_VECTORS = __import__("sqlalchemy").text(
    "UPDATE memory_records SET embedding = NULL, embedding_model = NULL WHERE org_id = :org AND index_id IN "
    "(SELECT id FROM indexes WHERE org_id = :org AND name = 'embedded')")
_MISSING = ("SELECT count(*) FROM memory_records r JOIN indexes i ON i.org_id = r.org_id AND i.id = r.index_id "
            "WHERE r.org_id = %s AND i.name = 'embedded' AND r.embedding IS NULL")


def expected_maintenance() -> dict[str, Any]:
    """What one uninterrupted maintenance pass leaves in the maintained store."""
    records = sorted([(f"p{n}", text, True, PARKS[1 - i]) for n in range(PARKERS) for i, text in enumerate(PARKS)]
                     + [(f"p{n + k}", text, False, None) for n, text in enumerate(SHARED) for k in (0, 1)]
                     + [(f"p{PEOPLE - 1 - n}", text, False, None) for n, text in enumerate(GENERAL)])
    proposals = sorted([("fact", text, "same_text", "open", [f"p{n}", f"p{n + 1}"]) for n, text in enumerate(SHARED)]
                       + [("fact", text, "general", "open", [f"p{PEOPLE - 1 - n}"]) for n, text in enumerate(GENERAL)],
                       key=lambda p: p[1])
    return {"maintained": records, "proposals": proposals}


def expected_records(threads: int, windows_per_thread: int) -> list[tuple[Any, ...]]:
    """What an uninterrupted run writes (`respond`'s answers to `build`'s windows): per thread, its first thing
    confirmed by every later window, and one record per later thing."""
    rows = []
    for t in range(threads):
        person = f"p{t % PEOPLE}"
        rows.append((person, "preference", f"Likes thing-{t}-0.", windows_per_thread - 1, "extraction",
                     windows_per_thread))
        rows += [(person, "preference", f"Likes thing-{t}-{w}.", 0, "extraction", 1)
                 for w in range(1, windows_per_thread)]
    return sorted(rows)
