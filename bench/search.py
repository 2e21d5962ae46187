"""Benchmark of message search (THR-7): GET /thread-items against the plain tsquery it is built on.

A seeded generator writes 1,000,000 messages in 20,000 threads (Zipf-distributed Dutch and English
vocabulary, spread over a year) into a scratch embedded PostgreSQL with COPY, then measures, interleaved
in one run, for each query class: the raw tsquery SQL, one hand-written statement returning the service's
page ("raw same page"), the search service (scope, slice of history, snippets and highlights, as a request
runs it), and the HTTP route over loopback.

    make bench-search            # builds the data set once (kept in .coremem/bench-pg), then measures twice
    python -m bench.search --rebuild --repeat 60 --runs 3

The tables are printed and written to bench/results/search.md. Not part of `make test`.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import itertools
import os
import platform
import random
import socket
import statistics
import sys
import threading
import time
import warnings
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

SEED = 20261202
THREADS = 20_000
MESSAGES = 1_000_000
DAYS = 365
PAGE = 20
DATABASE = "coremem_bench"
RESULTS = Path(__file__).parent / "results" / "search.md"
# ts_headline's options and markers, as the service uses them (backend/domains/threads/search.py).
START, STOP = "\ue000", "\ue001"
HEADLINE_OPTIONS = (f"StartSel={START}, StopSel={STOP}, MaxWords=30, MinWords=20, ShortWord=0, HighlightAll=false, "
                    "MaxFragments=0")
# "Raw same page": the service's first page for `q` by hand, in one statement. The slice is the 7 days (in the
# organisation's time zone) ending at the newest message's day; `older` says whether history goes further back;
# hits are messages of live threads (the bench key sees every live thread), 21 rows (the page and one more, to
# know there is a next page); snippets mark the wanted words only (excluded words never match). Deleting a thread
# deletes its items, so a key that sees every live thread needs no join to threads (the service leaves it out too).
SAME_PAGE_HEADLINE = """ts_headline('simple', h.text,
                   CASE WHEN querytree(websearch_to_tsquery('simple', :q)) = 'T'
                        THEN websearch_to_tsquery('simple', :q)
                        ELSE querytree(websearch_to_tsquery('simple', :q))::tsquery END, :hl) AS headline"""
SAME_PAGE_SQL = """
WITH bounds AS MATERIALIZED (
  SELECT s.lower, s.tz,
         (SELECT max(created_at) FROM thread_items
           WHERE org_id = :org AND text IS NOT NULL AND created_at < s.lower) IS NOT NULL AS older
  FROM (SELECT o.timezone AS tz,
               timezone(o.timezone, date_trunc('day', timezone(o.timezone,
                   (SELECT max(created_at) FROM thread_items WHERE org_id = :org AND text IS NOT NULL)))
                 - interval '6 days') AS lower
        FROM orgs o WHERE o.id = :org) s)
SELECT b.lower, b.tz, b.older, h.id, h.thread_id, h.type, h.role, h.subject, h.created_at,
       {headline}
FROM bounds b LEFT JOIN LATERAL (
  SELECT i.id, i.thread_id, i.type, i.role, i.subject, i.created_at, i.text
  FROM thread_items i
  WHERE i.org_id = :org AND i.text IS NOT NULL
    AND i.created_at >= b.lower AND i.tsv @@ websearch_to_tsquery('simple', :q)
  ORDER BY i.created_at DESC, i.id DESC LIMIT :n) h ON true
