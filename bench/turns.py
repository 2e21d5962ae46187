"""Turn overhead benchmark (TRN-1, issue 12): POST /responses end to end against a scripted model, compared with
the injection builder alone.

A seeded generator fills one organisation with 100,000 memory records (bench/data.py's: 2,000 people, Zipf 1.1, 20%
shared, mixed types, 2% embedded) and 10,000 threads (about 170,000 items) with COPY; the index and the key go
through the API.
The product runs as users start it (`coremem serve`, one process); the scripted OpenAI-compatible server of the
tests (tests/model_server.py) answers at once from a thread of this process. For the median and the heaviest
person (by records), interleaved in one run:

    new       a turn that opens a thread (one model round)
    continue  a turn that continues one of the person's threads of 20 items (history read; one model round)
    tool      a turn whose model calls the memory write tool, then answers (two model rounds, one record written)
    build     `injection.service.build` alone, as the turn calls it (turns/block_ahead.py), for the same key, person
              and input, in a transaction of its own, in this process
    key       GET /key, the cheapest authenticated request: a yardstick of how busy the machine was

Each turn is timed over HTTP from request to answer; only answers with 201 and `status: "completed"` (and the
expected output) count. The model's time is the trace's `model_ms` (GET /responses/{id}: the provider call,
including the OpenAI SDK's own work and the loopback round trip); platform time is total minus that. Between
runs the data set is put back as built (threads, items, responses, usage and records written by turns removed;
the record a tool turn writes is deleted right after its turn, untimed). After the timings the report shows the
`EXPLAIN (ANALYZE, BUFFERS)` of the statements a continue turn of the median person runs (`Bench.plans`).

    make bench-turns                                  # builds the data set once (.coremem/bench-turns-pg)
    python -m bench.turns --records 5000 --threads 500 --repeat 5 --out /tmp/turns.md   # a smoke run

Goals (issue 12): platform time per turn p50 ≤ 25 ms and ≤ 2× the build's p50. Results are printed and written to
bench/results/turns.md (each operation's numbers also to .coremem/bench-turns/samples.json); a failed goal still
exits 0 (a report, not a test); a run with wrong answers exits 2.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import json
import os
import platform
import random
import signal
import statistics
import sys
import threading
import time
import warnings
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench import data
from bench.http import REPO, InvalidRun, Server, _free_port, _load, _revision, plain, start_server
from bench.http import _bootstrap as bootstrap
from bench.lean_http import LeanClient
from bench.plans import Plan, Wanted, exactly, failed, rolled_back, section, starting
from bench.search import percentile

SEED = 20261205
DATA_VERSION = 3  # 3: the records from bench/data.py (its order of draws, not the text before the vector)
RECORDS = 100_000
THREADS = 10_000
RECORDS_PER_PERSON = 50  # people = records / 50 (2,000 at the full size)
SHARED = 0.2
EMBEDDED = 0.02
DIMS = 256
SHARED_THREADS = 0.1
OWN_THREADS = 120  # threads of 20 items each measured person has (continue turns go round them)
HISTORY = 20
DATABASE = "coremem_bench_turns"
PGDATA = Path(".coremem/bench-turns-pg")
RESULTS = Path(__file__).parent / "results" / "turns.md"
SECRET = "bench-turns-secret-" + "x" * 32
ORG = "Bench turns"
ADMIN = "bench-turns@bench.local"
MODEL = "scripted"
INPUT = "What did I tell you about the project deadline, the budget and my morning coffee?"
REPLY = "Noted: the deadline is Friday and the budget is fine."
MODES = ("new", "continue", "tool", "build", "key")
TURNS = MODES[:3]
GOAL_MS = 25.0
GOAL_RATIO = 2.0
SERVER_ERRORS_ALLOWED = 0.05  # more wrong answers than this share of turns makes the run invalid


# ---------------------------------------------------------------- database and data set

def open_database(pgdata: Path) -> tuple[str, Any]:
    """CORE_DATABASE_URL when set, else an embedded server of its own in `pgdata`."""
    if os.environ.get("CORE_DATABASE_URL"):
        return os.environ["CORE_DATABASE_URL"], None
    from backend.db.embedded import ensure_database, socket_url
    from backend.db.embedded import start_server as start_pg

    server = start_pg(pgdata, cleanup_mode="stop")
    ensure_database(server, DATABASE)
    return socket_url(pgdata, DATABASE), server


def product_env(url: str, logs: Path) -> dict[str, str]:
    return {**os.environ, "CORE_DATABASE_URL": url, "CORE_DATA_DIR": str(logs), "CORE_SECRET": SECRET}


def start_product(url: str, logs: Path) -> Server:
    """`coremem serve --host 127.0.0.1 --port P`, exactly as a user starts it, on the benchmark's database."""
    port = _free_port()
    coremem = str(Path(sys.executable).parent / "coremem")
    return start_server("product", [coremem, "serve", "--host", "127.0.0.1", "--port", str(port)],
                        product_env(url, logs), port, "/health", logs)


def _api(client: Any, method: str, path: str, expected: int, **kwargs: Any) -> Any:
    response = client.request(method, path, **kwargs)
    if response.status_code != expected:
        raise InvalidRun(f"{method} {path} answered {response.status_code}, not {expected}: {response.text}")
    return response.json()


def _copy(conn: Any, table: str, columns: str, rows: io.StringIO) -> None:
    with conn.cursor() as cur, cur.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
        copy.write(rows.getvalue())


def _item_body(role: str, text: str) -> str:
    """A message as the thread stores it (the ItemIn conversion `threads.rules.item_rows` does)."""
    import msgspec

    from shared.schemas.threads import ItemIn

    content: Any = text if role == "user" else [{"type": "output_text", "text": text, "annotations": []}]
    body = msgspec.to_builtins(msgspec.convert({"type": "message", "role": role, "content": content}, ItemIn))
    body.pop("type")
    return json.dumps(body, ensure_ascii=False)


