"""Benchmark of the injection builder (INJ-13) against the raw SQL that fetches the same candidate rows.

The suite's seeded generator (bench/data.py) fills one store with 1,000,000 memory records for 10,000 people
(Zipf-distributed, 20% shared, mixed types, 2% embedded) with COPY, then measures, interleaved in one run, for the
median person and the heaviest person: the builder (as a turn runs it, without the recall-count write) and one
hand-written SQL statement returning the same candidate rows; plus the preview route end to end over HTTP.

    make bench-injection        # builds the data set once (kept in .coremem/bench-pg), then measures
    python -m bench.injection --rebuild --repeat 60

The table is printed and written to bench/results/injection.md. Not part of `make test`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import statistics
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import data
from bench.search import _free_port, percentile, plain, start_database

SEED = 20261203
RECORDS = 1_000_000
PEOPLE = 10_000
SHARED = 0.2
EMBEDDED = 0.02
DIMS = 256
RESULTS = Path(__file__).parent / "results" / "injection.md"
ORG_NAME = "BenchInjection"


def build_store(url: str, records: int, people: int, *, progress: bool = False) -> dict[str, Any]:
    """The data set in the organisation ORG_NAME (its old store and records dropped first): one store with hashing
    embeddings of DIMS dimensions holding `records` records of bench/data.py's mix for `people` people, drawn from
    SEED, then settled. Returns what `measure` needs: the organisation, the store, the median and the heaviest
    person (each with her count of records)."""
    import psycopg

    from backend.ids import new_id

    with psycopg.connect(plain(url), autocommit=True) as conn:
        org_id = _emptied_org(conn)
        conn.execute("UPDATE orgs SET memory_decay = %s WHERE id = %s",
                     (json.dumps({"fact": {"half_life_days": 180}, "preference": {"half_life_days": 90}}), org_id))
        index_id = new_id("idx")
        conn.execute("INSERT INTO indexes (org_id, id, name, embedding) VALUES (%s, %s, 'store', %s)",
                     (org_id, index_id, json.dumps({"provider": "hashing", "model": "hashing-v1",
                                                    "dimensions": DIMS})))
        if progress:
            print(f"generating {records:,} records for {people:,} people …", flush=True)
        mix = data.Mix(data.people(people), SHARED, EMBEDDED, DIMS, numbered_hashes=True)
        data.write_records(conn, random.Random(SEED), mix, org_id, index_id, records, progress=progress)
        # As a store that has settled: the visibility map set (index-only scans), no autovacuum during the run.
        conn.execute("VACUUM (ANALYZE) memory_records")
        counts = conn.execute("SELECT subject, count(*) FROM memory_records WHERE org_id = %s AND subject IS NOT "
                              "NULL GROUP BY subject ORDER BY count(*), subject", (org_id,)).fetchall()
    median_person, heaviest = counts[len(counts) // 2], counts[-1]
    return {"org_id": org_id, "index_id": index_id, "median": [median_person[0], median_person[1]],
            "heaviest": [heaviest[0], heaviest[1]]}


def _emptied_org(conn: Any) -> str:
    """ORG_NAME's id, without stores or records; created when missing."""
    from backend.ids import new_id

    old = conn.execute("SELECT id FROM orgs WHERE name = %s", (ORG_NAME,)).fetchone()
    if old:
        conn.execute("DELETE FROM memory_records WHERE org_id = %s", (old[0],))
        conn.execute("DELETE FROM indexes WHERE org_id = %s", (old[0],))
        return str(old[0])
    org_id = new_id("org")
    conn.execute("INSERT INTO orgs (id, name) VALUES (%s, %s)", (org_id, ORG_NAME))
    return org_id