ORDER BY h.created_at DESC, h.id DESC
""".replace("{headline}", SAME_PAGE_HEADLINE)

_DUTCH = ("de het een en van ik je dat is niet op te zijn met voor er maar wat als bij nog ook uit aan om kan "
         "wel dan door hebben over naar jij we ze hij zij mijn geen worden deze zo al was moet heb mag gaan "
         "terugbetaling factuur bestelling levering klant vraag antwoord gesprek verhuizing kantoor busje "
         "rekening betaling adres pakket week dag morgen vandaag gisteren maandag dinsdag graag bedankt "
         "probleem oplossing formulier aanvraag contract medewerker afdeling salaris vakantie planning "
         "koffie thee café lait vergadering afspraak telefoon bericht wachtwoord account inloggen")
_ENGLISH = ("the of and to a in is it you that he was for on are with as his they be at one have this from "
           "or had by word but what some we can out other were all there when up use your how said an each "
           "refund invoice order delivery customer question answer meeting office moving van bill payment "
           "address package week day tomorrow today yesterday please thanks problem solution form request "
           "contract employee department salary holiday schedule coffee tea call message password login")
_SYLLABLES = ("ba be bi bo bu da de di do ka ke ko la le li lo ma me mi mo na ne no pa pe po ra re ri ro sa se si "
              "so ta te ti to va ve vo wa we za ze zo ij ui aa oe ee")
DUTCH, ENGLISH, SYLLABLES = _DUTCH.split(), _ENGLISH.split(), _SYLLABLES.split()


def vocabulary(rng: random.Random, size: int = 60_000) -> list[str]:
    """Real words first (the head of the Zipf curve), then made-up words for the long tail."""
    words = list(dict.fromkeys(w for pair in itertools.zip_longest(DUTCH, ENGLISH) for w in pair if w))
    seen = set(words)
    while len(words) < size:
        word = "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(3, 5)))
        if word not in seen:
            seen.add(word)
            words.append(word)
    return words


# ---------------------------------------------------------------- data set

def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_database(pgdata: Path) -> tuple[str, Any]:
    from backend.db.embedded import ensure_database, socket_url, start_server

    server = start_server(pgdata, cleanup_mode="stop")
    ensure_database(server, DATABASE)
    return socket_url(pgdata, DATABASE), server


def plain(url: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def build(url: str, rebuild: bool) -> dict[str, Any]:
    """Create (or reuse) the data set; returns the organisation, a key and the words each class searches."""
    import psycopg

    from backend.db import migrate
    from backend.ids import new_id

    migrate.upgrade(url)
    conn = psycopg.connect(plain(url), autocommit=True)
    conn.execute("CREATE TABLE IF NOT EXISTS bench_meta (key text PRIMARY KEY, value jsonb)")
    row = conn.execute("SELECT value FROM bench_meta WHERE key = 'dataset'").fetchone()
    if row and not rebuild and row[0].get("seed") == SEED and row[0].get("messages") == MESSAGES:
        print(f"reusing the data set in {DATABASE} ({MESSAGES:,} messages)")
        return dict(row[0])

    rng = random.Random(SEED)
    words = vocabulary(rng)
    weights = list(itertools.accumulate(1 / (rank ** 1.07) for rank in range(1, len(words) + 1)))
    started = time.monotonic()
    print(f"generating {MESSAGES:,} messages in {THREADS:,} threads …", flush=True)
    for table in ("thread_item_notes", "thread_states", "thread_summaries", "thread_items", "threads"):
        conn.execute(f"DELETE FROM {table}")
    # Only this data set's row: the injection data set shares the database, and wiping its row made the next
    # `make bench-injection` build its million records again.
    conn.execute("DELETE FROM bench_meta WHERE key = 'dataset'")
    org = conn.execute("SELECT id FROM orgs WHERE name = 'Bench'").fetchone()
    if org is None:
        org_id = new_id("org")
        conn.execute("INSERT INTO orgs (id, name, timezone) VALUES (%s, 'Bench', 'Europe/Amsterdam')", (org_id,))
    else:
        org_id = org[0]

    now = datetime.now(UTC).replace(microsecond=0)
    start = now - timedelta(days=DAYS)
    people = [f"person{n}" for n in range(2_000)]
    thread_ids = [new_id("thr") for _ in range(THREADS)]
    owners = [None if rng.random() < 0.2 else rng.choice(people) for _ in range(THREADS)]
    # Message counts per thread vary (some long threads, many short ones) and sum to MESSAGES.
    raw_sizes = [rng.paretovariate(1.6) for _ in range(THREADS)]
    scale = MESSAGES / sum(raw_sizes)
    sizes = [max(1, int(s * scale)) for s in raw_sizes]
    sizes[0] += MESSAGES - sum(sizes)
    last = [0] * THREADS

    threads_buf = io.StringIO()
    for tid, owner, size in zip(thread_ids, owners, sizes, strict=True):
        threads_buf.write(f"{org_id}\t{tid}\t{owner or chr(92) + 'N'}\t{{}}\t{{\"bench\": \"yes\"}}\t{size}\t"
                          f"{start.isoformat()}\t{now.isoformat()}\n")
    with conn.cursor() as cur, cur.copy("COPY threads (org_id, id, subject, labels, metadata, last_position, "
                                        "created_at, updated_at) FROM STDIN") as copy:
        copy.write(threads_buf.getvalue())

    conn.execute("DROP INDEX IF EXISTS ix_thread_items_tsv")
    conn.execute("DROP INDEX IF EXISTS ix_thread_items_org_id_created_at_id")
    conn.execute("DROP INDEX IF EXISTS ix_thread_items_org_id_subject")
    conn.execute("ALTER TABLE thread_items DROP CONSTRAINT IF EXISTS uq_thread_items_org_id_id CASCADE")
    # Messages arrive in time order; each goes to a thread drawn by its size.
    thread_pick = list(itertools.accumulate(sizes))
    step = DAYS * 86400 / MESSAGES
    roles = ("user", "assistant", "assistant", "user", "developer")
    batch = 100_000
    for first in range(0, MESSAGES, batch):
        buf = io.StringIO()
        for n in range(first, min(first + batch, MESSAGES)):
            t = rng.choices(range(THREADS), cum_weights=thread_pick)[0]
            last[t] += 1
            text = " ".join(rng.choices(words, cum_weights=weights, k=rng.randint(6, 40)))
            role = roles[n % 5]
            at = start + timedelta(seconds=n * step)
            body = '{"role": "' + role + '", "content": "' + text + '"}'
            buf.write(f"{org_id}\t{thread_ids[t]}\t{last[t]}\t{new_id('itm', at_ms=int(at.timestamp() * 1000))}\t"
                      f"message\t{role}\t{owners[t] or chr(92) + 'N'}\t\\N\t{body}\t{text}\t{at.isoformat()}\n")
        with conn.cursor() as cur, cur.copy("COPY thread_items (org_id, thread_id, position, id, type, role, "
                                            "subject, response_id, body, text, created_at) FROM STDIN") as copy:
            copy.write(buf.getvalue())
        print(f"  {min(first + batch, MESSAGES):,} messages ({time.monotonic() - started:.0f} s)", flush=True)
    conn.execute("UPDATE threads SET last_position = 0")
    conn.execute("UPDATE threads t SET last_position = m.p FROM (SELECT thread_id, max(position) p "
                 "FROM thread_items GROUP BY thread_id) m WHERE m.thread_id = t.id")
    print("building indexes …", flush=True)
    conn.execute("SET maintenance_work_mem = '1GB'")
    conn.execute("ALTER TABLE thread_items ADD CONSTRAINT uq_thread_items_org_id_id UNIQUE (org_id, id)")
    conn.execute("ALTER TABLE thread_item_notes ADD CONSTRAINT fk_thread_item_notes_org_id_thread_items "
                 "FOREIGN KEY (org_id, item_id) REFERENCES thread_items (org_id, id) ON DELETE CASCADE")
    conn.execute("CREATE INDEX ix_thread_items_org_id_created_at_id ON thread_items (org_id, created_at, id) "
                 "WHERE text IS NOT NULL")
    conn.execute("CREATE INDEX ix_thread_items_org_id_subject ON thread_items (org_id, subject)")
    conn.execute("CREATE INDEX ix_thread_items_tsv ON thread_items USING gin (tsv)")
    conn.execute("VACUUM ANALYZE threads")
    conn.execute("VACUUM ANALYZE thread_items")

    # Words for each class, read from the data: the most frequent, one with about a hundred messages, none.
    frequency = dict(conn.execute("SELECT word, ndoc FROM ts_stat('SELECT tsv FROM thread_items') "
                                  "ORDER BY ndoc DESC").fetchall())
    ranked = sorted(frequency.items(), key=lambda kv: -kv[1])
    frequent, second = ranked[0][0], ranked[1][0]
    # A rare word: about one message in ten thousand.
    low, high = max(2, MESSAGES // 16_000), max(4, MESSAGES // 6_000)
    rare_words = [w for w, n in ranked if low <= n <= high and w.isalpha()]
    rare, rare2 = rare_words[len(rare_words) // 2], rare_words[len(rare_words) // 2 + 1]
    meta = {"seed": SEED, "messages": MESSAGES, "threads": THREADS, "org_id": org_id,
            "frequent": frequent, "frequent_docs": frequency[frequent], "second": second,
            "rare": rare, "rare_docs": frequency[rare], "rare2": rare2, "absent": "zzyzxquux",
            "phrase": f'"{ranked[2][0]} {ranked[3][0]}"', "built_in_s": round(time.monotonic() - started)}
    conn.execute("INSERT INTO bench_meta VALUES ('dataset', %s::jsonb)", (__import__("json").dumps(meta),))
    conn.close()
    print(f"data set ready in {meta['built_in_s']} s", flush=True)
    return meta


# ---------------------------------------------------------------- measuring

def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))
    return ordered[index]


async def measure(url: str, meta: dict[str, Any], repeat: int) -> list[dict[str, Any]]:
    import httpx
    import uvicorn
    from sqlalchemy import text

    from backend import contexts
    from backend.access.actor import Actor
    from backend.app import create_app
    from backend.config import Settings
    from backend.db.engine import make_engine, make_sessionmaker
    from backend.domains.keys import service as keys_service
    from backend.domains.threads import searching
    from backend.params import Page
    from shared.schemas.platform import KeyCreate
    from shared.schemas.threads import ItemSearchQuery

    settings = Settings(database_url=url, data_dir=Path(".coremem"), secret="bench-secret-" + "x" * 24,
                        log_level="WARNING")
    engine = make_engine(url, pool_size=4)
    sessions = make_sessionmaker(engine)
    # The hand-written statements (and the key's setup) run as the tables' owner, without row-level security:
    # the physical limit. The service runs as the application does (its request context sets the organisation).
    owner_engine = make_engine(url, pool_size=2, app_role=False)
    owner_sessions = make_sessionmaker(owner_engine)
    org_id = meta["org_id"]
    async with owner_sessions() as db, db.begin():
        _, secret = await keys_service.insert_new_key(
            db, org_id, KeyCreate(name=f"bench {time.time()}", capabilities=["threads"]), Actor("system", "bench"),
            secret=settings.secret, retention_days=400)

    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(settings, url), host="127.0.0.1", port=port,
                                           log_level="warning", access_log=False))
    runner = threading.Thread(target=server.run, daemon=True)
    runner.start()
    base = f"http://127.0.0.1:{port}"
    http = httpx.AsyncClient(base_url=base, headers={"Authorization": f"Bearer {secret}"}, timeout=30)
    for _ in range(100):
        try:
            if (await http.get("/health")).status_code == 200:
                break
        except httpx.HTTPError:
            await asyncio.sleep(0.1)

    classes = {
        "frequent": meta["frequent"],
        "rare": meta["rare"],
        "absent": meta["absent"],
        "phrase": meta["phrase"],
        "or": f"{meta['rare']} or {meta['rare2']}",
        "exclusion": f"{meta['frequent']} -{meta['second']}",
    }
    raw_sql = text("SELECT id, thread_id, created_at FROM thread_items WHERE org_id = :org AND text IS NOT NULL "
                   "AND tsv @@ websearch_to_tsquery('simple', :q) ORDER BY created_at DESC LIMIT :n")
    same_sql = text(SAME_PAGE_SQL)
    # The same page without snippets: what ts_headline costs, the one piece of the service's work raw lacks
    # that no plan can avoid (it parses every text on the page again).
    bare_sql = text(SAME_PAGE_SQL.replace(SAME_PAGE_HEADLINE, "h.text AS headline"))
    explain_sql = text("EXPLAIN (ANALYZE, BUFFERS) " + SAME_PAGE_SQL)
    same_params = {"org": org_id, "n": PAGE + 1, "hl": HEADLINE_OPTIONS}

    async def raw(q: str) -> int:
        async with owner_sessions() as db, db.begin():
            return len((await db.execute(raw_sql, {"org": org_id, "q": q, "n": PAGE})).all())

    async def same_page_rows(q: str) -> list[Any]:
        async with owner_sessions() as db, db.begin():
            return [r for r in (await db.execute(same_sql, {**same_params, "q": q})).all() if r.id is not None]

    async def same(q: str) -> int:
        return min(PAGE, len(await same_page_rows(q)))

    async def bare(q: str) -> int:
        async with owner_sessions() as db, db.begin():
            rows = (await db.execute(bare_sql, {**same_params, "q": q})).all()
            return min(PAGE, len([r for r in rows if r.id is not None]))

    async def same_page_plan(q: str) -> list[str]:
        """The same-page statement's plan, run once more after the timings (warm, as measured)."""
        async with owner_sessions() as db, db.begin():
            return [line for (line,) in (await db.execute(explain_sql, {**same_params, "q": q})).all()]

    async def service_page(q: str) -> dict[str, Any]:
        async with sessions() as db, db.begin():  # what the route runs: the request context, then the search
            ctx = await contexts.for_credential(db, settings, authorization=f"Bearer {secret}")
            return await searching.search(ctx, ItemSearchQuery(q=q), Page(limit=PAGE))

    async def via_service(q: str) -> int:
        return len((await service_page(q))["data"])

    async def via_http(q: str) -> int:
        response = await http.get("/thread-items", params={"q": q, "limit": PAGE})
        assert response.status_code == 200, response.text
        return len(response.json()["data"])

    modes: dict[str, Callable[[str], Awaitable[int]]] = {"raw": raw, "same": same, "bare": bare,
                                                          "service": via_service,
                                                          "http": via_http}
    timings: dict[tuple[str, str], list[float]] = {(c, m): [] for c in classes for m in modes}
    hits: dict[tuple[str, str], int] = {}
    for q in classes.values():  # warm caches and plans
        for fn in modes.values():
            for _ in range(3):
                await fn(q)
    for name, q in classes.items():  # the hand-written statement returns the service's page, snippet for snippet
        page, rows = await service_page(q), await same_page_rows(q)
        assert [h["item_id"] for h in page["data"]] == [r.id for r in rows][:PAGE], name
        assert [h["snippet"] for h in page["data"]] == [r.headline.replace(START, "").replace(STOP, "")
                                                        for r in rows][:PAGE], name
    order = list(modes)
    for rep in range(repeat):
        for name, q in classes.items():
            rotation = order[rep % len(order):] + order[:rep % len(order)]  # interleaved, in turning order
            for mode in rotation:
                t0 = time.perf_counter()
                hits[(name, mode)] = await modes[mode](q)
                timings[(name, mode)].append((time.perf_counter() - t0) * 1000)

    rows = []
    for name, q in classes.items():
        row: dict[str, Any] = {"class": name, "query": q}
        for mode in modes:
            row[f"{mode}_p50"] = statistics.median(timings[(name, mode)])
            row[f"{mode}_p95"] = percentile(timings[(name, mode)], 95)
            row[f"{mode}_hits"] = hits[(name, mode)]
        row["ratio"] = row["service_p50"] / row["raw_p50"]
        row["ratio_same"] = row["service_p50"] / row["same_p50"]
        absolute = row["service_p50"] <= 20 and row["service_p95"] <= 100
        row["ok"] = row["ratio_same"] <= SAME_GOAL and absolute  # issue 16 goal 4: against the same-page statement
        row["ok_raw"] = row["ratio"] <= 1.2 and absolute  # the earlier goal, against the bare tsquery
        row["plan"] = await same_page_plan(q)
        rows.append(row)
    await http.aclose()
    server.should_exit = True
    runner.join(timeout=10)
    await owner_engine.dispose()
    await engine.dispose()
    return rows


