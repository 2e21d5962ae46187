"""Write benchmark (issue 16 goal 5): `POST /memory/batch` against raw COPY of the same rows, and a single
`POST /memory` against a hand-written INSERT of the record, its history version and its audit event, committed.

An organisation of its own (`BenchWrites`) with one store that does not embed, in the embedded server of the
other benchmarks (.coremem/bench-pg); the API runs under uvicorn in this process and is called over loopback HTTP
with a key holding `memory` and the memory write rule. Interleaved in one run, turning the order every round:

    batch   POST /memory/batch of 1,000 new records of one person (end to end: JSON, checks, history; a key's
            record writes are not audit events, PLT-12)
    copy    COPY of 1,000 rows of the same shape into memory_records in a transaction of its own (no history)
    single  POST /memory of one record
    raw     one transaction on a pooled connection: generic plans allowed (as the product's writes), the chain's
            advisory lock and head, INSERT of the record, INSERT of its history version, INSERT of the audit event
            with its hash, COMMIT

After the timings the report shows the `EXPLAIN (ANALYZE, BUFFERS)` of the statements batch, single and raw spend
their time in (`take_plans`, bench/plans.py).

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
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.plans import Plan, Wanted, exactly, explaining, failed, rolled_back, section, starting
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


async def measure(url: str, meta: dict[str, Any], rounds: int,
                  singles: int) -> tuple[dict[str, list[float]], dict[str, Plan]]:
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
            # As the product's writes do (backend/db/plan_mode.py), in the transaction's first statement: the
            # foreign-key checks may keep their generic plan, the primary key, whether or not the statistics know
            # the organisation yet.
            await driver.execute("SELECT set_config('plan_cache_mode', 'auto', true), "
                                 "pg_advisory_xact_lock(hashtextextended('audit:' || %s, 0))", (org_id,))
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
    try:
        plans = await take_plans(url, settings, index_id, secret, raw)
    except Exception as exc:  # the timings stand without their plans
        plans = failed(exc)
    await engine.dispose()
    return samples, plans


def _batch_plans() -> list[Wanted]:
    from backend.domains.memory import bulk

    return [
        Wanted("batch, the records' INSERT: `memory.bulk._MOVE`, INSERT … SELECT of the 1,000 rows the batch "
               "COPYed into its temporary staging table, under row-level security (the policy's WITH CHECK on every "
               "row); with the versions' INSERT, most of the batch's database time", exactly(bulk._MOVE)),
        Wanted("batch, the history versions' INSERT: `memory.repository.snapshot_versions`, one version per new "
               "record, copied from memory_records", starting("INSERT INTO memory_versions")),
        Wanted("batch, the records read back for the answer: `memory.repository.get_many`, the 1,000 new records "
               "by id (`= ANY`) with their effective confidence", lambda sql: sql.startswith("SELECT memory_records.")
               and "memory_records.id = any(" in sql),
    ]


def _single_plans() -> list[Wanted]:
    from backend.access import repository as access
    from backend.domains.memory import repository as memory

    return [
        Wanted("single, the credential: `access.repository._KEY_BY_SECRET`, the key and its organisation by the "
               "hash of the secret, setting the organisation for row-level security (every request's first "
               "statement)", exactly(access._KEY_BY_SECRET.sql)),
        Wanted("single, the index: `memory.repository.index_for_write`, the store the record goes to with the erasure "
               "locks of the people it names, one round trip", lambda sql: sql.startswith("SELECT indexes.")
               and "pg_advisory_xact_lock_shared" in sql),
        Wanted("single, the write: `memory.repository._INSERT_FRESH`, the record and its history version in one "
               "statement, refused if a person it names was erased meanwhile; the route's main statement",
               exactly(memory._INSERT_FRESH.sql)),
    ]


RAW_PLANS = [
    Wanted("raw, the record's INSERT (the baseline's hand-written statement in `raw()`)",
           starting("INSERT INTO memory_records")),
    Wanted("raw, the history version's INSERT … SELECT (hand-written, `raw()`)",
           starting("INSERT INTO memory_versions")),
    Wanted("raw, the audit event's INSERT (hand-written, `raw()`)", starting("INSERT INTO audit_events")),
]


async def take_plans(url: str, settings: Any, index_id: str, secret: str,
                     raw: Callable[[], Awaitable[float]]) -> dict[str, Plan]:
    """The plans of the statements batch, single and raw spend their time in, each explained where it runs
    (bench/plans.py). The batch and the single write run as their routes run them, on the application's role
    with the key's organisation set (row-level security), in transactions rolled back; raw runs once more as it
    was timed (it commits; what EXPLAIN ANALYZE wrote is rolled back to a savepoint first)."""
    import msgspec

    from backend import contexts
    from backend.db.engine import make_engine, make_sessionmaker
    from backend.domains.memory import writes
    from shared.schemas.memory import MemoryCreate

    def body(n: int) -> Any:
        return msgspec.convert({"index_id": index_id, "type": "fact", "text": _text(n)}, MemoryCreate)

    async def batch(ctx: Any) -> None:  # POST /memory/batch's handler
        await writes.create_batch(ctx, [body(n) for n in range(BATCH)])

    async def single(ctx: Any) -> None:  # POST /memory's handler
        await writes.create(ctx, body(BATCH))

    async def as_the_route(db: Any, operation: Callable[[Any], Awaitable[None]]) -> None:
        ctx = await contexts.for_credential(db, settings, authorization=f"Bearer {secret}",
                                            subject_header='{"id": "writer"}')
        await operation(ctx)

    engine = make_engine(url, pool_size=1)  # the application's role, as the API's
    try:
        sessions = make_sessionmaker(engine)
        found = await rolled_back(sessions, _batch_plans(), lambda db: as_the_route(db, batch))
        found["copy, the baseline's COPY"] = ("no plan: EXPLAIN does not take COPY … FROM STDIN (the rows go "
                                              "straight into memory_records, without a plan)")
        found.update(await rolled_back(sessions, _single_plans(), lambda db: as_the_route(db, single)))
    finally:
        await engine.dispose()
    with explaining(RAW_PLANS) as plans:
        await raw()
    return {**found, **plans}


def render(s: dict[str, list[float]], rounds: int, singles: int, plans: dict[str, Plan]) -> str:
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
        "- batch: `POST /memory/batch` of 1,000 new records of one person, end to end (JSON, checks, history; "
        "a key's record writes are not audit events, PLT-12).",
        "- copy: COPY of 1,000 rows of the same shape into memory_records, committed (no history).",
        "- single: `POST /memory` of one record, end to end.",
        "- raw: one transaction on a pooled connection: generic plans allowed for its foreign-key checks "
        "(`set_config('plan_cache_mode', 'auto', true)`, as the product's writes) with the audit chain's advisory "
        "lock in its first statement, the chain's head, INSERT of the "
        "record, INSERT of its history version, INSERT of the audit event with its hash, COMMIT (issue 16's "
        "definition of the baseline; `POST /memory` itself writes no audit event, so the baseline does a little "
        "more than the product).", "",
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
        f"Run at {datetime.now(UTC).isoformat(timespec='seconds')}.", "",
        *section(plans, "Taken after the timings: the batch (1,000 records) and the single write as their routes run "
                 "them (`contexts.for_credential`, then `writes.create_batch` / `writes.create`) on the application's "
                 "role with the key's organisation set, in transactions rolled back; raw as `raw()` runs it once "
                 "more (it commits, as each timed round did). Each statement is explained where the operation runs "
                 "it (bench/plans.py), its EXPLAIN ANALYZE inside a savepoint rolled back before the statement "
                 "itself runs. POST /memory and POST /memory/batch append no audit event (the raw baseline does)."),
    ])


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--singles", type=int, default=60)
    args = parser.parse_args()
    import logging

    logging.basicConfig(level=logging.WARNING)
    url, _server = start_database(Path(".coremem/bench-pg"))
    meta = setup(url)
    samples, plans = asyncio.run(measure(url, meta, args.rounds, args.singles))
    report = render(samples, args.rounds, args.singles, plans)
    print(report)
    RESULTS.write_text(report)


if __name__ == "__main__":
    main()
