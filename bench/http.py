"""HTTP request-path benchmark: the product's routes against bare Litestar running hand-written SQL, with wrk.

The product runs as users start it (`coremem serve`, one uvicorn worker) and the baseline as a second uvicorn
process (`bench.http_baseline`, one worker) on the same database, engine and pool settings. wrk measures
requests/s over loopback at 1 and at 8 connections, all scenarios interleaved in one run:

    (a)        bare Litestar answering the bytes GET /key answers
    (b-key)    bare handler: the key document by the SHA-256 of its secret, one statement
    (b-memory) bare handler: key check and the person's page of records, one statement
    (b-search) bare handler: key check, slice of history and the person's page of hits with snippets, one statement
    (c)        GET /key
    (d)        GET /memory?index_id=…&limit=12 for a person (X-Core-Subject)
    (e)        GET /thread-items?q=… for the person
    (f)        POST /memory, a fact for the person (201)
    (g)        bare handler: key check, the same INSERT into memory_records and memory_versions, commit (201)
    (c0 … f0)  c … f against a second product on a copy of the database whose tables have row-level security
               switched off (issue 17 item 11): the same code and login, so (c)/(c0) is what the policies cost

The writes, (f) and (g), go to a second organisation made the same way, so the reads see the same records in
every round; what they wrote is deleted before and after the run. Before measuring, each baseline's answer is
compared with the product's (same JSON; for the write, the same stored rows), and every wrk run counts each
answer whose status is not the expected one: one such answer, a socket error or a "Non-2xx or 3xx responses"
line makes the run invalid (exit code 2). Goals are reported PASS/FAIL; a failed goal still exits 0 (this is a
report, not a test). After the timings the report shows the `EXPLAIN (ANALYZE, BUFFERS)` of the statements each
scenario runs (`take_plans`, bench/plans.py).

    make bench-http                  # builds the data set once (kept in .coremem/bench-http-pg)
    python -m bench.http --quick     # one round of 2 s per scenario, for development
    python -m bench.http --rebuild   # regenerate the data set

Results are printed and written to bench/results/http.md. Not part of `make test`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import io
import json
import os
import platform
import random
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.plans import Plan, Wanted, exactly, explain_text, failed, rolled_back, section, starting

SEED = 20261204
DATA_VERSION = 2
DATABASE = "coremem_bench_http"
UNPROTECTED = DATABASE + "_no_rls"  # the copy the second product serves, row-level security off
PGDATA = Path(".coremem/bench-http-pg")
RESULTS = Path(__file__).parent / "results" / "http.md"
REPO = Path(__file__).resolve().parent.parent
SECRET = "bench-http-secret-" + "x" * 32
ORG, WRITES_ORG = "Bench HTTP", "Bench HTTP writes"
PERSON = "anna"
OTHERS = 2_000  # other people with records in the same index
OTHER_RECORDS = 50_000
ANNA_RECORDS = 20
SHARED_RECORDS = 10
PAGE = 12
THREADS = {"anna": 30, "shared": 20, "others": 250}
WORD = "terugbetaling"  # the word (e) searches; about one message in five holds it
WRITE_TEXT = "Anna takes her coffee black, no sugar."
CONNECTIONS = (1, 8)
GOALS = (("d", "b-memory", 0.6), ("c", "b-key", 0.8), ("f", "g", 0.5))

_VOCABULARY = ("de het een en van ik je dat is niet op te met voor maar wat als bij nog ook aan om kan wel dan "
               "terugbetaling factuur bestelling levering klant vraag antwoord verhuizing kantoor rekening betaling "
               "adres pakket week morgen vandaag graag bedankt probleem formulier contract salaris vakantie koffie "
               "thee afspraak telefoon bericht wachtwoord account the of and to in you that it for on with refund "
               "invoice order delivery meeting office payment address tomorrow today please thanks problem")
VOCABULARY = _VOCABULARY.split()
_FACTS = ("lives in {city}", "works at the {dept} department", "prefers {drink} in the morning",
          "has a meeting on {day}", "is allergic to {thing}", "speaks {lang} at home", "drives a {colour} car",
          "asked about the {thing} invoice", "moved to {city} last year", "likes {drink} without sugar")
_FILL = {name: words.split() for name, words in {
    "city": "Amsterdam Utrecht Rotterdam Leiden Delft Zwolle Breda Haarlem",
    "dept": "payroll finance sales support legal research", "drink": "tea coffee water juice cocoa",
    "day": "Monday Tuesday Wednesday Thursday Friday", "thing": "nuts pollen dust cats gluten office",
    "lang": "Dutch English French German", "colour": "red blue green black white"}.items()}


class InvalidRun(RuntimeError):
    """The measurement cannot be trusted (a wrong status, a socket error, a baseline that answers differently)."""


def _fact(rng: random.Random, who: str) -> str:
    template = rng.choice(_FACTS)
    return f"{who} " + template.format(**{k: rng.choice(v) for k, v in _FILL.items()})


def _sentence(rng: random.Random) -> str:
    return " ".join(rng.choice(VOCABULARY) for _ in range(rng.randint(8, 20)))


def _copy_text(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")


# ---------------------------------------------------------------- processes

def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Server:
    """A uvicorn process this benchmark started (and stops, by its pid)."""

    name: str
    port: int
    process: subprocess.Popen[bytes]
    log: Path

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)  # uvicorn shuts down gracefully (lifespan, pool) on SIGINT
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)


def start_server(name: str, command: list[str], env: dict[str, str], port: int, probe: str, logs: Path,
                 headers: dict[str, str] | None = None) -> Server:
    import httpx

    log = logs / f"{name}.log"
    sink = log.open("wb")
    process = subprocess.Popen(command, cwd=REPO, env=env, stdout=sink, stderr=subprocess.STDOUT,
                               stdin=subprocess.DEVNULL)
    sink.close()
    server = Server(name, port, process, log)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise InvalidRun(f"{name} exited with {process.returncode} while starting:\n{server.tail()}")
        try:
            if httpx.get(server.base + probe, headers=headers or {}, timeout=2).status_code == 200:
                return server
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    server.stop()
    raise InvalidRun(f"{name} did not answer {probe} within 120 s:\n{server.tail()}")


def start_product(url: str, logs: Path, name: str = "product") -> Server:
    """`coremem serve --host 127.0.0.1 --port P`, exactly as a user starts it, on the benchmark's database."""
    port = _free_port()
    env = {**os.environ, "CORE_DATABASE_URL": url, "CORE_DATA_DIR": str(logs), "CORE_SECRET": SECRET}
    coremem = str(Path(sys.executable).parent / "coremem")
    return start_server(name, [coremem, "serve", "--host", "127.0.0.1", "--port", str(port)], env, port,
                        "/health", logs)