SAME_GOAL = 1.15


def goals(rows: list[dict[str, Any]]) -> list[str]:
    """Issue 16, goal 4: per query class PASS or FAIL with its numbers."""
    return [f"- {'PASS' if r['ok'] else 'FAIL'}: {r['class']} `{r['query']}`: service p50 {r['service_p50']:.2f} ms "
            f"(goal ≤ 20), p95 {r['service_p95']:.2f} ms (goal ≤ 100), {r['ratio_same']:.2f}× the same-page "
            f"statement's p50 {r['same_p50']:.2f} ms (goal ≤ {SAME_GOAL}×)" for r in rows]


def render(runs: list[tuple[list[dict[str, Any]], dict[str, Any]]], meta: dict[str, Any], repeat: int) -> str:
    lines = [
        "# Search benchmark (THR-7, issue 16 goal 4)",
        "",
        f"Data: {meta['messages']:,} messages in {meta['threads']:,} threads over {DAYS} days, Zipf vocabulary "
        f"(Dutch and English head, made-up tail), seed {meta['seed']}. Frequent word `{meta['frequent']}` is in "
        f"{meta['frequent_docs']:,} messages; rare word `{meta['rare']}` in {meta['rare_docs']}.",
        f"Machine: {os.cpu_count()} cores, {platform.python_implementation()} {platform.python_version()}, embedded "
        f"PostgreSQL (pgserver). {len(runs)} runs, one after the other; in each, {repeat} calls per class and mode, "
        f"interleaved in turning order; times in ms; page size {PAGE}. Other work on the machine shows in the load "
        "averages given per run.",
        "",
        "- raw: `SELECT id, thread_id, created_at … WHERE org_id = … AND text IS NOT NULL AND tsv @@ "
        "websearch_to_tsquery('simple', q) ORDER BY created_at DESC LIMIT 20` on the same async session (one "
        "transaction per call). All history, no scope, no snippets.",
        "- raw same page: one hand-written statement (`SAME_PAGE_SQL` in bench/search.py) that returns exactly "
        "the service's page: the organisation's time zone, the 7-day slice and the probe for older messages, no "
        "join to threads (the bench key sees every live thread, and a deleted thread has no items left, so the "
        "service leaves that join out as well), 21 rows and ts_headline snippets; same session and transaction "
        "handling as raw. The benchmark checks before measuring that its ids and snippets equal the service's.",
        "- same, no snippets: that statement returning the text instead of ts_headline's snippet. The difference "
        "to `same` is what the snippets cost: ts_headline parses every text on the page again, which raw never "
        "does and no plan can avoid.",
        "- service: `contexts.for_credential` + `threads.searching.search`, as the controller runs a "
        "request: the key and its organisation's row in one statement, then the search's one statement (the "
        "policy scope bound as parameters), UTF-16 highlights in Python.",
        "- http: `GET /thread-items?q=…` over loopback to uvicorn in the same process (adds the key lookup, "
        "routing and JSON).",
        "- hits: rows on the first page (the service reads one 7-day slice, so a rare word can come back short "
        "where raw, reading all history, fills its page).",
        "",
        "Goal per class (issue 16, goal 4): service p50 ≤ 20 ms, p95 ≤ 100 ms and p50 ≤ 1.15× the same-page "
        "statement (the same work written by hand: what the platform's Python, driver and plumbing add). "
        "`goal met` judges exactly that. The bare tsquery does less work for frequent words (no slice bounds, "
        "no scope, no snippets) and different work for rare ones (all history); `≤ 1.2× raw` shows the earlier "
        "goal against it, beside the goal, not in place of it. Ratios are shown rounded; the yes/no columns "
        "compare the unrounded ones. Machine: 2 cores shared with other workers.",
    ]
    for number, (rows, info) in enumerate(runs, 1):
        lines += [
            "",
            f"## Run {number} of {len(runs)} ({info['at']}, load average {info['load_before']} before, "
            f"{info['load_after']} after)",
            "",
            "| class | query | raw p50 | raw p95 | same p50 | same p95 | same, no snippets p50 | service p50 "
            "| service p95 | service/raw | service/same | http p50 | http p95 | hits raw/same/service "
            "| goal met | ≤ 1.2× raw |",
            "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- "
            "| --- |",
        ]
        for r in rows:
            lines.append(
                f"| {r['class']} | `{r['query']}` | {r['raw_p50']:.2f} | {r['raw_p95']:.2f} | {r['same_p50']:.2f} | "
                f"{r['same_p95']:.2f} | {r['bare_p50']:.2f} | {r['service_p50']:.2f} | {r['service_p95']:.2f} | "
                f"{r['ratio']:.2f}× | "
                f"{r['ratio_same']:.2f}× | {r['http_p50']:.2f} | {r['http_p95']:.2f} | "
                f"{r['raw_hits']}/{r['same_hits']}/{r['service_hits']} | {'yes' if r['ok'] else 'no'} | "
                f"{'yes' if r['ok_raw'] else 'no'} |")
        lines += ["", *goals(rows)]
    rows, info = runs[-1]
    lines += ["", f"## Plans (`EXPLAIN (ANALYZE, BUFFERS)` of the same-page statement after run {len(runs)})", "",
              "The service's statement has the same shape (`backend/domains/threads/search_sql.py`): the slice's "
              "bounds in a materialised row, the page of hits read laterally from it."]
    for r in rows:
        lines += ["", f"{r['class']} `{r['query']}`:", "", "```", *r["plan"], "```"]
    lines.append("")
    return "\n".join(lines)


