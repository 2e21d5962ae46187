"""Benchmark of the analysts' export (EXP-1): peak memory and throughput at 100,000 and 1,000,000 records.

A seeded generator COPYs the records of two organisations (100k and 1M records, texts of 40–400 characters,
tags, metadata, labels, some commitments) into a scratch embedded PostgreSQL. Each export then runs in a
subprocess of its own through `export_to_file` (backend/domains/exports/to_file.py, the code path of `coremem
export records`), which reports its rows, seconds and peak RSS (`getrusage(RUSAGE_SELF).ru_maxrss`); an export
of zero rows gives the baseline of an interpreter with everything imported. In the same run, interleaved with the
exports (`--rounds`, 5 by default: one sample is noise on a shared machine), `COPY (SELECT <the same columns>) TO
STDOUT` reads the same rows, for the throughput goal (export ≥ 50% of COPY's rows/s, medians). After the timings
the report shows the `EXPLAIN (ANALYZE, BUFFERS)` of the statements both read at the larger size (`take_plans`).

    make bench-export                 # builds the data set once (kept in .coremem/bench-export-pg)
    python -m bench.export --rebuild
    python -m bench.export --sizes 10000,100000 --pgdata .coremem/bench-export-small --results /tmp/export.md

The table is printed and written to bench/results/export.md. Not part of `make test`.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.plans import Plan, explain_sync, failed, section

SEED = 20261203
SIZES = (100_000, 1_000_000)
DATABASE = "coremem_bench_export"
PGDATA = Path(".coremem/bench-export-pg")
RESULTS = Path(__file__).parent / "results" / "export.md"
_WORDS = ("the of and to in is you that it he was for on are with as his they be at one have this from or had by "
         "word but what some we can out other were all there when up use your how said an each refund invoice "
         "order delivery customer question meeting office coffee tea prefers dislikes allergic lives works "
         "Amsterdam Utrecht Rotterdam 中文 مرحبا café \"quoted\" comma, line")
WORDS = _WORDS.split()
TYPES = ("fact", "fact", "fact", "preference", "commitment", "behaviour", "note")


def plain(url: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def _copy_text(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")


def build(url: str, rebuild: bool, sizes: tuple[int, ...] = SIZES) -> dict[str, Any]:
    import psycopg

    from backend.db import migrate
    from backend.ids import new_id

    migrate.upgrade(url)
    conn = psycopg.connect(plain(url), autocommit=True)
    conn.execute("CREATE TABLE IF NOT EXISTS bench_meta (key text PRIMARY KEY, value jsonb)")
    row = conn.execute("SELECT value FROM bench_meta WHERE key = 'export'").fetchone()
    if row and not rebuild and row[0].get("seed") == SEED and row[0].get("sizes", list(SIZES)) == list(sizes):
        print("reusing the data set")
        return dict(row[0])
    conn.execute("DELETE FROM bench_meta")
    conn.execute("DELETE FROM memory_versions")
    conn.execute("DELETE FROM memory_records")
    rng = random.Random(SEED)
    now = datetime.now(UTC).replace(microsecond=0)
    orgs: dict[str, str] = {}
    started = time.monotonic()
    for size in sizes:
        name = f"Bench export {size}"
        found = conn.execute("SELECT id FROM orgs WHERE name = %s", (name,)).fetchone()
        org_id = found[0] if found else new_id("org")
        if not found:
            conn.execute("INSERT INTO orgs (id, name) VALUES (%s, %s)", (org_id, name))
        index_id = f"idx_bench_{size}"
        conn.execute("INSERT INTO indexes (org_id, id, name) VALUES (%s, %s, 'bench') ON CONFLICT DO NOTHING",
                     (org_id, index_id))
        orgs[str(size)] = org_id
        people = [f"person{n}" for n in range(max(10, size // 50))]
        batch = 100_000
        for first in range(0, size, batch):
            buf = io.StringIO()
            for n in range(first, min(first + batch, size)):
                at = now - timedelta(seconds=(size - n) * 30)
                type_ = TYPES[n % len(TYPES)]
                text = " ".join(rng.choices(WORDS, k=rng.randint(8, 70)))
                subject = "\\N" if n % 5 == 0 else rng.choice(people)
                commitment = ('{"status": "open", "due_at": "' + (at + timedelta(days=7)).isoformat()
                              + '", "promised_to": "bob"}') if type_ == "commitment" else "\\N"
                metadata = json.dumps({"source": "bench", "n": n, "note": text[:20]}, ensure_ascii=False)
                tags = "{" + ",".join(rng.sample(("ops", "home", "work", "diet", "travel"), k=n % 3)) + "}"
                record_id = new_id("mem", at_ms=int(at.timestamp() * 1000))
                buf.write("\t".join([
                    org_id, record_id, index_id, subject, type_, _copy_text(text), f"{n:064x}",
                    _copy_text(metadata), '{"team": ["red"]}', f"{rng.random():.6f}", "api", tags, commitment,
                    at.isoformat(), at.isoformat(),
                ]) + "\n")
            with conn.cursor() as cur, cur.copy(
                    "COPY memory_records (org_id, id, index_id, subject, type, text, norm_hash, metadata, labels, "
                    "confidence, source, tags, commitment, created_at, updated_at) FROM STDIN") as copy:
                copy.write(buf.getvalue())
            print(f"  {name}: {min(first + batch, size):,} records ({time.monotonic() - started:.0f} s)", flush=True)
    conn.execute("VACUUM ANALYZE memory_records")
    meta = {"seed": SEED, "sizes": list(sizes), "orgs": orgs, "built_in_s": round(time.monotonic() - started)}
    conn.execute("INSERT INTO bench_meta VALUES ('export', %s::jsonb)", (json.dumps(meta),))
    conn.close()
    return meta


def child(url: str, org_id: str, out: str, empty: bool) -> None:
    """One export in this process; prints rows, seconds and this process's peak RSS as JSON."""
    from backend.config import get_settings
    from backend.domains.exports.to_file import export_to_file
    from shared.schemas.memory import MemoryQuery

    f = MemoryQuery(type=["no_such_type"]) if empty else MemoryQuery()
    started = time.perf_counter()
    rows = export_to_file(url, get_settings().secret, "records", "parquet", out, org_id=org_id, records=f)
    seconds = time.perf_counter() - started
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"rows": rows, "seconds": seconds, "peak_rss_mib": peak_kib / 1024,
                      "bytes": os.path.getsize(out)}))