def build(url: str, rebuild: bool) -> dict[str, Any]:
    """The data set at RECORDS records, reused from the database while its seed and size match."""
    import psycopg

    from backend.db import migrate

    migrate.upgrade(url)
    with psycopg.connect(plain(url), autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS bench_meta (key text PRIMARY KEY, value jsonb)")
        row = conn.execute("SELECT value FROM bench_meta WHERE key = 'injection'").fetchone()
    if row and not rebuild and row[0].get("seed") == SEED and row[0].get("records") == RECORDS:
        print(f"reusing the injection data set ({RECORDS:,} records)")
        return dict(row[0])
    started = time.monotonic()
    meta = {"seed": SEED, "records": RECORDS, **build_store(url, RECORDS, PEOPLE, progress=True),
            "build_seconds": round(time.monotonic() - started)}
    with psycopg.connect(plain(url), autocommit=True) as conn:
        conn.execute("INSERT INTO bench_meta VALUES ('injection', %s) ON CONFLICT (key) DO UPDATE SET value = "
                     "excluded.value", (json.dumps(meta),))
    print(f"built in {meta['build_seconds']} s", flush=True)
    return meta


# Decay in double precision: `extract(epoch …)` is numeric, and numeric power() costs several times the float one.
AGE = "greatest(extract(epoch FROM now() - updated_at)::float8, 0) / 86400"
EFF = (f"CASE WHEN type = 'fact' THEN confidence * power(0.5, {AGE} / 180) WHEN type = 'preference' THEN "
       f"confidence * power(0.5, {AGE} / 90) ELSE confidence END")
LIVE = "org_id = %(org)s AND index_id = %(idx)s AND status = 'active' AND (expires_at IS NULL OR expires_at > now())"
COLUMNS = "id, subject, type, text, contested, commitment, episode, provenance, recall_count, created_at, updated_at"
PERSONAL = "type NOT IN ('commitment', 'behaviour', 'episode')"
OPEN = "type = 'commitment' AND (commitment ->> 'status') = 'open'"


SETTINGS = "SET LOCAL max_parallel_workers_per_gather = 0; SET LOCAL plan_cache_mode = force_custom_plan"


def _ranked(owner: str, pos: int, limit: int) -> str:
    """A ranked section by effective confidence, read as an index range above a stored-confidence floor (the
    floor is the limit-th best effective confidence among the HEAD records of highest stored confidence)."""
    from backend.domains.injection.repository import HEAD

    where = f"{LIVE} AND {owner} AND {PERSONAL}"
    head = max(HEAD, limit)
    floor = (f"coalesce((SELECT eff FROM (SELECT {EFF} AS eff FROM memory_records WHERE {where} "
             f"ORDER BY confidence DESC LIMIT {head}) head ORDER BY eff DESC OFFSET {limit - 1} LIMIT 1), 0)")
    return (f"(SELECT {COLUMNS}, {EFF} AS eff, {pos} AS pos FROM memory_records WHERE {where} "
            f"AND confidence >= {floor} ORDER BY eff DESC, recall_count DESC, id LIMIT {limit})")


def best_sql(commitments: int = 55, behaviour: int = 60, ranked: int = 70) -> str:
    """The same candidate rows, written by hand as the index ranges they need (migrations 0005, 0006): per
    section its own range, bounded as the builder bounds it; no policy clauses (the default policy reduces to
    the owner conditions each section already has)."""
    due = "coremem_commitment_due(commitment)"
    mine = (f"(SELECT {COLUMNS}, {EFF} AS eff, {due} AS due FROM memory_records WHERE {LIVE} AND subject = %(p)s "
            f"AND {OPEN} ORDER BY due NULLS LAST, eff DESC, id LIMIT {commitments})")
    shared = (f"(SELECT {COLUMNS}, {EFF} AS eff, {due} AS due FROM memory_records WHERE {LIVE} AND subject IS NULL "
              f"AND {OPEN} ORDER BY due NULLS LAST, eff DESC, id LIMIT {commitments})")
    sections = [
        f"(SELECT {COLUMNS}, eff, 0 AS pos FROM ({mine} UNION ALL {shared}) c ORDER BY due NULLS LAST, eff DESC, id "
        f"LIMIT {commitments})",
        f"(SELECT {COLUMNS}, {EFF} AS eff, 1 AS pos FROM memory_records WHERE {LIVE} AND subject = %(p)s "
        f"AND type = 'behaviour' ORDER BY created_at DESC, id DESC LIMIT {behaviour})",
        _ranked("subject = %(p)s", 2, ranked),
        _ranked("subject IS NULL", 3, ranked),
    ]
    return " UNION ALL ".join(sections)


def _principal(key_row: dict[str, Any], person: str) -> Any:
    """The key asking for `person`, as a turn's request is authenticated."""
    from backend.access.actor import Actor
    from backend.access.principal import Principal
    from backend.access.subjects import Subject

    return Principal("key", key_row["org_id"], Actor("key", key_row["id"]), frozenset(key_row["capabilities"]),
                     Subject(person), key=key_row)


async def injection_key(sessions: Any, org_id: str, index_id: str, secret: str) -> tuple[dict[str, Any], str]:
    """A new key with the store's injection block (as a turn's key): its row and its secret."""
    from backend.access.actor import Actor
    from backend.db.tenant import use_org
    from backend.domains.keys import service as keys_service
    from shared.schemas.platform import InjectionBlock, KeyCreate, KeyMemoryConfig

    async with sessions() as db, db.begin():
        await use_org(db, org_id)  # row-level security: as every request's transaction
        return await keys_service.insert_new_key(
            db, org_id, KeyCreate(name=f"bench {time.time()}", capabilities=["knowledge", "memory", "management"],
                                  memory=KeyMemoryConfig(injection=InjectionBlock(index_id=index_id))),
            Actor("system", "bench"), secret=secret, retention_days=400)


# The builder's bounds per section with the default block and store (the count limit or inject limit plus the
# repository's slack), which `best_sql()`'s defaults spell out by hand.
BOUNDS = {"commitments": 55, "behaviour": 60, "about_this_person": 70, "organisation": 70, "past_sessions": 0}


async def plans(sessions: Any, owner_sessions: Any, key_row: dict[str, Any], index_id: str,
                person: str) -> dict[str, list[str]]:
    """`EXPLAIN (ANALYZE, BUFFERS)` of the builder's candidates statement (as the builder runs it: row-level
    security, no parallel workers, custom plans) and of the hand-written statement, for the report."""
    from psycopg import AsyncRawCursor

    from backend.access.scope import build_scope
    from backend.db.prepared import driver_connection
    from backend.db.tenant import use_org
    from backend.domains.injection import repository as repo
    from backend.domains.memory import decay
    from backend.domains.orgs import repository as orgs_repo

    org_id = key_row["org_id"]
    async with sessions() as db, db.begin():
        await use_org(db, org_id)
        org = await orgs_repo.get(db, org_id) or {}
        scope = build_scope(_principal(key_row, person), org)
        half_lives = decay.half_lives(org, key_row)
        sel = repo.Selection(index_id, person, [], {}, None)
        ranking = repo.Ranking("confidence", None, None)
        sections = [section for section, bound in BOUNDS.items() if bound > 0]
        statement = repo.candidates_statement(scope, half_lives, sel, sections, ranking)
        params = repo.candidates_params(scope, half_lives, sel, BOUNDS, sections, ranking)
        driver = await driver_connection(db)
        await driver.execute("SET LOCAL max_parallel_workers_per_gather = 0")
        async with AsyncRawCursor(driver) as cursor:
            await cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + statement.sql,
                                 statement.values({name: params[name] for name in statement.names}))
            builder = [row[0] for row in await cursor.fetchall()]
    async with owner_sessions() as db, db.begin():
        driver = await driver_connection(db)
        await driver.execute(SETTINGS)
        async with driver.cursor() as cursor:
            await cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + best_sql(), {"org": org_id, "idx": index_id,
                                                                              "p": person})
            hand = [row[0] for row in await cursor.fetchall()]
    return {"builder": builder, "hand-written": hand}


