"""Benchmark of the `local` embedding provider (PLT-13, MEM-13): write throughput and search with the query embedded.

A seeded generator writes 100,000 records (1,000 people, 10% shared; sentences of the development set's topics
with varying details, English and Dutch) into a `local` index, each embedded by the local model in this process,
plus the same records in an index that embeds nothing; the HNSW index is built after the load. Then, against
`coremem serve` processes on loopback:

- writes: `POST /memory/batch` of 50 new records to the local index, for 1 and 2 server processes (each its own
  model), one client per process, records/s over all of them; and `POST /memory` of one record (p50).
- search: `GET /memory/search` with plain-word questions as the median person, on the local index (the question
  embedded in the request) and on the full-text-only index; p50 and p95.

    make bench-embed                          # builds the data set once (kept in .coremem/bench-embed-pg)
    python -m bench.embed --records 20000 --rebuild
    python -m bench.embed --records 2000 --repeat 20 --batches 2 --pgdata .coremem/bench-embed-small --results /tmp/e.md

The table is printed and written to bench/results/embed.md. Not part of `make test`.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.search import _free_port, percentile, plain

SEED = 20261203
PEOPLE = 1_000
SHARED = 0.1
DATABASE = "coremem_bench_embed"
SECRET = "bench-embed-secret-" + "x" * 24
LOCAL = {"provider": "local", "model": "use-multilingual-v3", "dimensions": 512}
RESULTS = Path(__file__).parent / "results" / "embed.md"
FILLER = ("since last year", "according to her manager", "as she told us in March", "sinds vorig jaar",
          "zegt haar collega", "for now", "voorlopig", "as far as we know", "volgens haar zus", "again")


def _sentence(rng: random.Random) -> str:
    from tests.quality.devset import NOTES, TOPICS
    from tests.quality.devset import SHARED as SHARED_TEXTS

    roll = rng.random()
    if roll < 0.75:
        topic = rng.choice(TOPICS)
        en, nl = rng.choice(topic.values)
        text = topic.en.format(v=en) if rng.random() < 0.5 else topic.nl.format(v=nl)
    elif roll < 0.9:
        text = rng.choice(rng.choice(NOTES))
    else:
        text = rng.choice(SHARED_TEXTS)[0]
    return f"{text.rstrip('.')} ({rng.choice(FILLER)}, #{rng.randrange(10_000)})."


def build(url: str, records: int, rebuild: bool) -> dict[str, Any]:
    import psycopg

    from backend.db import migrate
    from backend.domains.memory.rules import norm_hash
    from backend.ids import new_id
    from backend.providers.embeddings import fingerprint
    from backend.providers.local_embeddings import encode

    migrate.upgrade(url)
    conn = psycopg.connect(plain(url), autocommit=True)
    conn.execute("CREATE TABLE IF NOT EXISTS bench_meta (key text PRIMARY KEY, value jsonb)")
    row = conn.execute("SELECT value FROM bench_meta WHERE key = 'embed'").fetchone()
    if row and not rebuild and row[0].get("seed") == SEED and row[0].get("records") == records:
        print(f"reusing the data set ({records:,} records)")
        return dict(row[0])
    started = time.monotonic()
    rng = random.Random(SEED)
    meta = _bootstrap(url)
    org_id = meta["org_id"]
    conn.execute("DELETE FROM memory_records WHERE org_id = %s", (org_id,))
    conn.execute("DELETE FROM indexes WHERE org_id = %s", (org_id,))
    local_id, text_id = new_id("idx"), new_id("idx")
    conn.execute("INSERT INTO indexes (org_id, id, name, embedding) VALUES (%s, %s, 'local', %s), "
                 "(%s, %s, 'words', NULL)", (org_id, local_id, json.dumps(LOCAL), org_id, text_id))
    people = [f"person{n:04d}" for n in range(PEOPLE)]
    model = fingerprint(LOCAL)
    conn.execute("DROP INDEX IF EXISTS ix_memory_records_embedding_hnsw_512")
    print(f"embedding and writing {records:,} records …", flush=True)
    chunk = 2_000
    embed_seconds = 0.0
    for start in range(0, records, chunk):
        rows = [(None if rng.random() < SHARED else rng.choice(people), _sentence(rng))
                for _ in range(min(chunk, records - start))]
        t0 = time.perf_counter()
        vectors = encode(LOCAL["model"], [text for _, text in rows])
        embed_seconds += time.perf_counter() - t0
        buffer = io.StringIO()
        for (owner, text), vector in zip(rows, vectors, strict=True):
            common = [org_id, None, None, owner, "fact", text.replace("\\", "\\\\"), norm_hash(text), "1.0", "api"]
            literal = "[" + ",".join(f"{v:.6f}" for v in vector) + "]"
            for index_id, vec, fp in ((local_id, literal, model), (text_id, None, None)):
                fields = [*common[:1], new_id("mem"), index_id, *common[3:], vec, fp]
                buffer.write("\t".join("\\N" if f is None else str(f) for f in fields) + "\n")
        with conn.cursor() as cur, cur.copy(
                "COPY memory_records (org_id, id, index_id, subject, type, text, norm_hash, confidence, source, "
                "embedding, embedding_model) FROM STDIN") as copy:
            copy.write(buffer.getvalue())
        print(f"  {start + len(rows):,} records ({(start + len(rows)) / embed_seconds:.0f}/s embedded)", flush=True)
    print("building the HNSW index …", flush=True)
    t0 = time.perf_counter()
    conn.execute("SET maintenance_work_mem = '1GB'")
    conn.execute("CREATE INDEX ix_memory_records_embedding_hnsw_512 ON memory_records USING hnsw "
                 "((embedding::vector(512)) vector_cosine_ops) WHERE vector_dims(embedding) = 512")
    hnsw_seconds = time.perf_counter() - t0
    conn.execute("ANALYZE memory_records")
    counts = conn.execute("SELECT subject, count(*) FROM memory_records WHERE index_id = %s AND subject IS NOT NULL "
                          "GROUP BY subject ORDER BY count(*), subject", (local_id,)).fetchall()
    meta.update({"seed": SEED, "records": records, "local_id": local_id, "text_id": text_id,
                 "median": list(counts[len(counts) // 2]), "embedded_per_second": round(records / embed_seconds),
                 "hnsw_seconds": round(hnsw_seconds), "build_seconds": round(time.monotonic() - started)})
    conn.execute("INSERT INTO bench_meta VALUES ('embed', %s) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                 (json.dumps(meta),))
    print(f"built in {meta['build_seconds']} s", flush=True)
    return meta


def _bootstrap(url: str) -> dict[str, Any]:
    import asyncio

    import psycopg

    from backend.db.engine import make_engine, make_sessionmaker
    from backend.domains.orgs import service

    with psycopg.connect(plain(url), autocommit=True) as conn:
        found = conn.execute("SELECT id FROM orgs WHERE name = 'BenchEmbed'").fetchone()
        if found:
            conn.execute("DELETE FROM memory_records WHERE org_id = %s", (found[0],))
            conn.execute("DELETE FROM orgs WHERE id = %s", (found[0],))

    async def go() -> dict[str, Any]:
        engine = make_engine(url, pool_size=1, app_role=False)
        try:
            async with make_sessionmaker(engine)() as db, db.begin():
                made = await service.bootstrap(db, org_name="BenchEmbed", admin_email="bench-embed@bench.local",
                                               secret=SECRET, key_retention_days=400, ttl_seconds=3600)
                return {"org_id": made["org_id"], "key": made["key"]}
        finally:
            await engine.dispose()

    return asyncio.run(go())


class Server:
    """`coremem serve` on a free loopback port, as a user starts it."""

    def __init__(self, url: str, logs: Path) -> None:
        import httpx

        self.port = _free_port()
        env = {**os.environ, "CORE_DATABASE_URL": url, "CORE_DATA_DIR": str(logs), "CORE_SECRET": SECRET}
        coremem = str(Path(sys.executable).parent / "coremem")
        self.log = open(logs / f"serve-{self.port}.log", "w")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen([coremem, "serve", "--host", "127.0.0.1", "--port", str(self.port)],
                                        env=env, stdout=self.log, stderr=subprocess.STDOUT)
        self.base = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if httpx.get(self.base + "/health", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"coremem serve did not start: see {self.log.name}")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)
        self.log.close()


def _headers(key: str, subject: str | None = None) -> dict[str, str]:
    headers = {"Authorization": f"Bearer {key}"}
    if subject:
        headers["X-Core-Subject"] = json.dumps({"id": subject})
    return headers


def writes(servers: list[Server], meta: dict[str, Any], batches: int, rng: random.Random) -> float:
    """Records/s of POST /memory/batch (50 records) to the local index, one client thread per server process."""
    import threading

    import httpx

    def client(server: Server, bodies: list[dict[str, Any]]) -> None:
        with httpx.Client(base_url=server.base, timeout=120) as http:
            for body in bodies:
                answer = http.post("/memory/batch", json=body, headers=_headers(meta["key"], "writer"))
                assert answer.status_code == 201, answer.text

    work = [[{"records": [{"index_id": meta["local_id"], "type": "fact", "text": _sentence(rng)} for _ in range(50)]}
             for _ in range(batches)] for _ in servers]
    threads = [threading.Thread(target=client, args=(server, bodies)) for server, bodies in zip(servers, work,
                                                                                                 strict=True)]
    t0 = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return len(servers) * batches * 50 / (time.perf_counter() - t0)


def timed(call: Any, repeat: int) -> list[float]:
    out = []
    for n in range(repeat):
        t0 = time.perf_counter()
        call(n)
        out.append((time.perf_counter() - t0) * 1000)
    return out


def measure(url: str, meta: dict[str, Any], repeat: int, batches: int) -> dict[str, Any]:
    import httpx

    from tests.quality.devset import TOPICS

    logs = Path(".coremem") / "bench-embed-logs"
    logs.mkdir(parents=True, exist_ok=True)
    rng = random.Random(SEED + 1)
    questions = [q for topic in TOPICS for q in (*topic.ask_en, *topic.ask_nl)]
    person = meta["median"][0]
    first = Server(url, logs)
    out: dict[str, Any] = {}
    try:
        with httpx.Client(base_url=first.base, timeout=60) as http:
            found: dict[str, int] = {meta["local_id"]: 0, meta["text_id"]: 0}

            def search(index_id: str) -> Any:
                def call(n: int) -> None:
                    answer = http.get("/memory/search", params={"q": questions[n % len(questions)],
                                                                "index_id": index_id},
                                      headers=_headers(meta["key"], person))
                    assert answer.status_code == 200, answer.text
                    found[index_id] += bool(answer.json()["data"])
                return call

            def write_one(n: int) -> None:
                answer = http.post("/memory", json={"index_id": meta["local_id"], "type": "fact",
                                                    "text": _sentence(rng)}, headers=_headers(meta["key"], "writer"))
                assert answer.status_code == 201, answer.text

            for index_id in (meta["local_id"], meta["text_id"]):  # warm up: the model, the caches
                timed(search(index_id), 20)
            local, words = [], []
            for _ in range(2):  # interleaved halves
                local += timed(search(meta["local_id"]), repeat // 2)
                words += timed(search(meta["text_id"]), repeat // 2)
            # A search that sees no record (row-level security without the organisation set, say) is fast and
            # wrong: the person's questions must find records in both indexes.
            assert all(found.values()), f"searches that found records, per index: {found}"
            out["found"] = (found[meta["local_id"]], found[meta["text_id"]])
            out["search_local"] = (statistics.median(local), percentile(local, 95))
            out["search_words"] = (statistics.median(words), percentile(words, 95))
            timed(write_one, 5)
            one = timed(write_one, repeat // 2)
            out["write_one"] = (statistics.median(one), percentile(one, 95))
        writes([first], meta, 2, rng)  # warm up
        out["writes_1"] = writes([first], meta, batches, rng)
        second = Server(url, logs)
        try:
            writes([second], meta, 2, rng)
            out["writes_2"] = writes([first, second], meta, batches, rng)
        finally:
            second.stop()
    finally:
        first.stop()
    return out


def render(meta: dict[str, Any], out: dict[str, Any], repeat: int, batches: int) -> str:
    local50, local95 = out["search_local"]
    words50, words95 = out["search_words"]
    one50, one95 = out["write_one"]
    searched = 20 + 2 * (repeat // 2)  # the warm-up and the interleaved halves
    lines = [
        "# Local embedding benchmark (PLT-13, MEM-13)", "",
        f"Data: {meta['records']:,} records in a `local` index (use-multilingual-v3, 512 dimensions, HNSW), "
        f"{PEOPLE:,} people, {SHARED:.0%} shared, sentences of the development set's topics in English and Dutch "
        f"with varying details; the same records in an index that embeds nothing; seed {SEED}. Loading embedded "
        f"{meta['embedded_per_second']:,} records/s in one process (batches of 2,000); the HNSW index took "
        f"{meta['hnsw_seconds']} s to build.",
        f"Machine: {os.cpu_count()} cores, CPython {platform.python_version()}, embedded PostgreSQL (pgserver), "
        "`coremem serve` processes on loopback, one client thread per process. Times in ms. Load average "
        f"{', '.join(f'{x:.2f}' for x in out['load'][0])} before, {', '.join(f'{x:.2f}' for x in out['load'][1])} "
        "after (other work on the machine).", "",
        "| what | result |", "| --- | ---: |",
        f"| `POST /memory/batch` (50 records), 1 server process | {out['writes_1']:.0f} records/s |",
        f"| `POST /memory/batch` (50 records), 2 server processes | {out['writes_2']:.0f} records/s |",
        f"| `POST /memory` (1 record, embedded in the request) p50 / p95 | {one50:.1f} / {one95:.1f} |",
        f"| `GET /memory/search`, local index (question embedded) p50 / p95 | {local50:.1f} / {local95:.1f} |",
        f"| `GET /memory/search`, full-text-only index p50 / p95 | {words50:.1f} / {words95:.1f} |", "",
        f"Searches: {repeat} per index, plain-word questions of the development set (English and Dutch), as the "
        f"median person ({meta['median'][0]}, {meta['median'][1]} records of her own) with the shared ones; "
        f"writes: {batches} batches per process. Searches that found records (warm-up included): "
        f"{out['found'][0]} of {searched} on the local index, {out['found'][1]} of {searched} on the "
        "full-text-only index.", "",
        f"- {'PASS' if local50 <= 25 and meta['records'] >= 100_000 else 'FAIL'}: search p50 with the question "
        f"embedded {local50:.1f} ms at {meta['records']:,} embedded records (goal ≤ 25 ms at 100k)", "",
        f"Run at {datetime.now(UTC).isoformat(timespec='seconds')}.", ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--rebuild", action="store_true")
    parser.add_argument("--repeat", type=int, default=200, help="searches per index")
    parser.add_argument("--batches", type=int, default=20, help="write batches per server process")
    parser.add_argument("--pgdata", default=".coremem/bench-embed-pg")
    parser.add_argument("--results", type=Path, default=RESULTS, help="the results file")
    args = parser.parse_args()
    from backend.db.embedded import ensure_database, socket_url, start_server

    server = start_server(Path(args.pgdata), cleanup_mode="stop")
    ensure_database(server, DATABASE)
    url = socket_url(Path(args.pgdata), DATABASE)
    meta = build(url, args.records, args.rebuild)
    load_before = os.getloadavg()
    out = measure(url, meta, args.repeat, args.batches)
    out["load"] = (load_before, os.getloadavg())
    text = render(meta, out, args.repeat, args.batches)
    print(text)
    args.results.write_text(text)


if __name__ == "__main__":
    main()