def main() -> None:
    global MESSAGES, THREADS
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rebuild", action="store_true", help="regenerate the data set")
    parser.add_argument("--repeat", type=int, default=40, help="calls per class and mode in one run")
    parser.add_argument("--runs", type=int, default=2, help="measuring runs, one after the other")
    parser.add_argument("--messages", type=int, default=1_000_000, help="size of the data set")
    parser.add_argument("--threads", type=int, default=20_000)
    parser.add_argument("--pgdata", default=".coremem/bench-pg", help="where the scratch server keeps its data")
    args = parser.parse_args()
    MESSAGES, THREADS = args.messages, args.threads
    warnings.simplefilter("ignore")
    import logging

    logging.basicConfig(level=logging.WARNING)
    for noisy in ("httpx", "pgserver", "coremem"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    url, server = start_database(Path(args.pgdata))
    try:
        meta = build(url, args.rebuild)
        runs = []
        for _ in range(args.runs):
            load_before = ", ".join(f"{x:.2f}" for x in os.getloadavg())
            rows = asyncio.run(measure(url, meta, args.repeat))
            runs.append((rows, {"at": datetime.now(UTC).isoformat(timespec="seconds"), "load_before": load_before,
                                "load_after": ", ".join(f"{x:.2f}" for x in os.getloadavg())}))
        table = render(runs, meta, args.repeat)
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(table)
        print(table)
        print(f"saved to {RESULTS}")
    finally:
        server.cleanup()
    sys.exit(0)


if __name__ == "__main__":
    main()
