"""Benchmark of vector search as one person (issue 16, goal 3): recall against exact search, and speed against
the plain `ORDER BY embedding <=> … LIMIT 10` with the same filter.

A seeded generator fills one store with 1,000,000 records of 384-dimension vectors drawn around 1,000 cluster
centres, for 10,000 people (Zipf-distributed, 20% shared), then builds the HNSW indexes once. For the median
and the heaviest person and queries drawn like the records, it measures interleaved in one run:

- `exact`: the true ten nearest records she may read (a full ranking; what recall is measured against);
- `raw`: the plain statement with her filter (`subject = her OR subject IS NULL`), as the owner, pgvector's
  defaults: the speed goal's yardstick;
- `hand`: the best hand-written statement for the same filter: her records ranked exactly and the shared
  ones through the HNSW index over the shared records alone (migration 0018); for a person with many records
  of her own (`MANY_OWN`), the whole store's index with the product's wide beam instead of the exact ranking;
- `product`: the search the API runs (`search_repository.search`, a page of 10) under row-level security,
  for a key with the default policy;
- `whole`: the same search for a key whose policy reaches beyond her records and the shared ones, which
  takes the HNSW index over the whole store (and her records exactly): what every search did before 0018.

    make bench-vector             # builds the data set once (kept in .coremem/bench-vector-pg), then measures
    python -m bench.vector --rebuild --repeat 200
    python -m bench.vector --records 100000 --pgdata .coremem/bench-vector-pg-100k --out /tmp/vector-100k.md

The table is printed and written to bench/results/vector.md. Not part of `make test`.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import platform
import statistics
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from backend.domains.memory.search_repository import MANY_OWN, WIDE_BEAM
from bench.search import percentile, plain, start_database

SEED = 20261204
RECORDS = 1_000_000
PEOPLE = 10_000
SHARED = 0.2
DIMS = 384
CLUSTERS = 1_000
NOISE = 0.05  # per dimension: a record's cosine to its centre is about 0.7
PAGE = 10
EMBEDDING = {"provider": "local", "model": "bench-clustered", "dimensions": DIMS}
MODEL = f"local/bench-clustered/{DIMS}"  # the fingerprint `providers.embeddings.fingerprint` gives it
RESULTS = Path(__file__).parent / "results" / "vector.md"
SECRET = "bench-secret-" + "x" * 24

FILTER = ("org_id = %(org)s AND index_id = %(idx)s AND status = 'active' AND embedding_model = %(model)s "
          f"AND vector_dims(embedding) = {DIMS}")
DISTANCE = f"embedding::vector({DIMS}) <=> %(q)s::vector({DIMS})"
EXACT = (f"SELECT id FROM memory_records WHERE {FILTER} AND (subject = %(p)s OR subject IS NULL) "
         f"ORDER BY ({DISTANCE}) + 0, id LIMIT {PAGE}")
RAW = (f"SELECT id FROM memory_records WHERE {FILTER} AND (subject = %(p)s OR subject IS NULL) "
       f"ORDER BY {DISTANCE} LIMIT {PAGE}")
SHARED_HNSW = (f"SELECT id, {DISTANCE} AS d FROM memory_records WHERE {FILTER} AND subject IS NULL "
               f"ORDER BY {DISTANCE} LIMIT {PAGE}")
HAND = (f"SELECT id FROM (({SHARED_HNSW}) UNION ALL (SELECT id, ({DISTANCE}) + 0 AS d FROM memory_records "
        f"WHERE {FILTER} AND subject = %(p)s ORDER BY 2 LIMIT {PAGE})) hits ORDER BY d LIMIT {PAGE}")
# For a person with many records of her own, as the product does: the whole store's index with a wide beam.
HAND_MANY = (f"SELECT DISTINCT ON (d, id) id, d FROM (({SHARED_HNSW}) UNION ALL (SELECT id, {DISTANCE} AS d "
             f"FROM memory_records WHERE {FILTER} AND (subject = %(p)s OR subject IS NULL) ORDER BY {DISTANCE} "
             f"LIMIT {PAGE})) hits ORDER BY d, id LIMIT {PAGE}")


def _unit(rows: np.ndarray) -> np.ndarray:
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def _centres() -> np.ndarray:
    return _unit(np.random.default_rng(SEED).normal(size=(CLUSTERS, DIMS)))


def queries(count: int) -> list[list[float]]:
    """Questions drawn like the records: near a random centre."""
    rng = np.random.default_rng(SEED + 1)
    centres = _centres()
    picked = centres[rng.integers(0, CLUSTERS, count)] + rng.normal(scale=NOISE, size=(count, DIMS))
    return [[float(x) for x in row] for row in _unit(picked)]


def build(url: str, rebuild: bool) -> dict[str, Any]:
    import psycopg

    from backend.db import migrate
    from backend.ids import new_id

    migrate.upgrade(url)
    conn = psycopg.connect(plain(url), autocommit=True)
    conn.execute("CREATE TABLE IF NOT EXISTS bench_meta (key text PRIMARY KEY, value jsonb)")
    row = conn.execute("SELECT value FROM bench_meta WHERE key = 'vector'").fetchone()
    if row and not rebuild and row[0].get("seed") == SEED and row[0].get("records") == RECORDS:
        print(f"reusing the vector data set ({RECORDS:,} records)")
        return dict(row[0])
    started = time.monotonic()
    conn.execute("DELETE FROM bench_meta WHERE key = 'vector'")
    old = conn.execute("SELECT id FROM orgs WHERE name = 'BenchVector'").fetchone()
    if old:
        conn.execute("DELETE FROM memory_records WHERE org_id = %s", (old[0],))
        conn.execute("DELETE FROM indexes WHERE org_id = %s", (old[0],))
        org_id = old[0]
    else:
        org_id = new_id("org")
        conn.execute("INSERT INTO orgs (id, name) VALUES (%s, 'BenchVector')", (org_id,))
    index_id = new_id("idx")
    conn.execute("INSERT INTO indexes (org_id, id, name, embedding) VALUES (%s, %s, 'store', %s)",
                 (org_id, index_id, json.dumps(EMBEDDING)))
    # An HNSW index takes rows one by one (milliseconds each): load without them, then build them in bulk.
    hnsw = conn.execute("SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'memory_records' "
                        "AND indexdef LIKE %s", (f"%hnsw%vector({DIMS})%",)).fetchall()
    for name, _ in hnsw:
        conn.execute(f"DROP INDEX {name}")
    rng = np.random.default_rng(SEED + 2)
    centres = _centres()
    weights = 1 / np.arange(1, PEOPLE + 1) ** 1.1
    owners = rng.choice(PEOPLE, size=RECORDS, p=weights / weights.sum())
    shared = rng.random(RECORDS) < SHARED
    now = datetime.now(UTC).replace(microsecond=0).isoformat()
    print(f"generating {RECORDS:,} records of {DIMS} dimensions for {PEOPLE:,} people …", flush=True)
    chunk = 50_000
    for start in range(0, RECORDS, chunk):
        size = min(chunk, RECORDS - start)
        drawn = centres[rng.integers(0, CLUSTERS, size)] + rng.normal(scale=NOISE, size=(size, DIMS))
        # Cosine distance ignores length: whole numbers (the unit vector × 10⁴) are quicker to write and parse.
        scaled = np.rint(_unit(drawn) * 10_000).astype(np.int32)
        buffer = io.StringIO()
        for i in range(size):
            n = start + i
            owner = "\\N" if shared[n] else f"person{owners[n]:05d}"
            vector = "[" + ",".join(map(str, scaled[i].tolist())) + "]"
            buffer.write(f"{org_id}\t{new_id('mem')}\t{index_id}\t{owner}\tfact\trecord {n}\tv{n}\t0.8\tapi\t"
                         f"{now}\t{now}\t{vector}\t{MODEL}\n")
        with conn.cursor() as cur, cur.copy(
                "COPY memory_records (org_id, id, index_id, subject, type, text, norm_hash, confidence, source, "
                "created_at, updated_at, embedding, embedding_model) FROM STDIN") as copy:
            copy.write(buffer.getvalue())
        print(f"  {start + size:,} rows", flush=True)
    loaded = time.monotonic()
    conn.execute("SET maintenance_work_mem = '8GB'")
    conn.execute("SET max_parallel_maintenance_workers = 2")
    index_seconds = {}
    for name, definition in hnsw:
        t0 = time.monotonic()
        conn.execute(definition)
        index_seconds[name] = round(time.monotonic() - t0)
        print(f"  {name}: {index_seconds[name]} s", flush=True)
    # As a store that has settled: the visibility map set (index-only scans), no autovacuum during the run.
    conn.execute("VACUUM (ANALYZE) memory_records")
    counts = conn.execute("SELECT subject, count(*) FROM memory_records WHERE org_id = %s AND subject IS NOT NULL "
                          "GROUP BY subject ORDER BY count(*), subject", (org_id,)).fetchall()
    meta = {"seed": SEED, "records": RECORDS, "org_id": org_id, "index_id": index_id,
            "median": list(counts[len(counts) // 2]), "heaviest": list(counts[-1]),
            "load_seconds": round(loaded - started), "index_seconds": index_seconds,
            "shared": int(shared.sum())}
    conn.execute("INSERT INTO bench_meta VALUES ('vector', %s)", (json.dumps(meta),))
    print(f"built in {round(time.monotonic() - started)} s", flush=True)
    return meta


async def measure(url: str, meta: dict[str, Any], repeat: int) -> dict[str, Any]:
    from backend.access.actor import Actor
    from backend.access.principal import Principal
    from backend.access.scope import build_scope
    from backend.access.subjects import Subject
    from backend.db.engine import make_engine, make_sessionmaker
    from backend.db.prepared import driver_connection
    from backend.db.tenant import use_org
    from backend.domains.keys import service as keys_service
    from backend.domains.memory import decay, search_repository
    from backend.domains.memory.question import Question
    from backend.domains.memory.search_repository import QueryVector
    from backend.domains.orgs import repository as orgs_repo
    from shared.schemas.memory import MemoryQuery
    from shared.schemas.platform import KeyCreate

    engine = make_engine(url, pool_size=4)
    sessions = make_sessionmaker(engine)
    owner_sessions = make_sessionmaker(make_engine(url, pool_size=2, app_role=False))
    org_id, index_id = meta["org_id"], meta["index_id"]
    beyond = {"indexes": ["*"], "rules": [
        {"id": "own", "effect": "permit", "kind": "memory_record", "when": [{"atom": "subject_is_owner"}]},
        {"id": "shared", "effect": "permit", "kind": "memory_record", "actions": ["see"],
         "match": {"labels": {"subject": ""}}},
        {"id": "met", "effect": "permit", "kind": "memory_record", "actions": ["see"],
         "when": [{"atom": "label_is_subject", "label": "participants"}]}]}
    keys = {}
    async with sessions() as db, db.begin():
        await use_org(db, org_id)
        for name, policy in (("product", None), ("whole", beyond)):
            keys[name], _ = await keys_service.insert_new_key(
                db, org_id, KeyCreate(name=f"bench vector {name} {time.time()}", capabilities=["knowledge", "memory"],
                                      policy=policy),
                Actor("system", "bench"), secret=SECRET, retention_days=400)
        org = await orgs_repo.get(db, org_id) or {}

    async def owner_ids(statement: str, person: str, vector: list[float], settings: str = "") -> list[str]:
        async with owner_sessions() as db, db.begin():
            driver = await driver_connection(db)
            if settings:
                await driver.execute(settings)
            async with driver.cursor() as cursor:
                await cursor.execute(statement, {"org": org_id, "idx": index_id, "model": MODEL, "p": person,
                                                 "q": str(vector)})
                return [row[0] for row in await cursor.fetchall()]

    def searcher(name: str) -> Any:
        key = keys[name]
        half_lives = decay.half_lives(org, key)

        async def search(person: str, vector: list[float]) -> list[str]:
            principal = Principal("key", org_id, Actor("key", key["id"]), frozenset(key["capabilities"]),
                                  Subject(person), key=key)
            async with sessions() as db, db.begin():
                await use_org(db, org_id)  # row-level security: as every request's transaction
                scope = build_scope(principal, org)
                rows = await search_repository.search(db, scope, half_lives, MemoryQuery(), Question(),
                                                      [QueryVector((index_id,), vector, MODEL)], PAGE)
                return [row["id"] for row in rows]
        return search

    async def hand(person: str, vector: list[float]) -> list[str]:
        if person == meta["heaviest"][0] and meta["heaviest"][1] >= MANY_OWN:
            return await owner_ids(HAND_MANY, person, vector, f"SET LOCAL hnsw.ef_search = {WIDE_BEAM}")
        return await owner_ids(HAND, person, vector)

    modes: dict[str, Any] = {
        "raw": lambda p, v: owner_ids(RAW, p, v),
        "hand": hand,
        "product": searcher("product"),
        "whole": searcher("whole"),
    }
    who = {"median": meta["median"][0], "heaviest": meta["heaviest"][0]}
    asked = queries(repeat)
    print(f"ranking {len(asked)} queries exactly for {len(who)} people …", flush=True)
    truth = {(name, q): await owner_ids(EXACT, person, vector) for name, person in who.items()
             for q, vector in enumerate(asked)}
    for person in who.values():  # warm up
        for fn in modes.values():
            for vector in asked[:3]:
                await fn(person, vector)
    timings: dict[tuple[str, str], list[float]] = {(w, m): [] for w in who for m in modes}
    found: dict[tuple[str, str], list[float]] = {(w, m): [] for w in who for m in modes}
    order = list(modes)
    for q, vector in enumerate(asked):
        for name, person in who.items():
            for mode in order[q % len(order):] + order[:q % len(order)]:
                t0 = time.perf_counter()
                ids = await modes[mode](person, vector)
                timings[(name, mode)].append((time.perf_counter() - t0) * 1000)
                gold = truth[(name, q)]
                found[(name, mode)].append(len(set(ids) & set(gold)) / len(gold))
    rows = []
    for name, person in who.items():
        row: dict[str, Any] = {"who": name, "person": person, "records": meta[name][1]}
        for mode in modes:
            row[mode] = {"p50": statistics.median(timings[(name, mode)]),
                         "p95": percentile(timings[(name, mode)], 95),
                         "recall": statistics.fmean(found[(name, mode)])}
        rows.append(row)
    plans = {}
    person = who["median"]
    for label, statement, settings in (("raw", RAW, ""), ("hand", HAND, ""), ("exact", EXACT, "")):
        plans[label] = "\n".join(await owner_ids("EXPLAIN (ANALYZE, BUFFERS) " + statement, person, asked[0],
                                                 settings))
    await engine.dispose()
    return {"rows": rows, "plans": plans, "load": os.getloadavg()}


def goals(out: dict[str, Any]) -> list[str]:
    lines = []
    for row in out["rows"]:
        product, raw = row["product"], row["raw"]
        recall_ok = product["recall"] >= 0.95
        ratio = product["p50"] / raw["p50"]
        lines.append(f"{'PASS' if recall_ok else 'FAIL'} goal 3 recall@{PAGE}, {row['who']} person: "
                     f"{product['recall']:.3f} (≥ 0.95)")
        lines.append(f"{'PASS' if ratio <= 1.25 else 'FAIL'} goal 3 speed, {row['who']} person: product p50 "
                     f"{product['p50']:.2f} ms = {ratio:.2f}× the plain statement's {raw['p50']:.2f} ms (≤ 1.25×; "
                     f"{product['p50'] / row['hand']['p50']:.2f}× the hand-written one's {row['hand']['p50']:.2f})")
    return lines


def render(meta: dict[str, Any], out: dict[str, Any], repeat: int) -> str:
    import pgvector
    import psycopg

    lines = ["# Vector search as one person (issue 16, goal 3)", "",
             f"{RECORDS:,} records of {DIMS} dimensions around {CLUSTERS:,} centres, {PEOPLE:,} people (Zipf), "
             f"{meta['shared']:,} shared; {repeat} queries drawn like the records, a page of {PAGE}. Load "
             f"{meta['load_seconds']} s; HNSW builds (m 16, ef_construction 64, 2 workers): "
             + ", ".join(f"{k} {v} s" for k, v in meta["index_seconds"].items()) + ".", "",
             "Recall is the share of the exact ten nearest records she may read that a mode returns.", "",
             "| person | mode | p50 ms | p95 ms | recall@10 |", "| --- | --- | ---: | ---: | ---: |"]
    for row in out["rows"]:
        for mode in ("raw", "hand", "product", "whole"):
            m = row[mode]
            lines.append(f"| {row['who']} ({row['records']:,} own) | {mode} | {m['p50']:.2f} | {m['p95']:.2f} | "
                         f"{m['recall']:.3f} |")
    lines += ["", "```", *goals(out), "```", "",
              f"Machine: {platform.machine()}, {os.cpu_count()} cores, load {out['load'][0]:.2f}; "
              f"Python {platform.python_version()}, psycopg {psycopg.__version__}, pgvector (Python) "
              f"{getattr(pgvector, '__version__', '?')}.",
              f"Run at {datetime.now(UTC).isoformat(timespec='seconds')}.", ""]
    for label, plan in out["plans"].items():
        lines += [f"## EXPLAIN (ANALYZE, BUFFERS): {label}, median person", "", "```", plan, "```", ""]
    return "\n".join(lines)


def set_size(records: int) -> None:
    """The store's size for this run; people grow with it (one per hundred records), as in the full data set."""
    global RECORDS, PEOPLE
    RECORDS, PEOPLE = records, max(100, records // 100)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rebuild", action="store_true")
    parser.add_argument("--repeat", type=int, default=200, help="queries per person")
    parser.add_argument("--records", type=int, default=RECORDS, help="size of the store (goal 8 measures growth)")
    parser.add_argument("--pgdata", default=".coremem/bench-vector-pg", help="where the scratch server keeps its data")
    parser.add_argument("--out", type=Path, default=RESULTS, help="the results file")
    args = parser.parse_args()
    set_size(args.records)
    url, _server = start_database(Path(args.pgdata))
    meta = build(url, args.rebuild)
    out = asyncio.run(measure(url, meta, args.repeat))
    table = render(meta, out, args.repeat)
    print(table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(table)


if __name__ == "__main__":
    main()