async def same_candidates(sessions: Any, owner_sessions: Any, key_row: dict[str, Any], index_id: str,
                          person: str) -> list[tuple[int, str]]:
    """The hand-written statement returns exactly the builder's candidates (section and id, in order) for the
    person: checked before measuring (and by tests/test_bench_baselines.py), so both do the same work. `sessions`
    act as the application (row-level security), `owner_sessions` as the tables' owner. Returns the candidates."""
    from backend.access.scope import build_scope
    from backend.db.prepared import driver_connection
    from backend.db.tenant import use_org
    from backend.domains.injection import repository as repo
    from backend.domains.memory import decay
    from backend.domains.orgs import repository as orgs_repo

    org_id = key_row["org_id"]
    async with sessions() as db, db.begin():
        await use_org(db, org_id)  # row-level security: as every request's transaction
        org = await orgs_repo.get(db, org_id) or {}
        scope = build_scope(_principal(key_row, person), org)
        sel = repo.Selection(index_id, person, [], {}, None)
        bounds = BOUNDS
        found = await repo.candidates(db, scope, decay.half_lives(org, key_row), sel, bounds,
                                      repo.Ranking("confidence", None, None))
    async with owner_sessions() as db, db.begin():
        driver = await driver_connection(db)
        async with driver.cursor() as cursor:
            await cursor.execute(best_sql(), {"org": org_id, "idx": index_id, "p": person})
            hand = [(row[-1], row[0]) for row in await cursor.fetchall()]
    sections = list(bounds)
    mine = [(sections.index(section), row["id"]) for section, rows in found.items() for row in rows]
    assert mine == hand, f"the hand-written statement differs from the builder's candidates for {person}"
    return hand