def _threads(conn: Any, rng: random.Random, org_id: str, people: list[str], measured: list[str],
             count: int) -> dict[str, list[str]]:
    """Threads and their messages. Each measured person gets OWN_THREADS threads of HISTORY items; the rest are
    owned Zipf-like by everyone (10% shared) and hold 2 to 30 items. Returns the measured people's threads."""
    from backend.ids import new_id

    weights = data.zipf_weights(len(people))
    now = datetime.now(UTC).replace(microsecond=0)
    plan: list[tuple[str | None, int, datetime]] = []
    for person in measured:
        plan += [(person, HISTORY, now - timedelta(days=rng.uniform(1, 30))) for _ in range(OWN_THREADS)]
    while len(plan) < count:
        owner = None if rng.random() < SHARED_THREADS else rng.choices(people, weights=weights)[0]
        plan.append((owner, rng.randint(2, 30), now - timedelta(days=rng.uniform(1, 365))))
    rng.shuffle(plan)
    own: dict[str, list[str]] = {p: [] for p in measured}
    thread_columns = "org_id, id, subject, labels, metadata, last_position, created_at, updated_at"
    item_columns = "org_id, thread_id, position, id, type, role, subject, response_id, body, text, created_at"
    for start in range(0, len(plan), 2_000):
        threads, items = io.StringIO(), io.StringIO()
        for owner, length, opened in plan[start:start + 2_000]:
            thread_id = new_id("thr")
            if owner in own and length == HISTORY and len(own[owner]) < OWN_THREADS:
                own[owner].append(thread_id)
            last = opened + timedelta(minutes=length)
            threads.write("\t".join([org_id, thread_id, owner or "\\N", "{}", "{}", str(length), opened.isoformat(),
                                     last.isoformat()]) + "\n")
            for position in range(1, length + 1):
                role = "user" if position % 2 else "assistant"
                text = data.text(rng)
                at = (opened + timedelta(minutes=position)).isoformat()
                items.write("\t".join([org_id, thread_id, str(position), new_id("itm"), "message", role,
                                       owner or "\\N", "\\N", data.copy_text(_item_body(role, text)),
                                       data.copy_text(text), at]) + "\n")
        _copy(conn, "threads", thread_columns, threads)
        _copy(conn, "thread_items", item_columns, items)
        print(f"  threads: {min(start + 2_000, len(plan)):,}", flush=True)
    return own


