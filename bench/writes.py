"""Write benchmark (issue 16 goal 5): `POST /memory/batch` against raw COPY of the same rows, and a single
`POST /memory` against a hand-written INSERT of the record, its history version and its audit event, committed.

An organisation of its own (`BenchWrites`) with one store that does not embed, in the embedded server of the
other benchmarks (.coremem/bench-pg); the API runs under uvicorn in this process and is called over loopback HTTP
with a key holding `memory` and the memory write rule. Interleaved in one run, turning the order every round:

    batch   POST /memory/batch of 1,000 new records of one person (end to end: JSON, checks, history, audit)
    copy    COPY of 1,000 rows of the same shape into memory_records in a transaction of its own (no history)
    single  POST /memory of one record
    raw     one transaction on a pooled connection: the chain's advisory lock and head, INSERT of the record,
            INSERT of its history version, INSERT of the audit event with its hash, COMMIT

    make bench-writes
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import io
import json
import os
import platform
import statistics
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.search import _free_port, percentile, plain, start_database

BATCH = 1000
RESULTS = Path(__file__).parent / "results" / "writes.md"
WORDS = ["likes", "prefers", "works", "lives", "meeting", "invoice", "holiday", "coffee", "tea", "bank", "report",
         "customer", "dog", "cat", "garden"]


def _text(n: int) -> str:
    return f"record {n} " + " ".join(WORDS[(n + i) % len(WORDS)] for i in range(8))


def setup(url: str) -> dict[str, Any]:
    import psycopg

    from backend.db import migrate
    from backend.ids import new_id

    migrate.upgrade(url)
    conn = psycopg.connect(plain(url), autocommit=True)
    old = conn.execute("SELECT id FROM orgs WHERE name = 'BenchWrites'").fetchone()
    if old:
        org_id = old[0]
        conn.execute("DELETE FROM memory_versions WHERE org_id = %s", (org_id,))
        conn.execute("DELETE FROM memory_records WHERE org_id = %s", (org_id,))
    else:
        org_id = new_id("org")
        conn.execute("INSERT INTO orgs (id, name) VALUES (%s, 'BenchWrites')", (org_id,))
    index = conn.execute("SELECT id FROM indexes WHERE org_id = %s", (org_id,)).fetchone()
    if index:
        index_id = index[0]
    else:
        index_id = new_id("idx")
        conn.execute("INSERT INTO indexes (org_id, id, name) VALUES (%s, %s, 'writes')", (org_id, index_id))
    conn.close()
    return {"org_id": org_id, "index_id": index_id}


async def measure(url: str, meta: dict[str, Any], rounds: int, singles: int) -> dict[str, list[float]]:
    import httpx
    import uvicorn

    from backend.access.actor import Actor
    from backend.access.policy import writer_policy
    from backend.app import create_app
    from backend.config import Settings
    from backend.db.engine import make_engine, make_sessionmaker
    from backend.db.prepared import driver_connection
    from backend.domains.keys import service as keys_service
    from backend.ids import new_id
    from shared.schemas.platform import KeyCreate

    settings = Settings(database_url=url, data_dir=Path(".coremem"), secret="bench-secret-" + "x" * 24,
                        log_level="WARNING")
    # The baselines (and the key's setup) run as the tables' owner: raw COPY into a table under row-level
    # security is refused, and the physical limit is what the owner's plain statements cost.
    engine = make_engine(url, pool_size=4, app_role=False)
    sessions = make_sessionmaker(engine)
    org_id, index_id = meta["org_id"], meta["index_id"]
    async with sessions() as db, db.begin():
        key_row, secret = await keys_service.insert_new_key(
            db, org_id, KeyCreate(name=f"writes {time.time()}", capabilities=["knowledge", "memory"],
                                  policy=writer_policy()),
            Actor("system", "bench"), secret=settings.secret, retention_days=400)
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(settings, url), host="127.0.0.1", port=port,
                                           log_level="warning", access_log=False))
    runner = threading.Thread(target=server.run, daemon=True)
    runner.start()
    http = httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=120,
                             headers={"Authorization": f"Bearer {secret}", "X-Core-Subject": '{"id": "writer"}'})
    for _ in range(100):
        try:
            if (await http.get("/health")).status_code == 200:
                break
        except httpx.HTTPError:
            await asyncio.sleep(0.1)
    counter = iter(range(10**9))

    async def batch() -> float:
        records = [{"index_id": index_id, "type": "fact", "text": _text(next(counter))} for _ in range(BATCH)]
        t0 = time.perf_counter()
        response = await http.post("/memory/batch", json={"records": records})
        seconds = time.perf_counter() - t0
        assert response.status_code == 201, response.text[:300]
        return BATCH / seconds

    async def copy() -> float:
        buffer = io.StringIO()
        for _ in range(BATCH):
            n = next(counter)
            buffer.write(f"{org_id}\t{new_id('mem')}\t{index_id}\twriter\tfact\t{_text(n)}\t"
                         f"{hashlib.sha256(_text(n).encode()).hexdigest()}\t1.0\tapi\n")
        t0 = time.perf_counter()
        async with sessions() as db, db.begin():
            driver = await driver_connection(db)
            async with driver.cursor() as cursor, cursor.copy(
                    "COPY memory_records (org_id, id, index_id, subject, type, text, norm_hash, confidence, source) "
                    "FROM STDIN") as sink:
                await sink.write(buffer.getvalue())
        return BATCH / (time.perf_counter() - t0)

    async def single() -> float:
        t0 = time.perf_counter()
        response = await http.post("/memory", json={"index_id": index_id, "type": "fact",
                                                    "text": _text(next(counter))})
        ms = (time.perf_counter() - t0) * 1000
        assert response.status_code == 201, response.text[:300]
        return ms

    async def raw() -> float:
        n = next(counter)
        record_id = new_id("mem")
        t0 = time.perf_counter()
        async with sessions() as db, db.begin():
            driver = await driver_connection(db)
            await driver.execute("SELECT pg_advisory_xact_lock(hashtextextended('audit:' || %s, 0))", (org_id,))
            head = await (await driver.execute(
                "SELECT seq, hash FROM audit_events WHERE org_id = %s ORDER BY seq DESC LIMIT 1", (org_id,))).fetchone()
            seq, prev = (head[0] + 1, head[1]) if head else (1, "")
            await driver.execute(
                "INSERT INTO memory_records (org_id, id, index_id, subject, type, text, norm_hash, confidence, source) "
                "VALUES (%s, %s, %s, 'writer', 'fact', %s, %s, 1.0, 'api')",
                (org_id, record_id, index_id, _text(n), hashlib.sha256(_text(n).encode()).hexdigest()))
            await driver.execute(
                "INSERT INTO memory_versions (org_id, record_id, version, at, action, actor_type, actor_id, text, "
                "metadata, labels, confidence, tags, priority, status, verified) SELECT org_id, id, version, "
                "clock_timestamp(), 'created', 'key', %s, text, metadata, labels, confidence, tags, priority, status, "
                "verified FROM memory_records WHERE org_id = %s AND id = %s", (key_row["id"], org_id, record_id))
            at = datetime.now(UTC)
            detail = json.dumps({"index_id": index_id, "type": "fact"})
            digest = hashlib.sha256(f"{prev}|{seq}|{at.isoformat()}|memory.create|{record_id}|{detail}".encode())
            await driver.execute(
                "INSERT INTO audit_events (org_id, seq, id, at, actor_type, actor_id, action, object_type, object_id, "
                "outcome, detail, prev_hash, hash) VALUES (%s, %s, %s, %s, 'key', %s, 'memory.create', "
                "'memory_record', %s, 'ok', %s, %s, %s)",
                (org_id, seq, new_id("evt"), at, key_row["id"], record_id, detail, prev, digest.hexdigest()))
        return (time.perf_counter() - t0) * 1000

    for fn in (batch, copy):
        await fn()
    for fn in (single, raw):
        for _ in range(5):
            await fn()
    samples: dict[str, list[float]] = {"batch": [], "copy": [], "single": [], "raw": []}
    for r in range(rounds):
        for name in (["batch", "copy"] if r % 2 == 0 else ["copy", "batch"]):
            samples[name].append(await {"batch": batch, "copy": copy}[name]())
    for r in range(singles):
        for name in (["single", "raw"] if r % 2 == 0 else ["raw", "single"]):
            samples[name].append(await {"single": single, "raw": raw}[name]())
    await http.aclose()
    server.should_exit = True
    runner.join(timeout=10)
    await engine.dispose()
    return samples


def render(s: dict[str, list[float]], rounds: int, singles: int) -> str:
    batch, copy = statistics.median(s["batch"]), statistics.median(s["copy"])
    single50, raw50 = statistics.median(s["single"]), statistics.median(s["raw"])
    ratio = batch / copy
    single_ratio = single50 / raw50
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return "\n".join([
        "# Write benchmark (issue 16 goal 5)", "",
        f"Machine: 2 cores shared with other workers (load average {load} after the run), CPython "
        f"{platform.python_version()}, embedded PostgreSQL (pgserver). A store without embeddings; the API under "
        f"uvicorn in the benchmark's process, over loopback HTTP. {rounds} rounds of batch and COPY of {BATCH:,} "
        f"records each, then {singles} rounds of single and raw writes, interleaved (the order turns every round).",
        "",
        "- batch: `POST /memory/batch` of 1,000 new records of one person, end to end (JSON, checks, history, audit).",
        "- copy: COPY of 1,000 rows of the same shape into memory_records, committed (no history, no audit).",
        "- single: `POST /memory` of one record, end to end.",
        "- raw: one transaction on a pooled connection: the audit chain's advisory lock and head, INSERT of the "
        "record, INSERT of its history version, INSERT of the audit event with its hash, COMMIT.", "",
        "| mode | p50 | p95 |", "| --- | ---: | ---: |",
        f"| batch (records/s) | {batch:,.0f} | {percentile(s['batch'], 5):,.0f} (p5) |",
        f"| copy (records/s) | {copy:,.0f} | {percentile(s['copy'], 5):,.0f} (p5) |",
        f"| single (ms) | {single50:.2f} | {percentile(s['single'], 95):.2f} |",
        f"| raw (ms) | {raw50:.2f} | {percentile(s['raw'], 95):.2f} |", "",
        "## Goals", "",
        f"- {'PASS' if ratio >= 0.5 else 'FAIL'}: batch {batch:,.0f} records/s = {ratio:.2f}× COPY's {copy:,.0f} "
        "(goal ≥ 0.5×)",
        f"- {'PASS' if batch >= 20_000 else 'FAIL'}: batch {batch:,.0f} records/s end to end (goal ≥ 20,000)",
        f"- {'PASS' if single_ratio <= 1.5 else 'FAIL'}: single POST /memory p50 {single50:.2f} ms = "
        f"{single_ratio:.2f}× the raw transaction's {raw50:.2f} ms (goal ≤ 1.5×)", "",
        f"Run at {datetime.now(UTC).isoformat(timespec='seconds')}.", ""])


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--singles", type=int, default=60)
    args = parser.parse_args()
    import logging

    logging.basicConfig(level=logging.WARNING)
    url, _server = start_database(Path(".coremem/bench-pg"))
    meta = setup(url)
    samples = asyncio.run(measure(url, meta, args.rounds, args.singles))
    report = render(samples, args.rounds, args.singles)
    print(report)
    RESULTS.write_text(report)


if __name__ == "__main__":
    main()
