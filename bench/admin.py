"""Issue 16 goal 7, administrators at scale: `GET /memory/stats` and the dashboard's first render of every page at
1,000,000 memory records (bench-injection's data set: one store, 10,000 people, 20% shared).

`coremem serve` and `coremem dashboard` run as a user starts them, on the data set's embedded PostgreSQL; the
routes are called over loopback HTTP as an administrator and as a key naming one person (the median one), and
every answer is checked against a hand-written statement run as the tables' owner (status, shape and every
count); a wrong answer stops the run. The pages are opened in headless Chromium (Debian's /usr/bin/chromium via
playwright, as tests/e2e does), each in a fresh browser session: log in (lands on the Overview), then click the page's
link and time, in the page, until the last script run the click started is over. The Overview is where log-in
lands: its first render is timed from its *Refresh* button, which forgets every cached answer and runs it again.

    make bench-admin                     # builds the data set once with bench.injection if it is missing
    python -m bench.admin --repeat 30 --page-repeat 3

Prints PASS or FAIL per goal and writes bench/results/admin.md (machine, versions, the EXPLAIN (ANALYZE, BUFFERS)
of the stats statement, the table). Not part of `make test`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.http import REPO, SECRET, InvalidRun, Server, _free_port, _revision, plain, start_product, start_server
from bench.http import _bootstrap as bootstrap
from bench.search import percentile, start_database

RESULTS = Path(__file__).parent / "results" / "admin.md"
ORG_NAME = "BenchInjection"
ADMIN_EMAIL = "bench-admin@bench.local"
STATS_GOAL_MS = 300.0
PAGE_GOAL_S = 1.0
CHROMIUM = os.environ.get("CORE_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
IDLE = '[data-testid="stApp"][data-test-script-state="notRunning"]'
WAIT_MS = 60_000

# The equivalent hand-written statement (house rule 12): one pass over the organisation's live records, grouped
# by store, type and owner, then summed per owner kind, with the distinct owners; `{who}` is the person's
# visibility (her records and the shared ones, never what maintenance wrote about someone else), or nothing.
HAND = """
WITH g AS MATERIALIZED (
  SELECT index_id, type, subject, count(*) AS n FROM memory_records
  WHERE org_id = %(org)s AND status = 'active' AND (expires_at IS NULL OR expires_at > now()) {who}
  GROUP BY index_id, type, subject)