def build(url: str, logs: Path, rebuild: bool, records: int, threads: int) -> dict[str, Any]:
    """Create (or reuse) the data set: the organisation by bootstrap, index and key through the API, the bulk by
    COPY."""
    import httpx
    import psycopg

    from backend.access.policy import writer_policy
    from backend.db import migrate

    migrate.upgrade(url)
    conn = psycopg.connect(plain(url), autocommit=True)
    conn.execute("CREATE TABLE IF NOT EXISTS bench_meta (key text PRIMARY KEY, value jsonb)")
    row = conn.execute("SELECT value FROM bench_meta WHERE key = 'turns'").fetchone()
    if row and not rebuild and (row[0].get("seed"), row[0].get("version"), row[0].get("records"),
                                row[0].get("threads")) == (SEED, DATA_VERSION, records, threads):
        print(f"reusing the data set in {DATABASE} (built {row[0]['built_at']})", flush=True)
        conn.close()
        return dict(row[0])
    started = time.monotonic()
    rng = random.Random(SEED)
    print(f"building the data set: {records:,} records, {threads:,} threads …", flush=True)
    conn.execute("DELETE FROM orgs WHERE name = %s", (ORG,))  # everything of it goes too (foreign keys cascade)
    conn.execute("DELETE FROM bench_meta WHERE key = 'turns'")
    boot = bootstrap(url, ORG, ADMIN, SECRET)  # `coremem bootstrap`'s service: organisation, administrator, key
    org_id = boot["org_id"]
    product = start_product(url, logs)
    try:
        with httpx.Client(base_url=product.base, timeout=60) as api:
            admin = {"Authorization": f"Bearer {boot['admin_token']}"}
            index_id = _api(api, "POST", "/indexes", 201, headers={"Authorization": f"Bearer {boot['key']}"},
                            json={"name": "bench-turns", "embedding": {"provider": "hashing", "model": "hashing-v1",
                                                                       "dimensions": DIMS}})["id"]
            key = _api(api, "POST", f"/tenants/{org_id}/keys", 201, headers=admin, json={
                "name": "bench turns", "capabilities": ["knowledge", "memory", "threads", "tooling"],
                "memory": {"retrieval_tool": True, "write_tool": True, "injection": {"index_id": index_id}},
                "policy": writer_policy()})
    finally:
        product.stop()
    conn.execute("UPDATE orgs SET memory_decay = %s WHERE id = %s",
                 (json.dumps({"fact": {"half_life_days": 180}, "preference": {"half_life_days": 90}}), org_id))
    people = data.people(max(records // RECORDS_PER_PERSON, 10))
    data.write_records(conn, rng, data.Mix(people, SHARED, EMBEDDED, DIMS), org_id, index_id, records, chunk=20_000,
                       progress=True)
    # The versions POST /memory would have written for the bulk.
    conn.execute("""INSERT INTO memory_versions (org_id, record_id, version, at, action, actor_type, actor_id, text,
                        metadata, labels, confidence, tags, priority, expires_at, status, verified, commitment)
                    SELECT org_id, id, version, created_at, 'created', 'key', %s, text, metadata, labels, confidence,
                           tags, priority, expires_at, status, verified, commitment
                    FROM memory_records WHERE org_id = %s""", (key["id"], org_id))
    counts = conn.execute("SELECT subject, count(*) FROM memory_records WHERE org_id = %s AND subject IS NOT NULL "
                          "GROUP BY subject ORDER BY count(*), subject", (org_id,)).fetchall()
    median, heaviest = counts[len(counts) // 2], counts[-1]
    own = _threads(conn, rng, org_id, people, [median[0], heaviest[0]], threads)
    for table in ("memory_records", "memory_versions", "threads", "thread_items"):
        conn.execute(f"VACUUM ANALYZE {table}")
    totals = conn.execute("SELECT (SELECT count(*) FROM memory_records WHERE org_id = %(o)s), "
                          "(SELECT count(*) FROM threads WHERE org_id = %(o)s), "
                          "(SELECT count(*) FROM thread_items WHERE org_id = %(o)s), "
                          "(SELECT count(*) FROM memory_records WHERE org_id = %(o)s AND subject IS NULL)",
                          {"o": org_id}).fetchone() or (0, 0, 0, 0)
    built_at = (conn.execute("SELECT now()").fetchone() or [datetime.now(UTC)])[0]
    meta = {"seed": SEED, "version": DATA_VERSION, "records": records, "threads": threads, "org_id": org_id,
            "index_id": index_id, "key": key["secret"], "key_id": key["id"], "admin_email": boot["admin_email"],
            "admin_password": boot["admin_password"], "people": len(people),
            "who": {"median": {"person": median[0], "records": median[1], "threads": own[median[0]]},
                    "heaviest": {"person": heaviest[0], "records": heaviest[1], "threads": own[heaviest[0]]}},
            "counted": {"records": totals[0], "threads": totals[1], "items": totals[2], "shared_records": totals[3]},
            "built_in_s": round(time.monotonic() - started), "built_at": built_at.isoformat()}
    conn.execute("INSERT INTO bench_meta VALUES ('turns', %s::jsonb)", (json.dumps(meta),))
    conn.close()
    print(f"data set ready in {meta['built_in_s']} s", flush=True)
    return meta


def restore(url: str, meta: dict[str, Any]) -> None:
    """Put the data set back as built: what turns added (threads, items, responses, usage, records) goes, the
    continued threads' positions and the recall counts are reset."""
    import psycopg

    org, built = meta["org_id"], meta["built_at"]
    with psycopg.connect(plain(url), autocommit=True) as conn:
        conn.execute("DELETE FROM responses WHERE org_id = %s", (org,))
        conn.execute("DELETE FROM usage_events WHERE org_id = %s", (org,))
        conn.execute("DELETE FROM threads WHERE org_id = %s AND created_at > %s", (org, built))
        conn.execute("DELETE FROM thread_items WHERE org_id = %s AND created_at > %s", (org, built))
        conn.execute("DELETE FROM thread_states WHERE org_id = %s", (org,))
        conn.execute("""UPDATE threads t SET last_position = coalesce((SELECT max(position) FROM thread_items i
                          WHERE i.org_id = t.org_id AND i.thread_id = t.id), 0)
                        WHERE t.org_id = %s AND t.updated_at > %s""", (org, built))
        conn.execute("DELETE FROM memory_records WHERE org_id = %s AND created_at > %s", (org, built))
        conn.execute("UPDATE memory_records SET recall_count = 0 WHERE org_id = %s AND recall_count <> 0", (org,))
        for table in ("responses", "usage_events", "threads", "thread_items", "memory_records", "memory_versions"):
            conn.execute(f"VACUUM ANALYZE {table}")


# ---------------------------------------------------------------- the scripted model

def start_model() -> tuple[Any, Any, threading.Thread]:
    """The tests' scripted server under uvicorn in a thread of this process; records its own handling time."""
    import uvicorn

    from tests.model_server import ScriptedModel

    class TimedModel(ScriptedModel):
        def __init__(self) -> None:
            super().__init__()
            self.handled_ms: list[float] = []

        async def _chat(self, payload: dict[str, Any], step: Any, send: Any) -> None:
            started = time.perf_counter()
            await super()._chat(payload, step, send)
            self.handled_ms.append((time.perf_counter() - started) * 1000)

    app = TimedModel()
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on"))
    runner = threading.Thread(target=server.run, daemon=True)
    runner.start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    if not server.started:
        raise InvalidRun("the scripted model server did not start")
    app.url = f"http://127.0.0.1:{port}/v1"
    return app, server, runner


# ---------------------------------------------------------------- measuring

def _on_cpu_ns(pid: int) -> int:
    """Time the process's threads have run on a CPU (the scheduler's own count, in ns), 0 once it is gone."""
    total = 0
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError, ValueError, IndexError):
                total += int(Path(f"/proc/{pid}/task/{task}/schedstat").read_text().split()[0])
    return total


class CpuMeter:
    """CPU time of the product process and of the PostgreSQL server's processes around one operation. On a shared
    machine wall times include waiting for a CPU; these do not (Linux /proc/<pid>/task/*/schedstat)."""

    def __init__(self, product_pid: int, pgdata: Path | None) -> None:
        self.product_pid = product_pid
        self.postmaster: int | None = None
        with contextlib.suppress(OSError, ValueError, AttributeError):
            self.postmaster = int((pgdata / "postmaster.pid").read_text().split()[0]) if pgdata else None
        self.available = Path(f"/proc/{product_pid}/task").is_dir() and self.postmaster is not None

    def _postgres(self) -> dict[int, int]:
        if self.postmaster is None:
            return {}
        try:
            children = Path(f"/proc/{self.postmaster}/task/{self.postmaster}/children").read_text().split()
        except OSError:
            return {}
        pids = [self.postmaster, *map(int, children)]
        return {pid: _on_cpu_ns(pid) for pid in pids}

    def read(self) -> tuple[int, dict[int, int]]:
        if not self.available:
            return 0, {}
        return _on_cpu_ns(self.product_pid), self._postgres()

    def since(self, before: tuple[int, dict[int, int]]) -> tuple[float, float]:
        """(product ms, PostgreSQL ms) since `before`; a PostgreSQL process that started since counts whole."""
        product, postgres = self.read()
        pg = sum(ns - before[1].get(pid, 0) for pid, ns in postgres.items() if ns >= before[1].get(pid, 0))
        return (product - before[0]) / 1e6, pg / 1e6


@dataclass
class Sample:
    total_ms: float
    cpu_ms: float = 0.0  # the product process (a turn) or this process's thread (the build)
    pg_cpu_ms: float = 0.0  # PostgreSQL's processes
    model_ms: float = 0.0
    trace_total_ms: float = 0.0
    server_ms: float = 0.0  # the scripted server's own handling time
    tool_ms: float = 0.0
    lines: int = 0

    @property
    def platform_ms(self) -> float:
        return self.total_ms - self.model_ms

    @property
    def all_cpu_ms(self) -> float:
        return self.cpu_ms + self.pg_cpu_ms


@dataclass
class Results:
    samples: dict[tuple[str, str], list[Sample]] = field(default_factory=dict)
    wrong: dict[tuple[str, str], list[str]] = field(default_factory=dict)

    def values(self, who: str, mode: str, name: str) -> list[float]:
        return [float(getattr(s, name)) for s in self.samples.get((who, mode), [])]

    def p50(self, who: str, mode: str, name: str) -> float:
        values = self.values(who, mode, name)
        return statistics.median(values) if values else float("nan")

    def p95(self, who: str, mode: str, name: str) -> float:
        values = self.values(who, mode, name)
        return percentile(values, 95) if values else float("nan")


class Bench:
    """The turns over HTTP and the builder in this process, for one person at a time."""

    def __init__(self, meta: dict[str, Any], product: Server, model: Any, url: str, logs: Path,
                 meter: CpuMeter) -> None:
        from backend.config import settings_from_env
        from backend.db.engine import make_engine, make_sessionmaker

        self.meta = meta
        self.url = url
        self.model = model
        self.meter = meter
        self.settings = settings_from_env(product_env(url, logs))
        self.engine = make_engine(url, pool_size=2)
        self.sessions = make_sessionmaker(self.engine)
        self.http = LeanClient(product.base, headers={"Authorization": f"Bearer {meta['key']}"})
        self.write_tool = f"memory__{meta['index_id']}__write"
        self.contexts: dict[str, Any] = {}
        self.rotation: dict[str, int] = {}
        self.count = 0

    async def close(self) -> None:
        await self.http.aclose()
        await self.engine.dispose()

    async def context(self, person: str) -> Any:
        """The request context the turn builds for this key and person (its principal, organisation, scope)."""
        from backend import contexts

        if person not in self.contexts:
            async with self.sessions() as db, db.begin():
                ctx = await contexts.for_credential(db, self.settings, authorization=f"Bearer {self.meta['key']}",
                                                    subject_header=json.dumps({"id": person}))
                _ = ctx.scope
            self.contexts[person] = ctx
        return self.contexts[person]

    async def build(self, person: str) -> tuple[Sample, Any]:
        """The builder as a turn calls it (turns/block_ahead.py), in a transaction of its own."""
        from backend.db.tenant import use_org
        from backend.domains.injection import service as injection
        from backend.domains.injection.config import choose_block
        from backend.domains.memory import decay

        ctx = await self.context(person)
        cpu = self.meter.read()
        own = time.thread_time_ns()
        started = time.perf_counter()
        async with self.sessions() as db, db.begin():
            await use_org(db, ctx.org_id)  # row-level security: as every request's transaction begins
            built = await injection.build(db, ctx.scope, decay.half_lives(ctx.org, ctx.principal.key),
                                          choose_block(ctx.principal, ctx.scope, None), turn_input=INPUT,
                                          max_budget=ctx.settings.injection_max_budget_tokens)
        total = (time.perf_counter() - started) * 1000
        own_ms = (time.thread_time_ns() - own) / 1e6
        _, pg_ms = self.meter.since(cpu)
        return Sample(total_ms=total, cpu_ms=own_ms, pg_cpu_ms=pg_ms), built

    def body(self, mode: str, who: str, person: str) -> dict[str, Any]:
        body: dict[str, Any] = {"model": MODEL, "input": INPUT, "tools": [{"type": "tool", "name": self.write_tool}]}
        if mode == "continue":
            threads = self.meta["who"][who]["threads"]
            n = self.rotation.get(who, 0)
            self.rotation[who] = n + 1
            body["thread_id"] = threads[n % len(threads)]
        return body

    async def turn(self, mode: str, who: str, person: str) -> tuple[Sample | None, str | None, dict[str, Any]]:
        """One turn; (sample, None) when the answer is right, (None, why) when it is not."""
        self.count += 1
        self.model.reset()
        self.model.handled_ms.clear()
        if mode == "tool":
            args = {"type": "preference", "text": f"Prefers tea at meeting number {self.count} of the bench"}
            self.model.reply(tool_calls=[(self.write_tool, args)]).reply(REPLY)
        else:
            self.model.reply(REPLY)
        body = self.body(mode, who, person)
        headers = {"X-Core-Subject": json.dumps({"id": person})}
        cpu = self.meter.read()
        started = time.perf_counter()
        response = await self.http.post("/responses", json=body, headers=headers)
        total = (time.perf_counter() - started) * 1000
        product_ms, pg_ms = self.meter.since(cpu)
        info: dict[str, Any] = {}
        if response.status_code != 201:
            return None, f"HTTP {response.status_code}: {response.text[:300]}", info
        doc = response.json()
        if doc.get("status") != "completed":
            return None, f"status {doc.get('status')}: {doc.get('error')}", info
        if doc.get("output_text") != REPLY:
            return None, f"output_text {doc.get('output_text')!r}", info
        rounds = 2 if mode == "tool" else 1
        if len(self.model.requests) != rounds:
            return None, f"{len(self.model.requests)} model requests, not {rounds}", info
        info["messages"] = len(self.model.requests[0]["messages"])
        if mode == "tool":
            kinds = [i["type"] for i in doc["output"]]
            if kinds != ["function_call", "function_call_output", "message"]:
                return None, f"tool turn output {kinds}", info
            written = json.loads(doc["output"][1]["output"] or "{}")
            if written.get("action") != "created":
                return None, f"the write tool answered {doc['output'][1]}", info
            await self._forget(written["memory_id"])
        read = await self.http.get(f"/responses/{doc['id']}", headers=headers)
        if read.status_code != 200:
            return None, f"GET /responses/{{id}} answered {read.status_code}", info
        trace = read.json()["trace"]
        if trace["rounds"] != rounds:
            return None, f"trace rounds {trace['rounds']}", info
        info["injected_ids"] = trace["injection"]["injected_ids"]
        timings = trace["timings"]
        sample = Sample(total_ms=total, cpu_ms=product_ms, pg_cpu_ms=pg_ms, model_ms=float(timings["model_ms"]),
                        trace_total_ms=float(timings["total_ms"]), server_ms=sum(self.model.handled_ms),
                        tool_ms=sum(float(t["ms"]) for t in trace["tools"]), lines=len(info["injected_ids"]))
        return sample, None, info

    async def key(self) -> tuple[Sample | None, str | None]:
        """GET /key, the cheapest authenticated request: a yardstick of how busy the machine is (compare with
        bench/results/http.md, measured on a quiet machine)."""
        cpu = self.meter.read()
        started = time.perf_counter()
        response = await self.http.get("/key")
        total = (time.perf_counter() - started) * 1000
        product_ms, pg_ms = self.meter.since(cpu)
        if response.status_code != 200:
            return None, f"GET /key answered {response.status_code}"
        return Sample(total_ms=total, cpu_ms=product_ms, pg_cpu_ms=pg_ms), None

    async def _forget(self, record_id: str) -> None:
        """The record a tool turn wrote goes at once (untimed), so every turn sees the same records."""
        from sqlalchemy import text

        from backend.db.tenant import use_org

        async with self.sessions() as db, db.begin():
            await use_org(db, self.meta["org_id"])
            await db.execute(text("DELETE FROM memory_records WHERE org_id = :o AND id = :i"),
                             {"o": self.meta["org_id"], "i": record_id})

    async def check(self, who: str, person: str) -> None:
        """Before measuring: the turns inject exactly the block the builder builds for the same key, person and
        input, and a continued thread sends its history."""
        _, built = await self.build(person)
        expected = built.block.injected_ids if built.block else []
        if not expected:
            raise InvalidRun(f"the builder injects nothing for {person}; the comparison would be empty")
        for mode in TURNS:
            sample, wrong, info = await self.turn(mode, who, person)
            if sample is None:
                raise InvalidRun(f"the first {mode} turn for {person} was wrong: {wrong}")
            if info["injected_ids"] != expected:
                raise InvalidRun(f"the {mode} turn for {person} injected other records than the builder: "
                                 f"{info['injected_ids']} against {expected}")
            if mode == "continue" and info["messages"] < HISTORY + 2:
                raise InvalidRun(f"a continued thread sent {info['messages']} messages, not its {HISTORY} items, "
                                 "the block and the input")

    async def run(self, repeat: int, warmup: int) -> Results:
        results = Results()
        who = {name: value["person"] for name, value in self.meta["who"].items()}
        for name, person in who.items():
            await self.check(name, person)
            for _ in range(warmup):
                for mode in MODES:
                    await self.one(results, name, person, mode, keep=False)
        print(f"warm-up done ({warmup} rounds per person and mode); measuring {repeat} rounds", flush=True)
        order = list(MODES)
        for rep in range(repeat):
            for name, person in who.items():
                for mode in order[rep % len(order):] + order[:rep % len(order)]:
                    await self.one(results, name, person, mode, keep=True)
            if (rep + 1) % max(repeat // 10, 1) == 0:
                line = ", ".join(f"{n} {m} {results.p50(n, m, 'platform_ms' if m in TURNS else 'total_ms'):.1f}"
                                 for n in who for m in MODES)
                print(f"round {rep + 1}/{repeat}: p50 so far (platform / build ms): {line}", flush=True)
        return results

    async def plans(self, who: str) -> dict[str, Plan]:
        """EXPLAIN (ANALYZE, BUFFERS) of the statements a continue turn of `who` spends its database time in, once after
        the timings (bench/plans.py): the turn as `turns.service.run` runs it (`accept`: the thread checked, the input
        kept; `prepare`: the history read, the memory block built (in the serving process on a session of its own while
        the turn is accepted; here, with one pooled connection, in the turn's session); the model's round, from the
        scripted server; `finish`: the answer and the response kept), for the same key, person and input, on the
        application's role with the key's organisation set, each statement explained where the turn runs it. In one
        transaction, rolled back, where the route commits between its steps."""
        import msgspec

        from backend import contexts
        from backend.db.engine import make_engine, make_sessionmaker
        from backend.domains.turns import loop
        from backend.domains.turns import repository as turns_repo
        from backend.domains.turns import service as turns
        from shared.schemas.turns import ResponseCreate

        person = self.meta["who"][who]["person"]
        body = msgspec.convert(self.body("continue", who, person), ResponseCreate)
        wanted = [
            Wanted("the thread: `threads.repository.get_thread`, the continued thread with what the request may do "
                   "in it (`accept`, through `threads.service.visible_thread`)", starting("SELECT threads.")),
            Wanted("the turn accepted: `turns.repository.accept` (`_ACCEPT`), the response inserted with the "
                   "thread's next positions taken and the input inserted there, in one statement (`accept`)",
                   exactly(turns_repo._ACCEPT[False].sql)),
            Wanted("the history: `threads.repository.list_items`, the thread's items before the input, newest "
                   "first, which the model is sent (`prepare`)", lambda sql: sql.startswith("SELECT thread_items.")
                   and "ORDER BY thread_items.position DESC" in sql),
            Wanted(f"the memory block's candidates: `injection.repository.candidates_statement`, every section of "
                   f"the block in one statement, as `injection.service.build` runs it for the turn (explained here in "
                   f"the turn's own session: with one pooled connection a turn does not read it apart, "
                   f"turns/block_ahead.py) for {person} and the turn's input; the statement the build spends its time "
                   f"in",
                   starting("SELECT candidates.")),
            Wanted("the response kept: `turns.repository._FINISH_APPENDING`, its status, output and trace, with "
                   "the answer appended to the thread as `_APPEND` does and the usage rows of its model calls, in one "
                   "statement (`finish`; the recall counts are written later, with other turns', by "
                   "`memory.recall_tally`)", exactly(turns_repo._FINISH_APPENDING.sql)),
        ]

        async def turn(db: Any) -> None:
            self.model.reset()
            self.model.reply(REPLY)
            ctx = await contexts.for_credential(db, self.settings, authorization=f"Bearer {self.meta['key']}",
                                                subject_header=json.dumps({"id": person}))
            accepted = await turns.accept(turns.with_user(ctx, body.user), body, None)
            assert not isinstance(accepted, dict), "no Idempotency-Key: never a replay"
            await turns.prepare(accepted)
            await loop.run(accepted)
            await turns.finish(accepted, None)

        engine = make_engine(self.url, pool_size=1)  # the application's role, as `coremem serve`'s
        try:
            return await rolled_back(make_sessionmaker(engine), wanted, turn)
        finally:
            await engine.dispose()

    async def one(self, results: Results, who: str, person: str, mode: str, keep: bool) -> None:
        sample: Sample | None
        wrong = None
        if mode == "build":
            sample, _ = await self.build(person)
        elif mode == "key":
            sample, wrong = await self.key()
        else:
            sample, wrong, _ = await self.turn(mode, who, person)
        if not keep:
            return
        if sample is None:
            results.wrong.setdefault((who, mode), []).append(str(wrong))
        else:
            results.samples.setdefault((who, mode), []).append(sample)


async def measure(url: str, meta: dict[str, Any], logs: Path, repeat: int, warmup: int, servers: list[Server],
                  pgdata: Path | None) -> tuple[Results, dict[str, Any]]:
    import httpx

    model, model_server, model_thread = start_model()
    try:
        product = start_product(url, logs)
        servers.append(product)
        with httpx.Client(base_url=product.base, timeout=60) as api:
            token = _api(api, "POST", "/admin/login", 200, json={"email": meta["admin_email"],
                                                           "password": meta["admin_password"]})["token"]
            _api(api, "POST", "/admin/models", 201, headers={"Authorization": f"Bearer {token}"},
                 json={"id": MODEL, "provider": "openai_compatible", "base_url": model.url})
        meter = CpuMeter(product.process.pid, pgdata)
        bench = Bench(meta, product, model, url, logs, meter)
        load_before = _load()
        try:
            results = await bench.run(repeat, warmup)
            load_after = _load()
            try:
                plans = await bench.plans("median")
            except Exception as exc:  # the timings stand without their plans
                plans = failed(exc)
        finally:
            await bench.close()
        if product.process.poll() is not None:
            raise InvalidRun(f"the product exited during the run:\n{product.tail()}")
        return results, {"load_before": load_before, "load_after": load_after, "cpu_measured": meter.available,
                         "plans": plans}
    finally:
        model_server.should_exit = True
        model_thread.join(timeout=10)


# ---------------------------------------------------------------- report

def machine(url: str) -> dict[str, str]:
    import psycopg

    cpu = "unknown CPU"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    with psycopg.connect(plain(url)) as conn:
        version = str((conn.execute("SHOW server_version").fetchone() or ["unknown"])[0])
    return {"cpu": cpu, "cores": str(os.cpu_count()), "python": f"{platform.python_implementation()} "
            f"{platform.python_version()}", "postgres": f"PostgreSQL {version}"}


WHAT = {"new": "new thread", "continue": "continues a thread", "tool": "memory write tool call",
        "build": "injection build alone", "key": "GET /key (yardstick)"}


def goal_lines(results: Results) -> list[str]:
    out = []
    for who in ("median", "heaviest"):
        build = results.p50(who, "build", "total_ms")
        for mode in TURNS:
            platform_p50 = results.p50(who, mode, "platform_ms")
            verdict = "PASS" if platform_p50 <= GOAL_MS else "FAIL"
            out.append(f"{verdict}: {who}, {mode} turn: platform p50 {platform_p50:.1f} ms (goal ≤ {GOAL_MS:g} ms)")
            ratio = platform_p50 / build
            verdict = "PASS" if ratio <= GOAL_RATIO else "FAIL"
            out.append(f"{verdict}: {who}, {mode} turn: platform p50 {platform_p50:.1f} ms = {ratio:.2f}× the build's "
                       f"p50 {build:.1f} ms (goal ≤ {GOAL_RATIO:g}×)")
    return out


def _quiet_key_p50() -> float | None:
    """GET /key's p50 at one connection in bench/results/http.md, when that file has it."""
    import re

    try:
        found = re.search(r"^\| c \| GET /key \|[^|]*\|[^|]*\| ([\d.]+) \|", (RESULTS.parent / "http.md").read_text(),
                          re.M)
    except OSError:
        return None
    return float(found.group(1)) if found else None


def render(results: Results, meta: dict[str, Any], info: dict[str, Any]) -> str:
    counted = meta["counted"]
    busy = max(float(info["load_before"].split(",")[0]), float(info["load_after"].split(",")[0])) > float(
        info["cores"])
    lines = [
        "# Turn overhead benchmark (TRN-1, issue 12)",
        "",
        f"Data: one organisation, one index (hashing embeddings, {DIMS} dims) of {counted['records']:,} memory records "
        f"owned by {meta['people']:,} people (Zipf 1.1; {counted['shared_records']:,} shared), mixed types, "
        f"{EMBEDDED:.0%} embedded; organisation decay on facts (180 d) and preferences (90 d); "
        f"{counted['threads']:,} threads with {counted['items']:,} messages (10% shared, 2 to 30 items; each "
        f"measured person also owns {OWN_THREADS} threads of {HISTORY} items); seed {meta['seed']}. Organisation by "
        "`orgs.service.bootstrap`, index and key (capabilities knowledge, memory, threads, tooling; injection "
        "block on the index with its defaults; the write tool offered) through the API, the bulk by COPY. "
        f"Measured people: median {meta['who']['median']['person']} ({meta['who']['median']['records']:,} records) "
        f"and heaviest {meta['who']['heaviest']['person']} ({meta['who']['heaviest']['records']:,} records).",
        f"Machine: **a shared {info['cores']}-core machine**, {info['cpu']}, {info['python']}, {info['postgres']} "
        f"(embedded, pgserver). Load average {info['load_before']} before, {info['load_after']} after"
        + (": above the core count, so other work shared the machine and absolute times are inflated and noisy (the "
           "build and the turns were interleaved, so their ratio is fairer; CPU times below leave out the waiting "
           "for a CPU)" if busy else "") + f". Product at {info['revision']}. Run {info['at']}.",
        f"Method: `python -m bench.turns{info['args']}`. The product is `coremem serve` (one process, one worker); the "
        "scripted OpenAI-compatible server of the tests (tests/model_server.py) runs under uvicorn in a thread of "
        "the benchmark's process and answers at once with a short reply (the tool turn: a write tool call, then "
        f"the reply). Input of every turn and of the build: \"{INPUT}\"; every turn offers the write tool. "
        f"{info['warmup']} warm-up rounds, then {info['repeat']} rounds; each round runs, for each person, the five "
        "modes (the three turns, the build and GET /key as a yardstick of how busy the machine was) in a rotating "
        "order. A turn is timed from sending POST /responses to its answer over loopback HTTP "
        "(keep-alive, through bench/lean_http.py: a client library's own work is not the platform's) and "
        "counts only when it answers 201 with `status: \"completed\"`, the scripted reply, the "
        "expected model rounds (and, for the tool turn, the created record). Model time: the trace's `model_ms` "
        "(GET /responses/{id}, untimed; the provider call, which includes the OpenAI SDK's work and the loopback "
        "round trip). Platform time = total − model time. Build: `injection.service.build` as the turn calls it "
        "on a session of its own (turns/block_ahead.py; same key, person and input), timed from opening the "
        "session to the commit, in the benchmark's process. Before measuring, each person's first turns were "
        "checked to inject exactly the records the builder returns and a continued thread to send its history. The "
        "record a tool turn writes is deleted after its turn (untimed); before the run the data set is restored as "
        "built.",
    ]
    passes = -(-(info["repeat"] + info["warmup"] + 1) // OWN_THREADS)
    history = f"{HISTORY}" if passes == 1 else f"{HISTORY} to {HISTORY + 2 * (passes - 1)}"
    lines.append(f"A continue turn goes to the person's next thread of the {OWN_THREADS}; each was continued "
                 f"{'once' if passes == 1 else f'up to {passes} times'}, so the history it read held {history} items.")
    wrong = sum(len(v) for v in results.wrong.values())
    lines.append(f"Wrong answers: {wrong}" + (" (left out of the numbers)." if wrong else "."))
    key_p50 = statistics.median(results.values("median", "key", "total_ms") + results.values("heaviest", "key",
                                                                                              "total_ms"))
    quiet = _quiet_key_p50()
    lines.append(f"Yardstick: GET /key answered in {key_p50:.2f} ms (p50) during this run"
                 + (f"; bench/results/http.md measured {quiet:.2f} ms on a quiet machine (1 connection), so "
                    f"requests here took about {key_p50 / quiet:.1f}× as long." if quiet else "."))
    for who in ("median", "heaviest"):
        person = meta["who"][who]
        build = results.p50(who, "build", "total_ms")
        lines += ["", f"## {who.capitalize()} person ({person['person']}, {person['records']:,} records)", "",
                  "Times in ms.", "",
                  "| mode | what | n | total p50 | total p95 | model p50 | model p95 | platform p50 | platform p95 | "
                  "platform ÷ build (p50) | trace platform p50 | model server p50 | tool p50 | block lines |",
                  "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
        for mode in MODES:
            n = len(results.values(who, mode, "total_ms"))
            if mode not in TURNS:
                lines.append(f"| {mode} | {WHAT[mode]} | {n} | {results.p50(who, mode, 'total_ms'):.1f} | "
                             f"{results.p95(who, mode, 'total_ms'):.1f} | | | | | | | | | |")
                continue
            trace_platform = statistics.median(s.trace_total_ms - s.model_ms
                                               for s in results.samples.get((who, mode), [])) if n else float("nan")
            tool = f"{results.p50(who, mode, 'tool_ms'):.1f}" if mode == "tool" else ""
            lines.append(
                f"| {mode} | {WHAT[mode]} | {n} | {results.p50(who, mode, 'total_ms'):.1f} | "
                f"{results.p95(who, mode, 'total_ms'):.1f} | {results.p50(who, mode, 'model_ms'):.1f} | "
                f"{results.p95(who, mode, 'model_ms'):.1f} | {results.p50(who, mode, 'platform_ms'):.1f} | "
                f"{results.p95(who, mode, 'platform_ms'):.1f} | "
                f"{results.p50(who, mode, 'platform_ms') / build:.2f}× | {trace_platform:.1f} | "
                f"{results.p50(who, mode, 'server_ms'):.2f} | {tool} | {int(results.p50(who, mode, 'lines'))} |")
        if info["cpu_measured"]:
            build_cpu = results.p50(who, "build", "all_cpu_ms")
            lines += ["", "CPU time in ms (what waiting for a CPU on the shared machine does not inflate):", "",
                      "| mode | product process p50 | PostgreSQL p50 | both p50 | both p95 | both ÷ build's (p50) |",
                      "| --- | ---: | ---: | ---: | ---: | ---: |"]
            for mode in MODES:
                both = results.p50(who, mode, "all_cpu_ms")
                lines.append(f"| {mode} | {results.p50(who, mode, 'cpu_ms'):.1f} | "
                             f"{results.p50(who, mode, 'pg_cpu_ms'):.1f} | {both:.1f} | "
                             f"{results.p95(who, mode, 'all_cpu_ms'):.1f} | {both / build_cpu:.2f}× |")
    lines += [
        "", "Columns: *total* as the client saw it; *model* the trace's `model_ms`; *platform* = total − model; "
        "*trace platform* = the trace's own `total_ms − model_ms` (from the turn's start after the request is read "
        "to just before the last writes: it leaves out HTTP, authentication, the final write and commit); "
        "*model server* the scripted server's own handling time of the turn's model requests (the rest of `model_ms` "
        "is the OpenAI SDK and the loopback round trip); *tool* the trace's time of the write tool call. "
        "CPU time: the scheduler's count of time on a CPU (/proc/<pid>/task/*/schedstat) of the product process "
        "(for a turn: everything it did for the request, the OpenAI SDK's work included) or, for the build, of the "
        "benchmark's thread that ran it, and of all PostgreSQL processes, read before and after each operation.",
        "", "## Goals (issue 12: platform time per turn p50 ≤ 25 ms and ≤ 2× the injection build alone)", ""]
    lines += [f"- {line}" for line in goal_lines(results)]
    if results.wrong:
        lines += ["", "## Wrong answers", ""]
        for (who, mode), reasons in sorted(results.wrong.items()):
            lines.append(f"- {who} {mode}: {len(reasons)} (first: {reasons[0]})")
    median = meta["who"]["median"]["person"]
    lines += ["", *section(info["plans"], f"A continue turn of the median person ({median}), after the timings, in "
                           "the benchmark's process with the product's code: `accept`, `prepare`, the model's round "
                           "(the scripted server) and `finish`, as `turns.service.run` runs them for the same key, "
                           "person and input, on the application's role with the key's organisation set, each "
                           "statement explained where the turn runs it (bench/plans.py). In one transaction rolled "
                           "back (the route commits between its steps).")]
    return "\n".join(lines)


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--records", type=int, default=RECORDS)
    parser.add_argument("--threads", type=int, default=THREADS)
    parser.add_argument("--repeat", type=int, default=100, help="measured rounds (default 100)")
    parser.add_argument("--warmup", type=int, default=5, help="warm-up rounds (default 5)")
    parser.add_argument("--rebuild", action="store_true", help="regenerate the data set")
    parser.add_argument("--pgdata", default=str(PGDATA), help="where the embedded server keeps its data")
    parser.add_argument("--out", default=str(RESULTS), help="the results file (default bench/results/turns.md)")
    args = parser.parse_args()
    if args.threads < 2 * OWN_THREADS + 1:
        parser.error(f"--threads must be more than {2 * OWN_THREADS}")
    warnings.simplefilter("ignore")
    import logging

    logging.basicConfig(level=logging.WARNING)
    for noisy in ("httpx", "pgserver", "coremem", "uvicorn"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    os.chdir(REPO)
    signal.signal(signal.SIGTERM, _interrupt)  # make interrupted: unwind, so the servers below are stopped
    pgdata = Path(args.pgdata)
    logs = pgdata.parent / "bench-turns"
    logs.mkdir(parents=True, exist_ok=True)
    url, pg = open_database(pgdata)
    servers: list[Server] = []
    try:
        meta = build(url, logs, args.rebuild, args.records, args.threads)
        restore(url, meta)
        revision = _revision()
        results, loads = asyncio.run(measure(url, meta, logs, args.repeat, args.warmup, servers,
                                             pgdata if pg is not None else None))
        turns = sum(len(results.values(w, m, "total_ms")) for w in ("median", "heaviest") for m in TURNS)
        wrong = sum(len(v) for v in results.wrong.values())
        if wrong > SERVER_ERRORS_ALLOWED * (turns + wrong):
            raise InvalidRun(f"{wrong} of {turns + wrong} turns answered wrongly: {dict(results.wrong)}")
        given = [f"--{name} {value}" for name, value, default in (
            ("records", args.records, RECORDS), ("threads", args.threads, THREADS), ("repeat", args.repeat, 100),
            ("warmup", args.warmup, 5)) if value != default]
        info = {**machine(url), **loads, "revision": revision, "repeat": args.repeat, "warmup": args.warmup,
                "at": datetime.now(UTC).isoformat(timespec="seconds"), "args": "".join(" " + g for g in given)}
        report = render(results, meta, info)
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(report)
        samples = {f"{who} {mode}": [vars(x) for x in found] for (who, mode), found in results.samples.items()}
        (logs / "samples.json").write_text(json.dumps(samples))
        print()
        print(report)
        print(f"saved to {out}")
    except InvalidRun as exc:
        print(f"\nINVALID RUN: {exc}", file=sys.stderr, flush=True)
        sys.exit(2)
    finally:
        for server in reversed(servers):
            server.stop()
        with contextlib.suppress(Exception):
            if "meta" in locals():
                restore(url, meta)
        if pg is not None:
            pg.cleanup()
    sys.exit(0)


if __name__ == "__main__":
    main()
