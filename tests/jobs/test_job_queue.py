"""The job queue (procrastinate on PostgreSQL): jobs queued in the caller's transaction, `coremem worker`,
the worker `coremem run` starts beside the API, and recovery of a job whose worker died."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from backend.db import job_queue
from tests.compaction.util import in_transaction, new_thread, schedule_job, write_turns
from tests.helpers import bearer

ROOT = Path(__file__).resolve().parents[2]


def coremem(*args: str) -> list[str]:
    script = Path(sys.executable).parent / "coremem"
    return [*([str(script)] if script.exists() else [sys.executable, "-m", "backend.cli"]), *args]


def env_for(database_url: str, tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "CORE_DATABASE_URL": database_url, "CORE_DATA_DIR": str(tmp_path / "data"),
            "CORE_SECRET": "test-secret-" + "x" * 20}


def wait_for(condition: Any, seconds: float = 60, proc: subprocess.Popen[Any] | None = None, log: Path | None = None
             ) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if proc is not None:
            assert proc.poll() is None, log.read_text() if log else "the process ended"
        assert time.monotonic() < deadline, log.read_text() if log else "timed out"
        time.sleep(0.1)


def workers(db: Any) -> int:
    return int(db.execute("SELECT count(*) FROM procrastinate_workers").fetchone()[0])


def summaries(db: Any) -> list[tuple[Any, ...]]:
    return db.execute("SELECT from_position, to_position, text FROM thread_summaries").fetchall()


def test_a_job_is_queued_with_the_transaction_that_asks_for_it(database_url, db):
    async def rolled_back(session: Any) -> None:
        await job_queue.defer(session, task="compaction.summarise", queue="compaction", args={"n": 1})
        raise RuntimeError("the turn failed")

    with pytest.raises(RuntimeError):
        in_transaction(database_url, rolled_back)
    assert db.execute("SELECT count(*) FROM procrastinate_jobs").fetchone()[0] == 0

    async def twice(session: Any) -> tuple[Any, Any]:
        first = await job_queue.defer(session, task="t", queue="q", args={"n": 1}, queueing_lock="same")
        second = await job_queue.defer(session, task="t", queue="q", args={"n": 2}, queueing_lock="same")
        await session.execute(text("SELECT 1"))  # the refused insert left the transaction usable
        return first, second

    first, second = in_transaction(database_url, twice)
    assert isinstance(first, int) and second is None
    assert db.execute("SELECT task_name, queue_name, args, status FROM procrastinate_jobs").fetchall() == [
        ("t", "q", {"n": 1}, "todo")]


def test_coremem_worker_runs_jobs_and_leaves_the_queue_on_sigterm(client, org, database_url, db, scripted,
                                                                  tmp_path):
    tid = new_thread(client, bearer(org.key))["id"]
    write_turns(database_url, org.org_id, tid, 1, 8)
    scripted.reply("from the worker process")
    log = tmp_path / "worker.log"
    with log.open("w") as out:
        proc = subprocess.Popen(coremem("worker", "--concurrency", "2"), env=env_for(database_url, tmp_path),
                                stdout=out, stderr=subprocess.STDOUT, cwd=ROOT)
    try:
        wait_for(lambda: workers(db) == 1, proc=proc, log=log)
        schedule_job(database_url, org.org_id, tid, org.key_id)  # the worker hears of it at once (LISTEN/NOTIFY)
        wait_for(lambda: summaries(db) != [], proc=proc, log=log)
        assert summaries(db) == [(1, 6, "from the worker process")]
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=60)
    assert code == 0, log.read_text()
    assert workers(db) == 0  # a graceful stop takes the worker out of the queue's register


def test_coremem_worker_refuses_a_database_behind_the_release(postgres, tmp_path):
    postgres.execute('DROP DATABASE IF EXISTS "jobs_behind" WITH (FORCE)')
    postgres.execute('CREATE DATABASE "jobs_behind"')
    try:
        done = subprocess.run(coremem("worker"), env=env_for(postgres.url_for("jobs_behind"), tmp_path),
                              capture_output=True, text=True, timeout=120, cwd=ROOT)
        assert done.returncode == 1 and "coremem migrate" in done.stderr, done.stderr
    finally:
        postgres.execute('DROP DATABASE IF EXISTS "jobs_behind" WITH (FORCE)')


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT])
def test_coremem_run_starts_a_worker_beside_the_api_and_stops_it(database_url, db, tmp_path, stop):
    from tests.e2e.test_dashboard_browser import _free_port

    port = _free_port()
    log = tmp_path / "run.log"
    with log.open("w") as out:
        proc = subprocess.Popen(coremem("run", "--no-dashboard", "--port", str(port)),
                                env=env_for(database_url, tmp_path), stdout=out, stderr=subprocess.STDOUT, cwd=ROOT)

    def api_up() -> bool:
        try:
            return httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        wait_for(lambda: api_up() and workers(db) == 1, proc=proc, log=log)
        assert "Worker:" in log.read_text()
    finally:
        proc.send_signal(stop)
        proc.wait(timeout=60)
    assert workers(db) == 0, log.read_text()  # stopped with the API, not left running or killed mid-job
    assert not api_up()


def test_a_job_left_running_by_a_dead_worker_is_queued_again(client, org, database_url, db, scripted,
                                                            background_worker):
    tid = new_thread(client, bearer(org.key))["id"]
    write_turns(database_url, org.org_id, tid, 1, 8)
    schedule_job(database_url, org.org_id, tid, org.key_id)
    # A worker took the job and died: its heartbeat stopped five minutes ago.
    dead = db.execute("INSERT INTO procrastinate_workers (last_heartbeat) VALUES (now() - interval '5 minutes') "
                      "RETURNING id").fetchone()[0]
    db.execute("UPDATE procrastinate_jobs SET status = 'doing', worker_id = %s", (dead,))
    scripted.reply("recovered")
    background_worker()  # takes back stalled jobs when it starts (and every 15 s after)
    wait_for(lambda: summaries(db) != [])
    assert summaries(db) == [(1, 6, "recovered")]


def test_migration_0013_applies_the_pinned_procrastinate_release_schema():
    """A procrastinate upgrade must come with a migration of its own: the kept copy is the installed release's."""
    from importlib import metadata, resources

    shipped = (resources.files("procrastinate.sql") / "schema.sql").read_text(encoding="utf-8")
    kept = (ROOT / "backend" / "db" / "migrations" / "sql" / "procrastinate-3.10.0.sql").read_text(encoding="utf-8")
    assert metadata.version("procrastinate") == "3.10.0" and kept == shipped
