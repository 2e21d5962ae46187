"""EXT-8 and TRN-6 exactly once, PLT-13, EXT-16 (issue 13's crash test, issue 17 item 12): `coremem worker`
killed with SIGKILL at random moments while it reads extraction windows, writes compaction summaries, re-embeds
records and runs the maintenance pass, and started again; afterwards the work equals that of a run nobody
interrupted: nothing lost, nothing written twice, no job left behind. The dead worker's jobs come back through
stalled-job recovery (backend/jobs/worker.py)."""

from __future__ import annotations

import random
import time
from typing import Any

import pytest

from tests.jobs.crash import (
    FULL,
    Workers,
    build,
    counted,
    done,
    dump,
    expected_maintenance,
    expected_records,
    jobs_running,
    latest_worker,
    pending_jobs,
    respond,
    start,
    state,
    wait_done,
)

SEED = 20261203


def offer_model(org: Any, model_server: Any) -> None:
    response = org.client.post("/admin/models", headers=org.admin, json={
        "id": "scripted", "provider": "openai_compatible", "base_url": model_server.url})
    assert response.status_code == 201, response.text


def uninterrupted(client: Any, other_org: Any, scripted: Any, database_url: str, db: Any, workers: Workers,
                  **size: Any) -> dict[str, Any]:
    """The run nobody interrupts, in another organisation with an equal world."""
    offer_model(other_org, scripted)
    scripted.respond = respond
    scripted.respond_delay = 0.02
    reference = build(client, other_org, database_url, **size)
    start(reference, database_url)
    workers.start()
    wait_done(db, reference, workers, 300)
    workers.stop_all()
    return state(db, reference)


def crash_run(client: Any, org: Any, scripted: Any, database_url: str, db: Any, workers: Workers,
              expected: dict[str, Any] | None, *, kills: int, **size: Any) -> dict[str, Any]:
    """Kill the world's worker `kills` times at a random moment after it joined the queue, then let one finish;
    compare with `expected` (an uninterrupted run's state) when given."""
    # The same world, its worker killed `kills` times at a random moment after it joined the queue.
    scripted.respond = respond
    scripted.respond_delay = 0.02
    world = build(client, org, database_url, **size)
    start(world, database_url)
    rng = random.Random(SEED)
    mid_job = 0
    for _ in range(kills):
        before = latest_worker(db)
        proc = workers.start()
        deadline = time.monotonic() + 60
        while latest_worker(db) == before:
            assert proc.poll() is None and time.monotonic() < deadline, workers.log.read_text()[-3000:]
            time.sleep(0.02)
        time.sleep(rng.uniform(0.0, 1.0))
        mid_job += jobs_running(db, latest_worker(db)) > 0
        workers.kill(proc)
    workers.start()
    wait_done(db, world, workers, 300)
    workers.stop_all()
    found = state(db, world)
    counts = {**counted(found), "kills": kills, "kills_mid_job": mid_job, "stuck_jobs": len(pending_jobs(db))}
    print(f"crash run: {counts}" + (f"; uninterrupted: {counted(expected)}" if expected else ""))
    if expected is not None:
        assert found == expected, (dump(found), dump(expected))
    assert pending_jobs(db) == []
    assert found["records"] == expected_records(size["threads"], size["windows_per_thread"])
    assert found["windows"] == [("ready", counts["windows"], counts["records"], counts["confirmations"], 0, 0)]
    assert len(set(map(tuple, found["summaries"]))) == 1  # every summary thread alike, as built
    helper = [("maintenance", 2)] if size.get("maintenance") else []  # one judgement, one contradiction question
    assert found["usage"] == [("compaction", counts["summaries"]), ("extraction", counts["windows"]), *helper]
    if size.get("maintenance"):
        assert {k: found[k] for k in ("maintained", "proposals")} == expected_maintenance()
    return counts


def test_ext_8_a_worker_killed_twice_loses_and_duplicates_nothing(client, org, other_org, scripted,
                                                                        database_url, db, tmp_path):
    counts = crash_run(client, org, scripted, database_url, db, Workers(database_url, tmp_path), None, kills=2,
                       threads=10, windows_per_thread=2, summary_threads=2, turns=3, embed_records=10,
                       maintenance=True)
    assert counts["windows"] == 20 and counts["summaries"] == 4 and counts["vectors"] == 10
    assert counts["contested"] == 10 and counts["proposals"] == 6