SELECT index_id, type, subject IS NULL AS shared, sum(n)::bigint AS records FROM g GROUP BY 1, 2, 3
UNION ALL SELECT NULL, NULL, NULL, count(DISTINCT subject) FROM g
"""
PERSON_WHERE = ("AND (subject = %(person)s OR subject IS NULL) "
                "AND (source <> 'maintenance' OR subject = %(person)s)")


def dataset(url: str, pgdata: Path) -> dict[str, Any]:
    """The injection data set's organisation, store and median person; builds it when it is missing."""
    import psycopg

    from backend.db import migrate

    migrate.upgrade(url)
    with psycopg.connect(plain(url), autocommit=True) as conn:
        row = conn.execute("SELECT o.id, (SELECT count(*) FROM memory_records r WHERE r.org_id = o.id) FROM orgs o "
                           "WHERE o.name = %s", (ORG_NAME,)).fetchone()
    if row is None or row[1] < 1_000_000:
        subprocess.run([sys.executable, "-m", "bench.injection", "--rebuild", "--repeat", "1", "--pgdata",
                        str(pgdata), "--out", str(Path(tempfile.mkdtemp()) / "injection.md")], cwd=REPO, check=True)
        return dataset(url, pgdata)
    with psycopg.connect(plain(url), autocommit=True) as conn:
        people = conn.execute("SELECT subject, count(*) FROM memory_records WHERE org_id = %s AND subject IS NOT "
                              "NULL GROUP BY subject ORDER BY count(*), subject", (row[0],)).fetchall()
    median = people[len(people) // 2]
    return {"org_id": row[0], "records": int(row[1]), "people": len(people), "person": median[0],
            "person_records": int(median[1])}


def expected(url: str, meta: dict[str, Any]) -> tuple[dict[str, dict[str, Any]], dict[str, list[float]]]:
    """What each caller must be answered, by the hand-written statement, and that statement's own times."""
    import psycopg

    answers: dict[str, dict[str, Any]] = {}
    times: dict[str, list[float]] = {"admin": [], "person": []}
    with psycopg.connect(plain(url), autocommit=True) as conn:
        conn.execute("SET max_parallel_workers_per_gather = 2")
        for who, where in (("admin", ""), ("person", PERSON_WHERE)):
            for _ in range(5):
                started = time.perf_counter()
                rows = conn.execute(HAND.format(who=where), {"org": meta["org_id"], "person": meta["person"]}
                                    ).fetchall()
                times[who].append((time.perf_counter() - started) * 1000)
            groups = sorted((r[0], r[1], bool(r[2]), int(r[3])) for r in rows if r[0] is not None)
            answers[who] = {"records": sum(g[3] for g in groups), "shared": sum(g[3] for g in groups if g[2]),
                            "people": next(int(r[3]) for r in rows if r[0] is None), "groups": groups}
    return answers, times


def check(who: str, response: Any, want: dict[str, Any]) -> None:
    """A measured answer counts only when it is 200, has MemoryStats' shape and every count is the expected one."""
    import msgspec

    from shared.schemas.memory import MemoryStats

    if response.status_code != 200:
        raise InvalidRun(f"GET /memory/stats as {who} answered {response.status_code}: {response.text[:300]}")
    body = msgspec.json.decode(response.content, type=MemoryStats)
    groups = sorted((g.index_id, g.type, g.shared, g.records) for g in body.groups)
    found = {"records": body.records, "shared": body.shared, "people": body.people, "groups": groups}
    if found != want:
        raise InvalidRun(f"GET /memory/stats as {who} answered {found}, the hand-written statement {want}")


def measure_stats(server: Server, boot: dict[str, Any], meta: dict[str, Any], want: dict[str, dict[str, Any]],
                  repeat: int) -> dict[str, list[float]]:
    """Milliseconds per answer, the two callers interleaved (the order turns every round), after 3 warm-ups."""
    import httpx

    headers = {"admin": {"Authorization": f"Bearer {boot['admin_token']}"},
               "person": {"Authorization": f"Bearer {boot['key']}",
                          "X-Core-Subject": json.dumps({"id": meta["person"]})}}
    times: dict[str, list[float]] = {"admin": [], "person": []}
    with httpx.Client(base_url=server.base, timeout=120) as client:
        for n in range(repeat + 3):
            for who in (("admin", "person") if n % 2 == 0 else ("person", "admin")):
                started = time.perf_counter()
                response = client.get("/memory/stats", headers=headers[who])
                elapsed = (time.perf_counter() - started) * 1000
                check(who, response, want[who])
                if n >= 3:
                    times[who].append(elapsed)
    return times


def explain(url: str, meta: dict[str, Any]) -> str:
    """EXPLAIN (ANALYZE, BUFFERS) of the statement `repository.counts` runs for an administrator, taken where the API
    runs it (bench/plans.py: the application's role, the organisation set for row-level security, the prepared
    statement's own text and parameters)."""
    from backend.access.actor import Actor
    from backend.access.principal import Principal
    from backend.access.scope import build_scope
    from backend.db.engine import make_engine, make_sessionmaker
    from backend.db.tenant import use_org
    from backend.domains.memory import decay
    from backend.domains.memory import repository as repo
    from backend.domains.orgs import repository as orgs_repo
    from bench.plans import Wanted, rolled_back
    from shared.schemas.memory import MemoryQuery

    wanted = [Wanted("The counts statement", lambda sql: "memory_records" in sql)]

    async def count(db: Any) -> None:
        await use_org(db, meta["org_id"])
        org = await orgs_repo.get(db, meta["org_id"]) or {}
        admin = Principal("admin", meta["org_id"], Actor("admin", "bench"), frozenset(), None, admin={"role": "admin"})
        await repo.counts(db, build_scope(admin, org), decay.half_lives(org, None), MemoryQuery())

    async def go() -> str:
        engine = make_engine(url, pool_size=1)
        try:
            plans = await rolled_back(make_sessionmaker(engine), wanted, count)
        finally:
            await engine.dispose()
        plan = plans[wanted[0].label]
        return plan if isinstance(plan, str) else "```text\n" + "\n".join(plan) + "\n```"

    return asyncio.run(go())


def first_renders(api: str, boot: dict[str, Any], work: Path, repeat: int) -> dict[str, list[float]]:
    """Seconds from opening each page (a fresh browser session, logged in) until its script run is over."""
    from playwright.sync_api import sync_playwright

    from dashboard import navigation

    port = _free_port()
    dash = start_server("dashboard", [str(Path(sys.executable).parent / "coremem"), "dashboard", "--host",
                                      "127.0.0.1", "--port", str(port), "--api-url", api],
                        {**os.environ}, port, "/_stcore/health", work)
    pages = navigation.all_pages()
    found: dict[str, list[float]] = {p.title: [] for p in pages}
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
            try:
                for n in range(repeat + 1):  # the first round warms Streamlit's imports and is not counted
                    for spec in pages:
                        seconds = _open(browser, dash.base, boot, spec.title, spec is pages[0])
                        if n:
                            found[spec.title].append(seconds)
            finally:
                browser.close()
    finally:
        dash.stop()
    return found


# Times the page itself keeps, read every 4 ms: when the click happened, when each script run began and ended, and
# when the page's heading was first drawn after the click. A page that calls nothing may run in less than one
# reading; then it is drawn when its heading is (with the app idle). So playwright's waiting is not counted.
WATCH = """title => { window.__runs = []; window.__clicked = null; window.__seen = null; let last = null;
  window.setInterval(() => {
    const app = document.querySelector('[data-testid="stApp"]');
    const state = app ? app.getAttribute('data-test-script-state') : null;
    if (state !== last) { window.__runs.push([performance.now(), state]); last = state; }
    if (window.__clicked !== null && window.__seen === null && Array.from(document.querySelectorAll(
        '[data-testid="stMain"] h1')).some(h => h.innerText.trim() === title)) window.__seen = performance.now();
  }, 4); }"""
CLICK = "el => { window.__clicked = performance.now(); el.click(); }"
SETTLED = """() => { const after = window.__runs.filter(([t, s]) => t > window.__clicked);
  const ends = after.filter(([t, s]) => s === 'notRunning');
  if (after.some(([t, s]) => s === 'running') && ends.length) return ends[ends.length - 1][0] - window.__clicked;
  const app = document.querySelector('[data-testid="stApp"]');
  const idle = app && app.getAttribute('data-test-script-state') === 'notRunning';
  return idle && window.__seen !== null ? window.__seen - window.__clicked : null; }"""


def _open(browser: Any, base: str, boot: dict[str, Any], title: str, landing: bool) -> float:
    """Log in (lands on the Overview), then open the page: for the Overview itself, its *Refresh* button (every
    cached answer forgotten, the page run again). Seconds from the click until the last script run it started is
    over, with the page's heading shown and no error on it."""
    context = browser.new_context(viewport={"width": 1440, "height": 1000})
    try:
        page = context.new_page()
        page.goto(base, timeout=WAIT_MS)
        page.get_by_label("E-mail").fill(boot["admin_email"])
        page.get_by_label("Password", exact=True).fill(boot["admin_password"])
        page.get_by_role("button", name="Log in").click()
        page.get_by_role("heading", name="Overview", exact=True).wait_for(timeout=WAIT_MS)
        page.wait_for_selector(IDLE, timeout=WAIT_MS)
        page.evaluate(WATCH, title)
        target = (page.get_by_role("button", name="Refresh") if landing
                  else page.locator('[data-testid="stSidebarNav"] a', has_text=title))
        target.evaluate(CLICK)
        page.get_by_role("heading", name=title, exact=True).wait_for(timeout=WAIT_MS)
        try:
            page.wait_for_function(SETTLED, timeout=WAIT_MS)
        except Exception as exc:
            runs = page.evaluate("() => [window.__clicked, window.__runs]")
            raise InvalidRun(f"the {title} page: no script run seen ending after the click: {runs}") from exc
        page.wait_for_selector(IDLE, timeout=WAIT_MS)
        page.wait_for_timeout(300)  # a run the page starts again on its own would begin within this
        page.wait_for_selector(IDLE, timeout=WAIT_MS)
        problems = page.locator('[data-testid="stException"], [data-testid="stAlertContentError"]')
        if problems.count():
            raise InvalidRun(f"the {title} page shows an error: {problems.all_inner_texts()}")
        return float(page.evaluate(SETTLED)) / 1000
    finally:
        context.close()


def versions() -> str:
    import importlib.metadata as md

    import psycopg

    names = ("litestar", "streamlit", "playwright", "sqlalchemy", "psycopg", "pgserver")
    chromium = subprocess.run([CHROMIUM, "--version"], capture_output=True, text=True).stdout.strip()
    found = ", ".join(f"{n} {md.version(n)}" for n in names)
    return f"CPython {platform.python_version()}, {found}, libpq {psycopg.pq.version()}, {chromium}"


def render(meta: dict[str, Any], stats: dict[str, list[float]], hand: dict[str, list[float]],
           pages: dict[str, list[float]], plan: str, info: dict[str, str]) -> tuple[str, list[str]]:
    goals = []
    rows = ["| what | samples | p50 | p95 | max | goal |", "| --- | ---: | ---: | ---: | ---: | --- |"]
    for who, label in (("admin", "administrator"), ("person", f"key naming {meta['person']}")):
        p50 = statistics.median(stats[who])
        ok, floor = p50 <= STATS_GOAL_MS, statistics.median(hand[who])
        goals.append(f"- {'PASS' if ok else 'FAIL'}: GET /memory/stats as {label}: p50 {p50:.0f} ms "
                     f"(goal ≤ {STATS_GOAL_MS:.0f} ms; the hand-written statement {floor:.0f} ms)")
        rows.append(f"| GET /memory/stats, {label} (ms) | {len(stats[who])} | {p50:.0f} | "
                    f"{percentile(stats[who], 95):.0f} | {max(stats[who]):.0f} | ≤ {STATS_GOAL_MS:.0f} ms p50 |")
        rows.append(f"| the hand-written statement, {label} (ms) | {len(hand[who])} | "
                    f"{statistics.median(hand[who]):.0f} | {percentile(hand[who], 95):.0f} | {max(hand[who]):.0f} | |")
    for title, values in pages.items():
        worst = max(values)
        goals.append(f"- {'PASS' if worst <= PAGE_GOAL_S else 'FAIL'}: {title} first render: median "
                     f"{statistics.median(values) * 1000:.0f} ms, slowest {worst * 1000:.0f} ms (goal ≤ "
                     f"{PAGE_GOAL_S * 1000:.0f} ms, every sample)")
        rows.append(f"| {title} page, first render (ms) | {len(values)} | {statistics.median(values) * 1000:.0f} | "
                    f"{percentile(values, 95) * 1000:.0f} | {worst * 1000:.0f} | ≤ {PAGE_GOAL_S * 1000:.0f} ms |")
    text = "\n".join([
        "# Administrators at scale (issue 16 goal 7)", "",
        f"Measured {info['when']} on {platform.node()} ({platform.machine()}, {os.cpu_count()} cores shared with "
        f"other work; load average after the run {info['load']}), {info['revision']}.",
        f"Versions: {info['versions']}; embedded PostgreSQL {info['postgres']}.",
        f"Data: bench-injection's organisation, {meta['records']:,} records in one store, {meta['people']:,} people "
        f"with records, 20% shared; the person is the median one ({meta['person']}, {meta['person_records']} "
        "records).", "",
        "- GET /memory/stats over loopback HTTP to `coremem serve`, as an administrator (token from log-in) and as "
        "the bootstrap key naming the person (`X-Core-Subject`), interleaved after 3 warm-ups; every answer checked "
        "(200, MemoryStats' shape, every count equal to the hand-written statement's).",
        "- The hand-written statement (`HAND` in bench/admin.py) runs as the tables' owner, without row-level "
        "security, on one psycopg connection: the floor the route is measured against.",
        "- Pages: `coremem dashboard` in headless Chromium, each sample a fresh browser session: log in (lands on the "
        "Overview; not timed), then the page's link in the sidebar (for the Overview: its *Refresh* button, every "
        "cached answer forgotten), timed in the page from the click until the last script run it started is over, "
        "with the page's heading shown; no exception or error box allowed. A page may use what the Overview "
        "cached for 30 s in the same session, as an administrator's visit does.", "",
        *rows, "", "## Goals", "", *goals, "",
        "## The stats statement, as the API runs it for an administrator", "", plan, "",
    ])
    return text, goals


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=30, help="stats answers measured per caller")
    parser.add_argument("--page-repeat", type=int, default=3, help="first renders measured per page")
    parser.add_argument("--stats-only", action="store_true", help="leave the pages out (a quicker look)")
    parser.add_argument("--pgdata", type=Path, default=Path(".coremem/bench-pg"))
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    if not Path(CHROMIUM).exists():
        print(f"{CHROMIUM} is missing: apt-get install -y chromium, or set CORE_CHROMIUM", file=sys.stderr)
        return 2
    # The servers run this checkout's code, also where the venv's editable install points at another one (a git
    # worktree): its finder comes after the path, so PYTHONPATH wins.
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
    url, _pg = start_database(args.pgdata)
    meta = dataset(url, args.pgdata)
    boot = bootstrap(url, ORG_NAME, ADMIN_EMAIL, SECRET)  # the data set's administrator (fresh password), a key
    want, hand = expected(url, meta)
    work = Path(tempfile.mkdtemp(prefix="coremem-bench-admin-"))
    server = start_product(url, work)
    try:
        stats = measure_stats(server, boot, meta, want, args.repeat)
        pages = {} if args.stats_only else first_renders(server.base, boot, work, args.page_repeat)
    finally:
        server.stop()
    plan = explain(url, meta)
    import psycopg

    with psycopg.connect(plain(url)) as conn:
        postgres = str(conn.execute("SHOW server_version").fetchone()[0])  # type: ignore[index]
    info = {"when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "load": ", ".join(
        f"{x:.2f}" for x in os.getloadavg()), "revision": _revision(), "versions": versions(), "postgres": postgres}
    text, goals = render(meta, stats, hand, pages, plan, info)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print("\n".join(goals))
    print(f"written to {args.out}")
    return 0  # a failing goal is in the report; a non-zero exit means the benchmark broke


if __name__ == "__main__":
    raise SystemExit(main())