async def measure(url: str, meta: dict[str, Any], repeat: int) -> list[dict[str, Any]]:
    import httpx
    import uvicorn

    from backend.access.scope import build_scope
    from backend.app import create_app
    from backend.config import Settings
    from backend.db.engine import make_engine, make_sessionmaker
    from backend.db.prepared import driver_connection
    from backend.db.tenant import use_org
    from backend.domains.injection import service
    from backend.domains.injection.config import choose_block
    from backend.domains.memory import decay
    from backend.domains.orgs import repository as orgs_repo

    settings = Settings(database_url=url, data_dir=Path(".coremem"), secret="bench-secret-" + "x" * 24,
                        log_level="WARNING")
    engine = make_engine(url, pool_size=4)
    sessions = make_sessionmaker(engine)
    # The hand-written statement runs as the tables' owner, without row-level security: the physical limit
    # (under the policies its COALESCE over a subquery would lose the index ranges the builder keeps).
    owner_engine = make_engine(url, pool_size=2, app_role=False)
    owner_sessions = make_sessionmaker(owner_engine)
    org_id, index_id = meta["org_id"], meta["index_id"]
    key_row, secret = await injection_key(sessions, org_id, index_id, settings.secret)
    async with sessions() as db, db.begin():
        await use_org(db, org_id)  # row-level security: as every request's transaction
        org = await orgs_repo.get(db, org_id) or {}
    half_lives = decay.half_lives(org, key_row)

    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(settings, url), host="127.0.0.1", port=port,
                                           log_level="warning", access_log=False))
    runner = threading.Thread(target=server.run, daemon=True)
    runner.start()
    http = httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {secret}"},
                             timeout=60)
    for _ in range(100):
        try:
            if (await http.get("/health")).status_code == 200:
                break
        except httpx.HTTPError:
            await asyncio.sleep(0.1)
    statement = best_sql()

    async def raw(person: str) -> int:
        """The hand-written statement on the same session and transaction machinery as the builder."""
        async with owner_sessions() as db, db.begin():
            driver = await driver_connection(db)
            await driver.execute(SETTINGS)
            async with driver.cursor() as cursor:
                await cursor.execute(statement, {"org": org_id, "idx": index_id, "p": person})
                return len(await cursor.fetchall())

    async def builder(person: str) -> int:
        principal = _principal(key_row, person)
        async with sessions() as db, db.begin():
            await use_org(db, org_id)  # row-level security: as every request's transaction
            scope = build_scope(principal, org)
            built = await service.build(db, scope, half_lives, choose_block(principal, scope), turn_input=None,
                                        max_budget=settings.injection_max_budget_tokens)
            return len(built.block.lines) if built.block else 0

    async def preview(person: str) -> int:
        response = await http.post(f"/memory/stores/{index_id}/injection/preview",
                                   json={"subject": {"id": person}, "key_id": key_row["id"]})
        assert response.status_code == 200, response.text
        return len(response.json()["records"])

    modes = {"raw": raw, "builder": builder, "preview": preview}
    who = {"median": meta["median"][0], "heaviest": meta["heaviest"][0]}
    for person in who.values():
        await same_candidates(sessions, owner_sessions, key_row, index_id, person)
    timings: dict[tuple[str, str], list[float]] = {(w, m): [] for w in who for m in modes}
    results: dict[tuple[str, str], int] = {}
    for person in who.values():
        for fn in modes.values():
            for _ in range(3):
                await fn(person)
    order = list(modes)
    for rep in range(repeat):
        for name, person in who.items():
            for mode in order[rep % 3:] + order[:rep % 3]:
                t0 = time.perf_counter()
                results[(name, mode)] = await modes[mode](person)
                timings[(name, mode)].append((time.perf_counter() - t0) * 1000)
    rows = []
    for name, person in who.items():
        row: dict[str, Any] = {"who": name, "person": person,
                               "records": meta[name][1]}
        for mode in modes:
            row[f"{mode}_p50"] = statistics.median(timings[(name, mode)])
            row[f"{mode}_p95"] = percentile(timings[(name, mode)], 95)
            row[f"{mode}_n"] = results[(name, mode)]
        row["ratio50"] = row["builder_p50"] / row["raw_p50"]
        row["ratio95"] = row["builder_p95"] / row["raw_p95"]
        row["ok"] = row["ratio50"] <= 1.3 and row["ratio95"] <= 1.5
        row["load"] = os.getloadavg()
        row["plans"] = await plans(sessions, owner_sessions, key_row, index_id, person)
        rows.append(row)
    await http.aclose()
    server.should_exit = True
    runner.join(timeout=10)
    await engine.dispose()
    await owner_engine.dispose()
    return rows