@pytest.mark.slow
def test_ext_8_a_worker_killed_thirty_times_over_200_windows_loses_and_duplicates_nothing(
        client, org, other_org, scripted, database_url, db, tmp_path):
    size = {"threads": 100, "windows_per_thread": 2, "summary_threads": 20 if FULL else 10, "turns": 4,
            "embed_records": 100, "maintenance": True}
    workers = Workers(database_url, tmp_path)
    expected = uninterrupted(client, other_org, scripted, database_url, db, workers, **size)
    counts = crash_run(client, org, scripted, database_url, db, workers, expected, kills=30, **size)
    assert counts["windows"] == 200 and counts["kills_mid_job"] >= 10


@pytest.mark.slow  # two worker processes starting on two shared cores take most of a minute
def test_ext_8_two_workers_on_one_queue_read_every_window_exactly_once(client, org, scripted, database_url, db,
                                                                      tmp_path):
    scripted.respond = respond
    scripted.respond_delay = 0.02
    world = build(client, org, database_url, threads=20, windows_per_thread=2, summary_threads=0, turns=0,
                  embed_records=0)
    workers = Workers(database_url, tmp_path, concurrency=4)
    workers.start()
    workers.start()
    deadline = time.monotonic() + 120
    while db.execute("SELECT count(*) FROM procrastinate_workers").fetchone()[0] < 2:
        assert time.monotonic() < deadline, workers.log.read_text()[-3000:]
        time.sleep(0.05)
    start(world, database_url)
    seen: set[int] = set()
    deadline = time.monotonic() + 300
    while not done(db, world):
        seen |= {r[0] for r in db.execute("SELECT DISTINCT worker_id FROM procrastinate_jobs WHERE status = 'doing' "
                                          "AND worker_id IS NOT NULL").fetchall()}
        assert time.monotonic() < deadline, (state(db, world), workers.log.read_text()[-3000:])
        time.sleep(0.02)
    workers.stop_all()
    found = state(db, world)
    asked = [r for r in scripted.requests if r.get("response_format") is not None]
    print(f"two workers: windows={counted(found)['windows']}, model calls={len(asked)}, workers that ran jobs="
          f"{len(seen)}")
    assert len(seen) == 2  # both took jobs
    assert len(asked) == world.windows == 40  # each window read once: the queue never ran a thread's job twice
    assert found["records"] == expected_records(20, 2)
    assert found["usage"] == [("extraction", 40)]


def test_ext_16_a_worker_killed_while_it_asks_the_helper_model_leaves_the_pass_to_be_run_again(
        client, org, scripted, database_url, db, tmp_path):
    """The kill lands between the pass's first transaction and its last (the helper model is answering): the store
    stays due, the recovered job runs the pass again, and the end equals an uninterrupted pass."""
    world = build(client, org, database_url, threads=0, windows_per_thread=0, summary_threads=0, turns=0,
                  embed_records=0, maintenance=True)
    scripted.respond = respond
    scripted.respond_delay = 30.0  # the first worker is killed while it waits for this answer
    workers = Workers(database_url, tmp_path)
    start(world, database_url)
    proc = workers.start()
    deadline = time.monotonic() + 60
    while not scripted.requests:
        assert proc.poll() is None and time.monotonic() < deadline, workers.log.read_text()[-3000:]
        time.sleep(0.02)
    workers.kill(proc)
    last_run = db.execute("SELECT last_maintenance_run_at FROM store_settings WHERE org_id = %s AND index_id = %s",
                          (org.org_id, world.maintained_index)).fetchone()
    assert last_run == (None,)  # the first transaction committed (proposals by records), the run is not marked
    assert db.execute("SELECT count(*) FROM memory_proposals WHERE org_id = %s", (org.org_id,)).fetchone()[0] == 3
    scripted.respond_delay = 0.0
    workers.start()
    wait_done(db, world, workers, 120)
    workers.stop_all()
    found = state(db, world)
    assert {k: found[k] for k in ("maintained", "proposals")} == expected_maintenance()
    assert found["usage"] == [("maintenance", 2)]
    assert pending_jobs(db) == []