def run_child(url: str, org_id: str, out: str, empty: bool = False) -> dict[str, Any]:
    args = [sys.executable, "-m", "bench.export", "--child", org_id, "--out", out] + (["--empty"] if empty else [])
    done = subprocess.run(args, env={**os.environ, "CORE_DATABASE_URL": url}, capture_output=True, text=True,
                          check=False)
    if done.returncode != 0:
        raise SystemExit(done.stderr)
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def baseline_sql(org_id: str) -> str:
    """The SELECT of the COPY baseline: the export's columns, typed, with its values written in."""
    from sqlalchemy.dialects import postgresql

    from backend.access.policy import Requester
    from backend.access.scope import Scope
    from backend.domains.exports import repository
    from shared.schemas.memory import MemoryQuery

    scope = Scope(org_id, Requester(None, {}), None, (), unrestricted=True)
    query = repository.record_rows(scope, {}, MemoryQuery())
    return str(query.compile(dialect=postgresql.dialect(), compile_kwargs={"literal_binds": True}))


def copy_baseline(url: str, org_id: str) -> dict[str, Any]:
    """`COPY (SELECT the export's columns, typed) TO STDOUT` of the same rows, read and dropped."""
    import psycopg

    sql = baseline_sql(org_id)
    with psycopg.connect(plain(url)) as conn, conn.cursor() as cur:
        started = time.perf_counter()
        size = 0
        with cur.copy(f"COPY ({sql}) TO STDOUT") as copy:  # type: ignore[arg-type]
            for chunk in copy:
                size += len(chunk)
        seconds = time.perf_counter() - started
        rows = cur.rowcount
    return {"rows": rows, "seconds": seconds, "bytes": size}