def start_baseline(url: str, logs: Path, key_body: Path, key_type: str, secret: str) -> Server:
    port = _free_port()
    env = {**os.environ, "CORE_DATABASE_URL": url, "BENCH_HTTP_KEY_BODY": str(key_body),
           "BENCH_HTTP_KEY_TYPE": key_type}
    command = [sys.executable, "-m", "uvicorn", "bench.http_baseline:app", "--host", "127.0.0.1", "--port",
               str(port), "--log-level", "info", "--no-access-log"]  # as `coremem serve` runs the product
    return start_server("baseline", command, env, port, "/key", logs, {"Authorization": f"Bearer {secret}"})


# ---------------------------------------------------------------- database and data set

def plain(url: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def open_database(pgdata: Path) -> tuple[str, Any]:
    """CORE_DATABASE_URL when set, else an embedded server of its own in `pgdata` (like bench/search.py)."""
    if os.environ.get("CORE_DATABASE_URL"):
        return os.environ["CORE_DATABASE_URL"], None
    from backend.db.embedded import ensure_database, socket_url, start_server

    server = start_server(pgdata, cleanup_mode="stop")
    ensure_database(server, DATABASE)
    return socket_url(pgdata, DATABASE), server


def _bootstrap(url: str, org_name: str, admin_email: str = "bench-http@bench.local", secret: str = SECRET
               ) -> dict[str, Any]:
    """`coremem bootstrap`'s service: the organisation, its administrator and a key whose policy permits writes
    (an existing administrator is reused with a fresh password)."""
    import asyncio

    from backend.db.engine import make_engine, make_sessionmaker
    from backend.domains.orgs import service

    async def go() -> dict[str, Any]:
        engine = make_engine(url, pool_size=1, app_role=False)
        try:
            async with make_sessionmaker(engine)() as db, db.begin():
                return await service.bootstrap(db, org_name=org_name, admin_email=admin_email,
                                               secret=secret, key_retention_days=400, ttl_seconds=3600)
        finally:
            await engine.dispose()

    return asyncio.run(go())


def _api(client: Any, method: str, path: str, expected: int, subject: str | None = None,
         headers: dict[str, str] | None = None, **kwargs: Any) -> Any:
    headers = {**(headers or {}), **({"X-Core-Subject": json.dumps({"id": subject})} if subject else {})}
    response = client.request(method, path, headers=headers, **kwargs)
    if response.status_code != expected:
        raise InvalidRun(f"{method} {path} answered {response.status_code}, not {expected}: {response.text}")
    return response.json()


def _copy_others(conn: Any, rng: random.Random, org_id: str, index_id: str, count: int) -> None:
    """Other people's records, with the columns and values POST /memory writes (ids minted now, in order)."""
    from backend.domains.memory.rules import norm_hash
    from backend.ids import new_id

    buf = io.StringIO()
    for _ in range(count):
        owner = f"person{rng.randrange(OTHERS):04d}"
        kind = rng.choices(("fact", "preference", "behaviour"), weights=(6, 3, 1))[0]
        text = _fact(rng, owner)
        buf.write("\t".join([org_id, new_id("mem"), index_id, owner, kind, _copy_text(text), norm_hash(text), "{}",
                             "{}", "1.0", "api", "f", "{}", "normal"]) + "\n")
    with conn.cursor() as cur, cur.copy("COPY memory_records (org_id, id, index_id, subject, type, text, norm_hash, "
                                        "metadata, labels, confidence, source, verified, tags, priority) "
                                        "FROM STDIN") as copy:
        copy.write(buf.getvalue())


def build(url: str, logs: Path, rebuild: bool) -> dict[str, Any]:
    """Create (or reuse) the data set: through the product's bootstrap and API, the bulk by COPY."""
    import httpx
    import psycopg

    from backend.db import migrate

    migrate.upgrade(url)
    conn = psycopg.connect(plain(url), autocommit=True)
    conn.execute("CREATE TABLE IF NOT EXISTS bench_meta (key text PRIMARY KEY, value jsonb)")
    row = conn.execute("SELECT value FROM bench_meta WHERE key = 'http'").fetchone()
    if row and not rebuild and row[0].get("seed") == SEED and row[0].get("version") == DATA_VERSION:
        found = conn.execute("SELECT 1 FROM api_keys WHERE id = %s AND revoked_at IS NULL",
                             (row[0]["key_id"],)).fetchone()
        if found:
            print(f"reusing the data set in {DATABASE} (built {row[0]['built_at']})", flush=True)
            conn.close()
            return dict(row[0])
    started = time.monotonic()
    rng = random.Random(SEED)
    print("building the data set …", flush=True)
    # Everything of the organisations goes with them (foreign keys cascade); the administrator is shared.
    conn.execute("DELETE FROM orgs WHERE name IN (%s, %s)", (ORG, WRITES_ORG))
    conn.execute("DELETE FROM bench_meta WHERE key = 'http'")
    boot = _bootstrap(url, ORG)
    org_id, key = boot["org_id"], boot["key"]
    writes = _bootstrap(url, WRITES_ORG)
    product = start_product(url, logs)
    try:
        with httpx.Client(base_url=product.base, headers={"Authorization": f"Bearer {key}"}, timeout=60) as api:
            index_id = _api(api, "POST", "/indexes", 201, json={"name": "bench-http"})["id"]
            writes_id = _api(api, "POST", "/indexes", 201, json={"name": "bench-http-writes"},
                             headers={"Authorization": f"Bearer {writes['key']}"})["id"]
            # Her records and the shared ones arrive between batches of everyone else's, so the ids (time
            # ordered) interleave and her newest page lies among thousands of other people's records.
            batches = 5
            per_batch = OTHER_RECORDS // (batches + 1)
            for batch in range(batches + 1):
                _copy_others(conn, rng, org_id, index_id, per_batch if batch < batches
                             else OTHER_RECORDS - per_batch * batches)
                if batch == batches:
                    break
                for _ in range(ANNA_RECORDS // batches):
                    _api(api, "POST", "/memory", 201, subject=PERSON,
                         json={"index_id": index_id, "type": rng.choice(("fact", "preference")),
                               "text": _fact(rng, "Anna")})
                for _ in range(SHARED_RECORDS // batches):
                    _api(api, "POST", "/memory", 201, json={"index_id": index_id, "type": "fact",
                                                             "text": _fact(rng, "The office")})
                print(f"  records: batch {batch + 1} of {batches + 1}", flush=True)
            # The versions POST /memory would have written for the bulk.
            conn.execute("""INSERT INTO memory_versions (org_id, record_id, version, at, action, actor_type, actor_id,
                                text, metadata, labels, confidence, tags, priority, expires_at, status, verified,
                                commitment)
                            SELECT r.org_id, r.id, r.version, r.created_at, 'created', 'key', %s, r.text, r.metadata,
                                   r.labels, r.confidence, r.tags, r.priority, r.expires_at, r.status, r.verified,
                                   r.commitment
                            FROM memory_records r WHERE r.org_id = %s AND NOT EXISTS (
                              SELECT 1 FROM memory_versions v WHERE v.org_id = r.org_id AND v.record_id = r.id)""",
                         (boot["key_id"], org_id))
            owners = ([PERSON] * THREADS["anna"] + [None] * THREADS["shared"]
                      + [f"person{rng.randrange(OTHERS):04d}" for _ in range(THREADS["others"])])
            rng.shuffle(owners)
            for n, owner in enumerate(owners, 1):
                items = [{"type": "message", "role": "user" if i % 2 == 0 else "assistant",
                          "content": _sentence(rng)} for i in range(rng.randint(4, 8))]
                _api(api, "POST", "/threads", 201, subject=owner, json={"metadata": {"bench": "http"},
                                                                        "items": items})
                if n % 100 == 0:
                    print(f"  threads: {n} of {len(owners)}", flush=True)
    finally:
        product.stop()
    conn.execute("VACUUM ANALYZE memory_records")
    conn.execute("VACUUM ANALYZE memory_versions")
    conn.execute("VACUUM ANALYZE threads")
    conn.execute("VACUUM ANALYZE thread_items")
    counts = conn.execute("""SELECT count(*), count(*) FILTER (WHERE subject = %s),
                                    count(*) FILTER (WHERE subject IS NULL), count(DISTINCT subject)
                             FROM memory_records WHERE org_id = %s AND index_id = %s""",
                          (PERSON, org_id, index_id)).fetchone()
    messages = conn.execute("SELECT count(*) FROM thread_items WHERE org_id = %s", (org_id,)).fetchone()
    hits = conn.execute("""SELECT count(*) FROM thread_items i JOIN threads t ON t.org_id = i.org_id
                             AND t.id = i.thread_id WHERE i.org_id = %s AND (t.subject = %s OR t.subject IS NULL)
                             AND i.tsv @@ websearch_to_tsquery('simple', %s)""", (org_id, PERSON, WORD)).fetchone()
    meta = {"seed": SEED, "version": DATA_VERSION, "org_id": org_id, "key": key, "key_id": boot["key_id"],
            "index_id": index_id, "writes_org_id": writes["org_id"], "writes_key": writes["key"],
            "writes_key_id": writes["key_id"], "writes_index_id": writes_id, "records": counts[0], "anna": counts[1],
            "shared": counts[2], "owners": counts[3], "threads": sum(THREADS.values()), "messages": messages[0],
            "word": WORD, "word_hits_for_anna": hits[0], "built_in_s": round(time.monotonic() - started),
            "built_at": datetime.now(UTC).isoformat(timespec="seconds")}
    conn.execute("INSERT INTO bench_meta VALUES ('http', %s::jsonb)", (json.dumps(meta),))
    conn.close()
    print(f"data set ready in {meta['built_in_s']} s", flush=True)
    return meta


def clear_writes(url: str, meta: dict[str, Any]) -> int:
    """Remove what (f) and (g) wrote. They write into an organisation of their own so that the reads see the same
    data in every round: thousands of her facts elsewhere in the organisation change what GET /memory's statement
    costs (its partner checks read every record she and the shared owner have there, when this was written)."""
    import psycopg

    with psycopg.connect(plain(url), autocommit=True) as conn:
        deleted = conn.execute("DELETE FROM memory_records WHERE org_id = %s AND index_id = %s",
                               (meta["writes_org_id"], meta["writes_index_id"])).rowcount
        conn.execute("VACUUM ANALYZE memory_records")
        conn.execute("VACUUM ANALYZE memory_versions")
    return deleted


def copy_without_rls(url: str) -> tuple[str, int]:
    """A copy of the data set (CREATE DATABASE … TEMPLATE) whose tables have row-level security switched off:
    the second product serves it with the same code and login, so the difference is the policies' cost."""
    import psycopg
    from sqlalchemy.engine import make_url

    source = make_url(plain(url))
    admin = source.set(database="postgres").render_as_string(hide_password=False)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{UNPROTECTED}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{UNPROTECTED}" TEMPLATE "{source.database}"')
    copy = make_url(url).set(database=UNPROTECTED).render_as_string(hide_password=False)
    with psycopg.connect(plain(copy), autocommit=True) as conn:
        tables = [r[0] for r in conn.execute("SELECT relname FROM pg_class WHERE relnamespace = 'public'::regnamespace "
                                             "AND relkind = 'r' AND relrowsecurity").fetchall()]
        for table in tables:
            conn.execute(f"ALTER TABLE {table} NO FORCE ROW LEVEL SECURITY")
            conn.execute(f"ALTER TABLE {table} DISABLE ROW LEVEL SECURITY")
        conn.execute("ANALYZE")
    return copy, len(tables)


# ---------------------------------------------------------------- scenarios and wrk

@dataclass(frozen=True)
class Scenario:
    name: str
    server: str  # "product", "unprotected" (the product on the copy without row-level security) or "baseline"
    method: str
    path: str
    what: str
    expected: int = 200
    subject: bool = False
    body: str | None = None
    credential: str = "key"  # the writes use the key of the second organisation, "writes_key"


def scenarios(meta: dict[str, Any]) -> list[Scenario]:
    memory = f"/memory?index_id={meta['index_id']}&limit={PAGE}"
    search = f"/thread-items?q={meta['word']}"
    write = json.dumps({"index_id": meta["writes_index_id"], "type": "fact", "text": WRITE_TEXT})
    return [
        Scenario("a", "baseline", "GET", "/static/key", "bare Litestar: GET /key's bytes, no database"),
        Scenario("b-key", "baseline", "GET", "/key", "bare handler, `KEY_SQL`"),
        Scenario("b-memory", "baseline", "GET", memory, "bare handler, `MEMORY_SQL`", subject=True),
        Scenario("b-search", "baseline", "GET", search, "bare handler, `SEARCH_SQL`", subject=True),
        # Each product scenario next to its twin without row-level security, so drift hits both alike.
        *[twin for s in product_scenarios(meta) for twin in (s, unprotected(s))],
        Scenario("g", "baseline", "POST", "/memory", "bare handler, `WRITE_SQL`", 201, True, write, "writes_key"),
    ]


def unprotected(s: Scenario) -> Scenario:
    return Scenario(f"{s.name}0", "unprotected", s.method, s.path, f"{s.what}, row-level security off", s.expected,
                    s.subject, s.body, s.credential)


def product_scenarios(meta: dict[str, Any]) -> list[Scenario]:
    memory = f"/memory?index_id={meta['index_id']}&limit={PAGE}"
    search = f"/thread-items?q={meta['word']}"
    write = json.dumps({"index_id": meta["writes_index_id"], "type": "fact", "text": WRITE_TEXT})
    return [
        Scenario("c", "product", "GET", "/key", "GET /key"),
        Scenario("d", "product", "GET", memory, f"GET /memory?index_id=…&limit={PAGE} for {PERSON}", subject=True),
        Scenario("e", "product", "GET", search, f"GET /thread-items?q={meta['word']} for {PERSON}", subject=True),
        Scenario("f", "product", "POST", "/memory", f"POST /memory, a fact for {PERSON}", 201, True, write,
                 "writes_key"),
    ]


def _lua_string(value: str) -> str:
    level = "=" * 4
    assert f"]{level}]" not in value
    return f"[{level}[{value}]{level}]"


def lua_script(s: Scenario, key: str) -> str:
    """wrk's request and a count of every answer whose status is not the expected one, over all threads."""
    headers = {"Authorization": f"Bearer {key}"}
    if s.subject:
        headers["X-Core-Subject"] = json.dumps({"id": PERSON})
    if s.body is not None:
        headers["Content-Type"] = "application/json"
    lines = [f"wrk.method = {_lua_string(s.method)}"]
    lines += [f"wrk.headers[ {_lua_string(k)} ] = {_lua_string(v)}" for k, v in headers.items()]
    if s.body is not None:
        lines.append(f"wrk.body = {_lua_string(s.body)}")
    lines.append(f"local expected = {s.expected}")
    lines.append("""
local threads = {}
function setup(thread) table.insert(threads, thread) end
bad = 0
first_bad = 0
function response(status, headers, body)
  if status ~= expected then
    bad = bad + 1
    if first_bad == 0 then first_bad = status end
  end
end
function done(summary, latency, requests)
  local total, first = 0, 0
  for _, t in ipairs(threads) do
    total = total + t:get("bad")
    local f = t:get("first_bad")
    if first == 0 and f ~= 0 then first = f end
  end
  local e = summary.errors
  io.write(string.format(
    "BENCH requests=%d duration_us=%d bad=%d first_bad=%d p50_us=%d p90_us=%d p99_us=%d "
    .. "connect=%d read=%d write=%d timeout=%d status=%d\\n",
    summary.requests, summary.duration, total, first, latency:percentile(50), latency:percentile(90),
    latency:percentile(99), e.connect, e.read, e.write, e.timeout, e.status))
end
""")
    return "\n".join(lines)


@dataclass
class Sample:
    rps: float
    p50_ms: float
    p99_ms: float
    requests: int


def run_wrk(s: Scenario, base: str, key: str, connections: int, seconds: int, scripts: Path) -> Sample:
    script = scripts / f"{s.name}.lua"
    script.write_text(lua_script(s, key))
    command = ["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "--latency", "--timeout", "10s", "-s",
               str(script), base + s.path]
    done = subprocess.run(command, capture_output=True, text=True, timeout=seconds + 60)
    out = done.stdout
    where = f"({s.name}, {connections} connection{'s' if connections > 1 else ''})"
    if done.returncode != 0:
        raise InvalidRun(f"wrk failed {where}: {done.stderr or out}")
    found = re.search(r"^BENCH (.*)$", out, re.M)
    if not found:
        raise InvalidRun(f"wrk printed no summary {where}:\n{out}\n{done.stderr}")
    v = {k: int(x) for k, x in (pair.split("=") for pair in found.group(1).split())}
    non2xx = re.search(r"Non-2xx or 3xx responses:\s*(\d+)", out)
    socket_errors = re.search(r"Socket errors:.*", out)
    problems = []
    if v["bad"]:
        problems.append(f"{v['bad']} answers were not {s.expected} (the first: {v['first_bad']})")
    if non2xx:
        problems.append(f"wrk: Non-2xx or 3xx responses: {non2xx.group(1)}")
    if v["status"] and not non2xx:
        problems.append(f"wrk counted {v['status']} answers with a status of 400 or more")
    if socket_errors or any(v[k] for k in ("connect", "read", "write", "timeout")):
        problems.append(socket_errors.group(0).strip() if socket_errors else "socket errors")
    if v["requests"] == 0:
        problems.append("no request completed")
    if problems:
        raise InvalidRun(f"invalid wrk run {where}: " + "; ".join(problems) + f"\n{out}")
    rps_line = re.search(r"Requests/sec:\s*([\d.]+)", out)
    rps = float(rps_line.group(1)) if rps_line else v["requests"] / (v["duration_us"] / 1e6)
    return Sample(rps, v["p50_us"] / 1000, v["p99_us"] / 1000, v["requests"])


# ---------------------------------------------------------------- same answers before measuring

def _difference(a: Any, b: Any, path: str = "") -> str | None:
    """Where two JSON values first differ, and how."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                return f"{path}.{k}: only in the {'product' if k in a else 'baseline'}"
            found = _difference(a[k], b[k], f"{path}.{k}")
            if found:
                return found
        return None
    if isinstance(a, list) and isinstance(b, list):
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            found = _difference(x, y, f"{path}[{i}]")
            if found:
                return found
        return None if len(a) == len(b) else f"{path}: {len(a)} items in the product, {len(b)} in the baseline"
    return None if a == b else f"{path or 'value'}: product {a!r}, baseline {b!r}"


def _same(what: str, product: Any, baseline: Any) -> None:
    found = _difference(product, baseline)
    if found:
        raise InvalidRun(f"the baseline does not answer like the product ({what}): {found}")


def check_equivalence(product: Server, baseline: Server, meta: dict[str, Any], url: str,
                      key_body: bytes, key_type: str) -> dict[str, Any]:
    """Each baseline returns what its product route returns; the write stores the same rows."""
    import httpx
    import psycopg

    auth = {"Authorization": f"Bearer {meta['key']}"}
    person = {**auth, "X-Core-Subject": json.dumps({"id": PERSON})}
    by = {s.name: s for s in scenarios(meta)}
    found: dict[str, Any] = {}
    with httpx.Client(timeout=30) as http:
        static = http.get(baseline.base + "/static/key", headers=auth)
        if static.content != key_body or static.headers["content-type"] != key_type:
            raise InvalidRun("(a) does not return GET /key's bytes and content type")
        for route, pb in (("key", "b-key"), ("memory", "b-memory"), ("search", "b-search")):
            s = by[pb]
            answers = [http.get(server.base + s.path, headers=person) for server in (product, baseline)]
            for answer in answers:
                if answer.status_code != 200:
                    raise InvalidRun(f"{s.path} answered {answer.status_code}: {answer.text}")
            _same(route, answers[0].json(), answers[1].json())
            found[route] = answers[0].json()
        rows = found["memory"]["data"]
        if len(rows) != PAGE:
            raise InvalidRun(f"GET /memory returned {len(rows)} records for {PERSON}, not {PAGE}")
        found["memory_hers"] = sum(r["subject"] == PERSON for r in rows)
        found["memory_shared"] = sum(r["subject"] is None for r in rows)
        if not found["search"]["data"]:
            raise InvalidRun(f"GET /thread-items?q={meta['word']} found nothing")
        written = []
        writer = {"Authorization": f"Bearer {meta['writes_key']}", "X-Core-Subject": json.dumps({"id": PERSON}),
                  "Content-Type": "application/json"}
        for server in (product, baseline):
            answer = http.post(server.base + "/memory", headers=writer, content=by["f"].body)
            if answer.status_code != 201:
                raise InvalidRun(f"POST /memory on the {server.name} answered {answer.status_code}: {answer.text}")
            written.append(answer.json())
    moment = {"id", "created_at", "updated_at"}
    _same("POST /memory answer", {k: v for k, v in written[0].items() if k not in moment},
          {k: v for k, v in written[1].items() if k not in moment})
    with psycopg.connect(plain(url)) as conn:
        stored = []
        for doc in written:
            record = conn.execute("SELECT * FROM memory_records WHERE org_id = %s AND id = %s",
                                  (meta["writes_org_id"], doc["id"])).fetchone()
            versions = conn.execute("SELECT * FROM memory_versions WHERE org_id = %s AND record_id = %s",
                                    (meta["writes_org_id"], doc["id"])).fetchall()
            names = [c.name for c in conn.execute("SELECT * FROM memory_records LIMIT 0").description]
            vnames = [c.name for c in conn.execute("SELECT * FROM memory_versions LIMIT 0").description]
            stored.append(({n: str(x) for n, x in zip(names, record, strict=True) if n not in moment},
                           [{n: str(x) for n, x in zip(vnames, v, strict=True) if n not in {"record_id", "at"}}
                            for v in versions]))
    _same("rows POST /memory stores", stored[0], stored[1])
    found["search_hits"] = len(found["search"]["data"])
    return found


def same_without_rls(product: Server, unprotected_product: Server, meta: dict[str, Any]) -> None:
    """The product on the copy without row-level security answers the reads exactly as the product does."""
    import httpx

    person = {"Authorization": f"Bearer {meta['key']}", "X-Core-Subject": json.dumps({"id": PERSON})}
    with httpx.Client(timeout=30) as http:
        for s in product_scenarios(meta):
            if s.method != "GET":
                continue
            answers = [http.get(server.base + s.path, headers=person) for server in (product, unprotected_product)]
            if any(a.status_code != 200 for a in answers):
                raise InvalidRun(f"{s.path} answered {[a.status_code for a in answers]}")
            bodies = [answer.json() for answer in answers]
            if s.path == "/key":
                # `last_used_at` is when each database's key was last used: the copy was made before the product's
                # first request of this run stamped the original's, so that moment alone may differ.
                for body in bodies:
                    body.pop("last_used_at")
            _same(f"({s.name}) with and without row-level security", *bodies)


# ---------------------------------------------------------------- plans

def _lists_page(sql: str) -> bool:
    """`repository.list_page`'s statement: a page of memory_records, newest id first."""
    return sql.startswith("SELECT memory_records.") and "ORDER BY memory_records.id DESC" in sql


async def take_plans(url: str, unprotected_url: str, meta: dict[str, Any], logs: Path) -> dict[str, Plan]:
    """EXPLAIN (ANALYZE, BUFFERS) of the statements each scenario runs, once after the timings (bench/plans.py).
    The product's as its routes run them (`contexts.for_credential`, then the route's service call) on the
    application's role with the key's organisation set, each statement explained where it runs, in a transaction
    rolled back; (c0) … (f0) the same on the copy without row-level security. The baselines' statements as the
    baseline runs them (the tables' owner), each in a transaction rolled back."""
    import hashlib

    import msgspec

    from backend import contexts
    from backend.access import repository as access
    from backend.config import settings_from_env
    from backend.db.engine import make_engine, make_sessionmaker
    from backend.domains.keys import service as keys
    from backend.domains.memory import reads, writes
    from backend.domains.memory import repository as memory
    from backend.domains.memory.rules import norm_hash
    from backend.domains.threads import searching
    from backend.ids import new_id
    from backend.params import Page
    from bench.http_baseline import HEADLINE_OPTIONS, KEY_SQL, MEMORY_SQL, SEARCH_PAGE, SEARCH_SQL, WRITE_SQL
    from shared.schemas.memory import MemoryCreate, MemoryQuery
    from shared.schemas.threads import ItemSearchQuery

    settings = settings_from_env({**os.environ, "CORE_DATABASE_URL": url, "CORE_DATA_DIR": str(logs),
                                  "CORE_SECRET": SECRET})  # as `start_product` starts the product
    person = json.dumps({"id": PERSON})
    credential = Wanted("the credential: `access.repository._KEY_BY_SECRET`, the key and its organisation by the "
                        "hash of the secret, setting the organisation for row-level security; GET /key's only "
                        "statement and the first of every request", exactly(access._KEY_BY_SECRET.sql))
    page = Wanted(f"the page: `memory.repository.list_page`, her records and the shared ones, newest id first, "
                  f"{PAGE} + 1 rows; the route's one statement after the credential", _lists_page)
    search = Wanted("the search: `threads.search_sql.search_items`, the 7-day slice and the page of hits with "
                    "their snippets in one statement; the route's one statement after the credential",
                    starting("WITH bounds AS MATERIALIZED"))
    index = Wanted("the index: `memory.repository.index_for_write`, the store with the erasure locks of the people "
                   "the record names", lambda sql: sql.startswith("SELECT indexes.")
                   and "pg_advisory_xact_lock_shared" in sql)
    insert = Wanted("the write: `memory.repository._INSERT_FRESH`, the record and its history version in one "
                    "statement; the route's main statement", exactly(memory._INSERT_FRESH.sql))

    async def own_key(ctx: Any) -> None:
        keys.own_key(ctx)

    async def memory_page(ctx: Any) -> None:
        await reads.list_records(ctx, msgspec.convert({"index_id": meta["index_id"]}, MemoryQuery),
                                 Page(None, PAGE))

    async def thread_search(ctx: Any) -> None:
        await searching.search(ctx, msgspec.convert({"q": meta["word"]}, ItemSearchQuery), Page())

    async def write(ctx: Any) -> None:
        await writes.create(ctx, msgspec.convert({"index_id": meta["writes_index_id"], "type": "fact",
                                                  "text": WRITE_TEXT}, MemoryCreate))

    async def request(db: Any, key: str, subject: str | None, route: Callable[[Any], Awaitable[None]]) -> None:
        ctx = await contexts.for_credential(db, settings, authorization=f"Bearer {meta[key]}", subject_header=subject)
        await route(ctx)

    routes = [("c", "key", None, [credential], own_key), ("d", "key", person, [page], memory_page),
              ("e", "key", person, [search], thread_search), ("f", "writes_key", person, [index, insert], write)]
    by_scenario: dict[str, dict[str, Plan]] = {}
    for database, suffix in ((url, ""), (unprotected_url, "0")):
        engine = make_engine(database, pool_size=1)  # the application's role, as `coremem serve`'s
        try:
            for name, key, subject, wanted, route in routes:
                by_scenario[name + suffix] = await rolled_back(
                    make_sessionmaker(engine), wanted, functools.partial(request, key=key, subject=subject,
                                                                         route=route))
        finally:
            await engine.dispose()
    owner = make_engine(url, pool_size=1, app_role=False)  # as bench/http_baseline.py's engine
    try:
        sessions = make_sessionmaker(owner)
        key_hash, writer_hash = (hashlib.sha256(meta[k].encode()).hexdigest() for k in ("key", "writes_key"))
        baselines = {
            "b-key": ("KEY_SQL", KEY_SQL, {"h": key_hash}),
            "b-memory": ("MEMORY_SQL", MEMORY_SQL, {"h": key_hash, "person": PERSON, "idx": meta["index_id"],
                                                    "n": PAGE + 1}),
            "b-search": ("SEARCH_SQL", SEARCH_SQL, {"h": key_hash, "person": PERSON, "q": meta["word"],
                                                    "hl": HEADLINE_OPTIONS, "n": SEARCH_PAGE + 1}),
            "g": ("WRITE_SQL", WRITE_SQL, {"h": writer_hash, "person": PERSON, "id": new_id("mem"),
                                           "idx": meta["writes_index_id"], "type": "fact", "text": WRITE_TEXT,
                                           "norm_hash": norm_hash(WRITE_TEXT)}),
        }
        for name, (constant, sql, params) in baselines.items():
            label = f"the bare handler's one statement, `{constant}` (bench/http_baseline.py)"
            by_scenario[name] = {label: await explain_text(sessions, sql, params)}
    finally:
        await owner.dispose()
    return {f"({s.name}) {label}": plan for s in scenarios(meta) for label, plan in by_scenario.get(s.name, {}).items()}


# ---------------------------------------------------------------- the run

@dataclass
class Results:
    samples: dict[tuple[str, int], list[Sample]] = field(default_factory=dict)

    def rps(self, name: str, connections: int) -> float:
        return statistics.median(s.rps for s in self.samples[(name, connections)])

    def p50(self, name: str, connections: int) -> float:
        return statistics.median(s.p50_ms for s in self.samples[(name, connections)])

    def p99(self, name: str, connections: int) -> float:
        return statistics.median(s.p99_ms for s in self.samples[(name, connections)])


def measure(product: Server, baseline: Server, unprotected_product: Server, meta: dict[str, Any], rounds: int,
            seconds: int, warmup: int) -> Results:
    servers = {"product": product, "baseline": baseline, "unprotected": unprotected_product}
    results = Results()
    plan = scenarios(meta)
    with tempfile.TemporaryDirectory(prefix="bench-http-") as tmp:
        scripts = Path(tmp)
        print(f"warm-up: {warmup:g} s per scenario at {CONNECTIONS[-1]} connections", flush=True)
        for s in plan:
            run_wrk(s, servers[s.server].base, meta[s.credential], CONNECTIONS[-1], warmup, scripts)
        for number in range(1, rounds + 1):
            for connections in CONNECTIONS:
                line = []
                for s in plan:
                    sample = run_wrk(s, servers[s.server].base, meta[s.credential], connections, seconds, scripts)
                    results.samples.setdefault((s.name, connections), []).append(sample)
                    line.append(f"{s.name} {sample.rps:,.0f}")
                print(f"round {number}/{rounds}, {connections} conn: " + ", ".join(line) + " req/s", flush=True)
    return results


def _revision() -> str:
    """The commit the product was measured at, and whether its code had uncommitted changes."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "backend", "shared", "pyproject.toml"],
                               cwd=REPO, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "an unknown revision"
    return f"commit {head}" + (" with uncommitted changes to backend/ or shared/" if dirty else "")


def _load() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


BASELINE_OF = {"a": None, "b-key": None, "b-memory": None, "b-search": None, "c": "b-key", "d": "b-memory",
               "e": "b-search", "f": "g", "g": None, "c0": None, "d0": None, "e0": None, "f0": None}


def render(results: Results, meta: dict[str, Any], info: dict[str, Any], plans: dict[str, Plan]) -> str:
    from bench.http_baseline import STATEMENTS

    plan = scenarios(meta)
    lines = [
        "# HTTP request-path benchmark",
        "",
        f"Data: one organisation, one index of {meta['records']:,} memory records owned by {meta['owners']:,} people "
        f"({PERSON}: {meta['anna']}, shared: {meta['shared']}, the rest by {OTHERS:,} others, ids interleaved in "
        f"time); {meta['threads']} threads with {meta['messages']:,} messages; seed {meta['seed']}. Her GET /memory "
        f"page: {info['memory_hers']} of hers and {info['memory_shared']} shared of {PAGE}; `{meta['word']}` is in "
        f"{meta['word_hits_for_anna']} messages she reaches ({info['search_hits']} on the first page). Built through "
        "`orgs.service.bootstrap` and the API (indexes, her records, the shared ones, threads); the other people's "
        "records by COPY with the columns POST /memory writes, and their versions. The writes, (f) and (g), go to a "
        "second organisation made the same way (one index), so the reads see the same records in every round; "
        "what they wrote is deleted before and after the run.",
        f"Machine: {os.cpu_count()} cores, {platform.python_implementation()} {platform.python_version()}, "
        f"{info['database']}, {info['wrk']}. Product at {info['revision']}. Run {info['at']}; load average "
        f"{info['load_before']} before, {info['load_after']} after.",
        f"Method: `python -m bench.http{' --quick' if info['quick'] else ''}`. The product is `coremem serve` and the "
        "baseline `uvicorn bench.http_baseline:app`, and the product without row-level security a second "
        "`coremem serve`, each one process, one worker, log level info, no access log, "
        "on the same "
        "database with the product's engine and pool (`make_engine` + `make_sessionmaker`, one transaction per "
        f"request). wrk (1 thread) on loopback; {info['warmup']:g} s warm-up per scenario, then {info['rounds']} "
        f"round{'s' if info['rounds'] > 1 else ''} of {info['seconds']:g} s per scenario and connection count, "
        "interleaved (a, b-key, b-memory, b-search, c, c0, d, d0, e, e0, f, f0, g at 1 connection, then at 8, "
        "then the next round). Medians over the rounds. Every answer's status is checked (200, or 201 for the "
        "writes); none was wrong and wrk reported no socket error. Before measuring, each baseline's answer was "
        "compared with the product's (identical JSON; for the write the same stored record and version, ids and "
        "times aside), and the product without row-level security answered (c), (d) and (e) identically.",
    ]
    for connections in CONNECTIONS:
        lines += ["", f"## {connections} connection{'s' if connections > 1 else ''}", "",
                  "| scenario | what | req/s | req/s per round | p50 ms | p99 ms | vs baseline |",
                  "| --- | --- | ---: | --- | ---: | ---: | --- |"]
        for s in plan:
            rounds = " / ".join(f"{x.rps:,.0f}" for x in results.samples[(s.name, connections)])
            base = BASELINE_OF[s.name]
            ratio = (f"{results.rps(s.name, connections) / results.rps(base, connections):.2f}× ({base})"
                     if base else "")
            lines.append(f"| {s.name} | {s.what} | {results.rps(s.name, connections):,.0f} | {rounds} | "
                         f"{results.p50(s.name, connections):.2f} | {results.p99(s.name, connections):.2f} | "
                         f"{ratio} |")
    lines += ["", "## What row-level security costs", "",
              f"(c0) … (f0) are the same product, login and requests on `{UNPROTECTED}`, a copy of the data set "
              f"whose {info['rls_tables']} protected tables have row-level security switched off; the product still "
              "sets the organisation per transaction there (one `set_config` per request), so the difference is what "
              "the policies themselves cost. Throughput with them as a share of throughput without:", "",
              "| route | " + " | ".join(f"{c} conn: req/s with / without" for c in CONNECTIONS) + " | "
              + " | ".join(f"{c} conn: p50 ms with / without" for c in CONNECTIONS) + " |",
              "| --- | " + " | ".join("---:" for _ in CONNECTIONS) + " | " + " | ".join("---:" for _ in CONNECTIONS)
              + " |"]
    for s in product_scenarios(meta):
        shares = [f"{results.rps(s.name, c):,.0f} / {results.rps(s.name + '0', c):,.0f} = "
                  f"{results.rps(s.name, c) / results.rps(s.name + '0', c):.2f}×" for c in CONNECTIONS]
        p50s = [f"{results.p50(s.name, c):.2f} / {results.p50(s.name + '0', c):.2f}" for c in CONNECTIONS]
        lines.append(f"| ({s.name}) {s.what} | " + " | ".join(shares) + " | " + " | ".join(p50s) + " |")
    lines += ["", f"## Goals (at {CONNECTIONS[-1]} connections)", ""]
    for line in goal_lines(results):
        lines.append(f"- {line}")
    lines += ["", "## The baselines' SQL", "",
              "Each bare handler runs one statement (`bench/http_baseline.py`) in one transaction "
              "(`async with session.begin()`), over the product's engine and pool. `:h` is the SHA-256 of the "
              "bearer secret, `:person` the id in X-Core-Subject. (a) runs none. The write's id is "
              "`backend.ids.new_id('mem')` and its `norm_hash` the product's normalisation, computed in the handler. "
              "It does not take the product's erasure lock or check (MEM-19), which POST /memory does."]
    for name, label in (("key", "b-key: `KEY_SQL`"), ("memory", "b-memory: `MEMORY_SQL` (`:n` = 13)"),
                        ("search", "b-search: `SEARCH_SQL` (`:n` = 21, `:hl` = the route's ts_headline options)"),
                        ("write", "g: `WRITE_SQL`")):
        lines += ["", f"### {label}", "", "```sql", STATEMENTS[name].strip(), "```"]
    lines += ["", *section(plans, "Taken once after the timings, against the same databases. The product's "
                            "statements as its routes run them (`contexts.for_credential`, then the route's service "
                            "call: `keys.own_key`, `reads.list_records`, `searching.search`, `writes.create`) on the "
                            "application's role with the key's organisation set, each explained where the route "
                            "runs it (bench/plans.py), in a transaction rolled back; (c0) … (f0) the same on the "
                            "copy without row-level security. The key's `last_used_at` UPDATE is left out: it runs "
                            "at most once a minute per key. The baselines' statements as the baseline runs them "
                            "(the tables' owner), each in a transaction rolled back. (a) runs no statement.")]
    return "\n".join(lines)


def goal_lines(results: Results) -> list[str]:
    out = []
    c = CONNECTIONS[-1]
    for product, base, wanted in GOALS:
        ratio = results.rps(product, c) / results.rps(base, c)
        verdict = "PASS" if ratio >= wanted else "FAIL"
        out.append(f"{verdict}: ({product}) ≥ {wanted}× ({base}): {results.rps(product, c):,.0f} / "
                   f"{results.rps(base, c):,.0f} req/s = {ratio:.2f}×")
    return out


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="one round of 2 s per scenario (development)")
    parser.add_argument("--rounds", type=int, default=None, help="measuring rounds (default 3; --quick 1)")
    parser.add_argument("--seconds", type=int, default=None, help="wrk duration per run (default 5; --quick 2)")
    parser.add_argument("--warmup", type=int, default=None, help="warm-up per scenario (default 2; --quick 1)")
    parser.add_argument("--rebuild", action="store_true", help="regenerate the data set")
    parser.add_argument("--pgdata", default=str(PGDATA), help="where the embedded server keeps its data")
    args = parser.parse_args()
    rounds = args.rounds or (1 if args.quick else 3)
    seconds = args.seconds or (2 if args.quick else 5)
    warmup = args.warmup or (1 if args.quick else 2)
    if shutil.which("wrk") is None:
        sys.exit("wrk is not installed (Debian: apt-get install wrk)")
    warnings.simplefilter("ignore")
    import logging

    logging.basicConfig(level=logging.WARNING)
    for noisy in ("httpx", "pgserver", "coremem"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    os.chdir(REPO)
    # A TERM (make interrupted, a CI timeout) unwinds like Ctrl-C, so the servers below are always stopped.
    signal.signal(signal.SIGTERM, _interrupt)
    pgdata = Path(args.pgdata)
    logs = pgdata.parent / "bench-http"
    logs.mkdir(parents=True, exist_ok=True)
    url, pg = open_database(pgdata)
    servers: list[Server] = []
    try:
        meta = build(url, logs, args.rebuild)
        cleared = clear_writes(url, meta)
        if cleared:
            print(f"removed {cleared:,} records an earlier run wrote", flush=True)
        import httpx

        unprotected_url, info_rls_tables = copy_without_rls(url)
        clear_writes(unprotected_url, meta)
        product = start_product(url, logs)
        servers.append(product)
        unprotected_product = start_product(unprotected_url, logs, "unprotected")
        servers.append(unprotected_product)
        captured = httpx.get(product.base + "/key", headers={"Authorization": f"Bearer {meta['key']}"}, timeout=30)
        if captured.status_code != 200:
            raise InvalidRun(f"GET /key answered {captured.status_code}: {captured.text}")
        key_body, key_type = captured.content, captured.headers["content-type"]
        body_file = logs / "key-body.json"
        body_file.write_bytes(key_body)
        baseline = start_baseline(url, logs, body_file, key_type, meta["key"])
        servers.append(baseline)
        found = check_equivalence(product, baseline, meta, url, key_body, key_type)
        same_without_rls(product, unprotected_product, meta)
        print(f"baselines answer like the product (GET /memory: {found['memory_hers']} hers, "
              f"{found['memory_shared']} shared; search: {found['search_hits']} hits)", flush=True)
        load_before, revision = _load(), _revision()
        results = measure(product, baseline, unprotected_product, meta, rounds, seconds, warmup)
        wrk_version = subprocess.run(["wrk", "-v"], capture_output=True, text=True).stdout.split("[")[0].strip()
        info = {"at": datetime.now(UTC).isoformat(timespec="seconds"), "load_before": load_before,
                "load_after": _load(), "rounds": rounds, "seconds": seconds, "warmup": warmup, "quick": args.quick,
                "wrk": wrk_version or "wrk", "revision": revision,
                "database": "embedded PostgreSQL (pgserver)" if pg else "PostgreSQL at CORE_DATABASE_URL",
                "rls_tables": info_rls_tables, **found}
        for server in servers:
            if server.process.poll() is not None:
                raise InvalidRun(f"the {server.name} exited during the run:\n{server.tail()}")
        try:
            plans = asyncio.run(take_plans(url, unprotected_url, meta, logs))
        except Exception as exc:  # the timings stand without their plans
            plans = failed(exc)
        report = render(results, meta, info, plans)
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(report)
        print()
        print(report)
        print("p50 at 1 connection: " + ", ".join(f"{s.name} {results.p50(s.name, 1):.2f} ms"
                                                    for s in scenarios(meta)))
        for line in goal_lines(results):
            print(line)
        print(f"saved to {RESULTS}")
    except InvalidRun as exc:
        print(f"\nINVALID RUN: {exc}", file=sys.stderr, flush=True)
        sys.exit(2)
    finally:
        for server in reversed(servers):
            server.stop()
        with contextlib.suppress(Exception):
            if "meta" in locals():
                clear_writes(url, meta)
                if "unprotected_url" in locals():
                    clear_writes(unprotected_url, meta)
        if pg is not None:
            pg.cleanup()
    sys.exit(0)


if __name__ == "__main__":
    main()