def goals(rows: list[dict[str, Any]]) -> list[str]:
    """Issue 16, goal 1: each line PASS or FAIL with its numbers."""
    out = []
    for r in rows:
        who = f"{r['who']} ({r['person']})"
        ok = r["ratio50"] <= 1.3 and r["ratio95"] <= 1.5
        out.append(f"- {'PASS' if ok else 'FAIL'}: {who}: builder p50 {r['builder_p50']:.2f} ms = {r['ratio50']:.2f}× "
                   f"the hand-written {r['raw_p50']:.2f} ms (goal ≤ 1.3×), p95 {r['builder_p95']:.2f} ms = "
                   f"{r['ratio95']:.2f}× {r['raw_p95']:.2f} ms (goal ≤ 1.5×)")
        over = r["preview_p50"] - r["builder_p50"]
        out.append(f"- {'PASS' if over <= 3 else 'FAIL'}: {who}: preview route p50 {r['preview_p50']:.2f} ms = builder "
                   f"p50 + {over:.2f} ms (goal ≤ + 3 ms)")
        if r["who"] == "median":
            out.append(f"- {'PASS' if r['builder_p50'] <= 10 else 'FAIL'}: {who}: builder p50 "
                       f"{r['builder_p50']:.2f} ms (goal ≤ 10 ms)")
    return out


def render(rows: list[dict[str, Any]], meta: dict[str, Any], repeat: int) -> str:
    lines = [
        "# Injection benchmark (INJ-13, issue 16 goal 1)", "",
        f"Data: {RECORDS:,} records in one store, {PEOPLE:,} people (Zipf 1.1), {SHARED:.0%} shared, mixed types, "
        f"{EMBEDDED:.0%} embedded ({DIMS} dims); organisation decay on facts (180 d) and preferences (90 d); "
        f"seed {SEED}.",
        f"Machine: 2 cores shared with other workers, CPython {platform.python_version()}, embedded PostgreSQL "
        f"(pgserver). Load average after the run {', '.join(f'{x:.2f}' for x in rows[-1]['load'])}. {repeat} runs "
        "per person and mode, interleaved (the order turns every round); times in ms.", "",
        "- hand-written: the best statement written by hand for the same candidate rows (`best_sql` in "
        "bench/injection.py): per section its own index range (open commitments hers and shared by due time, "
        "behaviour by creation time, the person's and the shared ranked sections above a stored-confidence floor), "
        "decay in double precision, no policy clauses, on the driver connection with custom plans and no parallel "
        "workers. Checked before measuring to return exactly the builder's candidates, in order.",
        "- builder: `injection.service.build` as a turn runs it: index, store settings, the one candidates "
        "statement (compiled once per shape, run as driver SQL), the walk and the rendering (no recall-count write).",
        "- preview: `POST /memory/stores/{id}/injection/preview` over loopback HTTP (also lists left-out reasons "
        "and writes an audit event).", "",
        "| who | records | hand p50 | hand p95 | builder p50 | builder p95 | p50 ratio | p95 ratio | preview p50 | "
        "preview p95 | lines |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        lines.append(f"| {r['who']} ({r['person']}) | {r['records']:,} | {r['raw_p50']:.2f} | {r['raw_p95']:.2f} | "
                     f"{r['builder_p50']:.2f} | {r['builder_p95']:.2f} | {r['ratio50']:.2f}× | {r['ratio95']:.2f}× | "
                     f"{r['preview_p50']:.2f} | {r['preview_p95']:.2f} | {r['builder_n']} |")
    lines += ["", "## Goals", "", *goals(rows), "",
              f"Run at {datetime.now(UTC).isoformat(timespec='seconds')}.", "",
              "## Plans (`EXPLAIN (ANALYZE, BUFFERS)`, run once more after the timings)"]
    for r in rows:
        for name, plan in r["plans"].items():
            lines += ["", f"{name}, {r['who']} person ({r['person']}):", "", "```", *plan, "```"]
    lines.append("")
    return "\n".join(lines)


def set_size(records: int) -> None:
    """The store's size for this run; people grow with it (one per hundred records), as in the full data set."""
    global RECORDS, PEOPLE
    RECORDS, PEOPLE = records, max(100, records // 100)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rebuild", action="store_true")
    parser.add_argument("--repeat", type=int, default=40)
    parser.add_argument("--records", type=int, default=RECORDS, help="size of the store (goal 8 measures growth)")
    parser.add_argument("--pgdata", default=".coremem/bench-pg", help="where the scratch server keeps its data")
    parser.add_argument("--out", type=Path, default=RESULTS, help="the results file")
    args = parser.parse_args()
    set_size(args.records)
    url, _server = start_database(Path(args.pgdata))
    meta = build(url, args.rebuild)
    rows = asyncio.run(measure(url, meta, args.repeat))
    table = render(rows, meta, args.repeat)
    print(table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(table)


if __name__ == "__main__":
    main()