def take_plans(url: str, org_id: str) -> dict[str, Plan]:
    """EXPLAIN (ANALYZE, BUFFERS) of the statements an export and a COPY of `org_id`'s records read, once after the
    timings. The export's as `CsvBlocks.open` runs them: its statements built by `service.for_org` as the
    child's export builds them and compiled as `CsvBlocks` compiles them, on a connection of their own as
    coremem_app in a REPEATABLE READ, READ ONLY transaction with the organisation set (row-level security),
    parameters quoted in by a client-side cursor. EXPLAIN takes the SELECT inside a `COPY (…) TO STDOUT`, not the
    COPY itself; the SELECT is what the COPY plans and runs."""
    import asyncio

    import psycopg
    from psycopg.types.json import JsonbDumper

    from backend.db.engine import make_engine, make_sessionmaker
    from backend.db.tenant import APP_ROLE
    from backend.domains.exports import service
    from shared.schemas.memory import MemoryQuery

    async def build() -> tuple[Any, Any, str, Any]:
        engine = make_engine(url, pool_size=1)  # the application's role, as `export_to_file`'s
        try:
            async with make_sessionmaker(engine)() as db, db.begin():
                export = await service.for_org(db, org_id, "records", records=MemoryQuery())
            conninfo = engine.url.set(drivername="postgresql").render_as_string(hide_password=False)
            return export.count(), export.rows(), conninfo, engine.dialect
        finally:
            await engine.dispose()

    counting, rows, conninfo, dialect = asyncio.run(build())
    plans: dict[str, Plan] = {}
    with psycopg.connect(conninfo, options=f"-c role={APP_ROLE}") as conn:
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        conn.execute("SELECT set_config('core.org_id', %s, true)", (org_id,))
        cursor = psycopg.ClientCursor(conn)
        cursor.adapters.register_dumper(dict, JsonbDumper)
        for label, query in (
                ("export, the count: `exports.repository.record_count`, the rows counted in the export's snapshot "
                 "before its COPY starts (`CsvBlocks.open`'s first statement, a pass over the organisation's "
                 "records)", counting),
                ("export, the rows: `exports.repository.record_rows`, the SELECT inside the export's `COPY (…) TO "
                 "STDOUT WITH (FORMAT csv)`, every record with its columns typed for the file; where the export's "
                 "database time goes", rows)):
            compiled = query.compile(dialect=dialect, compile_kwargs={"render_postcompile": True})
            plans[label] = explain_sync(cursor, compiled.string, compiled.params)
        conn.rollback()
    with psycopg.connect(plain(url)) as conn, conn.cursor() as cursor:
        plans["COPY, its SELECT: `baseline_sql` (bench/export.py: `record_rows` compiled with its values written "
              "in), as `copy_baseline` runs it: the tables' owner, a superuser, so no policy applies"] = \
            explain_sync(cursor, baseline_sql(org_id))
        conn.rollback()
    return plans


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rebuild", action="store_true")
    parser.add_argument("--child", default=None)
    parser.add_argument("--out", default=None)
    parser.add_argument("--empty", action="store_true")
    parser.add_argument("--build-only", action="store_true")
    parser.add_argument("--sizes", default=",".join(str(n) for n in SIZES),
                        help="records of the small and the large organisation, comma-separated")
    parser.add_argument("--pgdata", default=str(PGDATA), help="where the scratch server keeps its data")
    parser.add_argument("--results", type=Path, default=RESULTS, help="the results file")
    parser.add_argument("--rounds", type=int, default=5, help="exports and COPYs per size, interleaved")
    args = parser.parse_args()
    if args.child:
        child(os.environ["CORE_DATABASE_URL"], args.child, args.out, args.empty)
        return

    from backend.db.embedded import ensure_database, socket_url, start_server

    sizes = tuple(int(n) for n in args.sizes.split(","))
    server = start_server(Path(args.pgdata), cleanup_mode="stop")
    ensure_database(server, DATABASE)
    url = socket_url(Path(args.pgdata), DATABASE)
    meta = build(url, args.rebuild, sizes)
    if args.build_only:
        return
    lines = ["| records | export s | export rows/s | peak RSS MiB | Parquet MiB | COPY s | COPY rows/s | export/COPY |",
             "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    results: dict[int, dict[str, Any]] = {}
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        base = run_child(url, meta["orgs"][str(sizes[0])], f"{tmp}/empty.parquet", empty=True)
        for size in sizes:
            org_id = meta["orgs"][str(size)]
            exports, copies = [], []
            for r in range(args.rounds):  # interleaved, the order turns every round
                for kind in (("copy", "export") if r % 2 == 0 else ("export", "copy")):
                    if kind == "copy":
                        copies.append(copy_baseline(url, org_id))
                    else:
                        exports.append(run_child(url, org_id, f"{tmp}/{size}.parquet"))
            for result, copy in zip(exports, copies, strict=True):
                assert result["rows"] == size == copy["rows"], (result, copy)
            seconds = statistics.median(e["seconds"] for e in exports)
            copy_seconds = statistics.median(c["seconds"] for c in copies)
            rate, copy_rate = size / seconds, size / copy_seconds
            ratios = sorted(c["seconds"] / e["seconds"] for e, c in zip(exports, copies, strict=True))
            peak = max(e["peak_rss_mib"] for e in exports)  # the worst round: the memory goal is a ceiling
            results[size] = {"peak_rss_mib": peak, "rate": rate, "copy_rate": copy_rate, "ratios": ratios}
            lines.append(f"| {size:,} | {seconds:.2f} | {rate:,.0f} | {peak:.0f} | {exports[0]['bytes'] / 2**20:.1f} "
                         f"| {copy_seconds:.2f} | {copy_rate:,.0f} | {rate / copy_rate:.0%} "
                         f"({', '.join(f'{x:.0%}' for x in ratios)}) |")
            print(lines[-1], flush=True)
    load = ", ".join(f"{x:.2f}" for x in load_before), ", ".join(f"{x:.2f}" for x in os.getloadavg())
    try:
        plans = take_plans(url, meta["orgs"][str(sizes[-1])])
    except Exception as exc:  # the timings stand without their plans
        plans = failed(exc)
    small, large = results[sizes[0]], results[sizes[-1]]
    rss_ratio = large["peak_rss_mib"] / small["peak_rss_mib"]
    throughput = large["rate"] / large["copy_rate"]
    report = "\n".join([
        "# Export benchmark (EXP-1)", "",
        f"Run {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')} on {platform.node()} ({platform.machine()}, "
        f"{os.cpu_count()} CPUs), Python {platform.python_version()}, embedded PostgreSQL (pgserver), "
        f"`python -m bench.export`. Each export is `export_to_file` (the `coremem export records "
        f"--format parquet` path) in a subprocess of its own; peak RSS is that process's `ru_maxrss`. "
        f"COPY reads `COPY (SELECT the same columns) TO STDOUT` of the same rows in the same run. Under row-level "
        f"security the export runs as the application does (`coremem_app`, the organisation set in its transaction), "
        f"COPY as the owner, a superuser (the policies do not apply: the physical limit). Load average "
        f"{load[0]} before, {load[1]} after (2 cores shared with other work). {args.rounds} rounds per size, "
        f"export and COPY interleaved (the order turns every round): times are medians, peak RSS the highest "
        f"round, export/COPY the ratio of the medians (each round's in brackets).", "",
        *lines, "",
        f"Baseline: an export of zero rows (interpreter, polars, pyarrow, SQLAlchemy loaded) peaks at "
        f"{base['peak_rss_mib']:.0f} MiB.", "",
        f"- {'PASS' if rss_ratio <= 1.5 else 'FAIL'}: peak RSS at {sizes[-1]:,} / at {sizes[0]:,}: {rss_ratio:.2f} "
        "(goal ≤ 1.5)",
        f"- {'PASS' if throughput >= 0.5 else 'FAIL'}: throughput at {sizes[-1]:,} vs COPY: {throughput:.0%} "
        f"(goal ≥ 50%; rounds {large['ratios'][0]:.0%}–{large['ratios'][-1]:.0%})",
        "",
        *section(plans, f"At {sizes[-1]:,} records (the throughput goal's size), after the timings: the export's "
                 "statements as `CsvBlocks.open` runs them (a connection of its own as `coremem_app` with the "
                 "organisation set, REPEATABLE READ, READ ONLY), the COPY's as `copy_baseline` runs it (the owner). "
                 "EXPLAIN takes the SELECT inside `COPY (…) TO STDOUT`, not the COPY."),
    ])
    args.results.parent.mkdir(parents=True, exist_ok=True)
    args.results.write_text(report)
    print(report)


if __name__ == "__main__":
    main()
