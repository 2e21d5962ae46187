"""Benchmark of the extraction health page (DSH-5): how long the page takes to render for a store with 100,000
extraction windows.

A scratch embedded PostgreSQL gets an organisation (bootstrap), a store with an extraction switch (through the
API), one thread, and 100,000 windows over 12 runs written with one INSERT … SELECT (tests/dashboard/extraction_seed.py,
the same rows the page's tests use at 1,000). The API runs as `coremem serve` in a process of its own; the page
runs in Streamlit's AppTest in this process, as the tests drive it. Each sample is a fresh dashboard session (so
nothing is cached): log in (not timed), then open the page (timed: every call the page makes, the charts and the
tables). A second run of the same session (answers cached for 30 s) is timed as well, and the two aggregated
routes the page reads are timed on their own over HTTP.

    make bench-dashboard
    python -m bench.dashboard --windows 100000 --repeat 7

The table is printed and written to bench/results/dashboard.md. Not part of `make test`.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.http import REPO, InvalidRun, Server, _free_port, plain, start_server

SECRET = "bench-dashboard-secret-" + "x" * 16
DATABASE = "coremem_bench_dashboard"
RESULTS = Path(__file__).parent / "results" / "dashboard.md"
APP = REPO / "dashboard" / "streamlit_app.py"
PAGE = "app_pages/extraction.py"
GOAL_SECONDS = 2.0


def _bootstrap(url: str) -> dict[str, Any]:
    import asyncio

    from backend.db.engine import make_engine, make_sessionmaker
    from backend.domains.orgs import service

    async def go() -> dict[str, Any]:
        engine = make_engine(url, pool_size=1, app_role=False)  # the data builder, as the tables' owner
        try:
            async with make_sessionmaker(engine)() as db, db.begin():
                return await service.bootstrap(db, org_name="Bench", admin_email="bench-dashboard@bench.local",
                                               secret=SECRET, key_retention_days=400, ttl_seconds=3600)
        finally:
            await engine.dispose()

    return asyncio.run(go())


def _call(client: Any, method: str, path: str, expected: int, **kwargs: Any) -> Any:
    response = client.request(method, path, **kwargs)
    if response.status_code != expected:
        raise InvalidRun(f"{method} {path} answered {response.status_code}, not {expected}: {response.text}")
    return response.json()


def build(server: Server, url: str, windows: int) -> dict[str, Any]:
    """The organisation, a store with its switch and one thread through the API; the windows by SQL."""
    import httpx
    import psycopg

    from tests.dashboard.extraction_seed import seed_windows

    boot = _bootstrap(url)
    admin = {"Authorization": f"Bearer {boot['admin_token']}"}
    key = {"Authorization": f"Bearer {boot['key']}"}
    with httpx.Client(base_url=server.base, timeout=60) as client:
        _call(client, "POST", "/admin/models", 201, headers=admin,
              json={"id": "bench-model", "provider": "replay", "model": "demo"})
        index_id = _call(client, "POST", "/indexes", 201, headers=key, json={"name": "people"})["id"]
        _call(client, "PUT", f"/memory/stores/{index_id}/extraction", 200, headers=key,
              json={"enabled": True, "model": "bench-model", "quiet_minutes": 0})
        thread = _call(client, "POST", "/threads", 201, headers={**key, "X-Core-Subject": '{"id": "anna"}'},
                       json={"items": [{"type": "message", "role": "user", "content": "I moved to Utrecht."}]})
    with psycopg.connect(plain(url), autocommit=True) as conn:
        seed_windows(conn, boot["org_id"], index_id, windows, thread["id"])
    return {**boot, "index_id": index_id}


def render_times(api: str, boot: dict[str, Any], repeat: int) -> tuple[list[float], list[float]]:
    """Seconds to open the page in a fresh session (nothing cached), and to run it again in that session."""
    from streamlit.testing.v1 import AppTest

    cold: list[float] = []
    warm: list[float] = []
    for _ in range(repeat):
        at = AppTest.from_file(str(APP), default_timeout=60)
        at.session_state["api_url"] = api
        at.run()
        at.text_input(key="login_email").input(boot["admin_email"])
        at.text_input(key="login_password").input(boot["admin_password"])
        at.button(key="login_submit").click().run()
        started = time.perf_counter()
        at.switch_page(PAGE).run()
        cold.append(time.perf_counter() - started)
        if at.exception or [m for m in at.metric if m.label == "Ready"] == []:
            raise InvalidRun(f"the page did not render: {[e.value for e in at.exception]}")
        started = time.perf_counter()
        at.run()
        warm.append(time.perf_counter() - started)
    return cold, warm


def route_times(api: str, boot: dict[str, Any], repeat: int) -> dict[str, list[float]]:
    import httpx

    index_id = boot["index_id"]
    routes = {
        "GET …/extraction": f"/memory/stores/{index_id}/extraction",
        "GET …/extraction/windows?state=failed&bucket=hour&buckets=48&limit=50":
            f"/memory/stores/{index_id}/extraction/windows?state=failed&bucket=hour&buckets=48&limit=50",
        "GET …/extraction/runs?limit=30": f"/memory/stores/{index_id}/extraction/runs?limit=30",
    }
    found: dict[str, list[float]] = {name: [] for name in routes}
    with httpx.Client(base_url=api, timeout=60, headers={"Authorization": f"Bearer {boot['admin_token']}"}) as client:
        for _ in range(repeat):
            for name, path in routes.items():
                started = time.perf_counter()
                _call(client, "GET", path, 200)
                found[name].append(time.perf_counter() - started)
    return found


def table(windows: int, cold: list[float], warm: list[float], routes: dict[str, list[float]]) -> str:
    def row(name: str, values: list[float]) -> str:
        return (f"| {name} | {len(values)} | {statistics.median(values) * 1000:.0f} | {max(values) * 1000:.0f} |")

    lines = [
        "# Extraction health page at 100k windows (DSH-5)",
        "",
        f"Measured {datetime.now(UTC):%Y-%m-%d %H:%M} UTC on {platform.node()} ({platform.machine()}, "
        f"Python {platform.python_version()}), {windows:,} windows over 12 runs in one store. The machine is shared "
        "with other workers; times are wall-clock.",
        "",
        "| what | samples | median ms | max ms |",
        "| --- | ---: | ---: | ---: |",
        row("open the page, fresh session (every API call, charts, tables)", cold),
        row("run the page again in that session (answers cached)", warm),
        *(row(name, values) for name, values in routes.items()),
        "",
        f"- {'PASS' if statistics.median(cold) < GOAL_SECONDS else 'FAIL'}: the extraction health page's fresh-session "
        f"render, median {statistics.median(cold) * 1000:.0f} ms at {windows:,} windows (goal < {GOAL_SECONDS:.0f} s)",
        "",
    ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--windows", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    from backend.db import migrate
    from backend.db.embedded import ensure_database, socket_url
    from backend.db.embedded import start_server as start_pg

    work = Path(tempfile.mkdtemp(prefix="coremem-bench-dashboard-"))
    pg = start_pg(work / "pg", cleanup_mode="stop")
    server: Server | None = None
    try:
        ensure_database(pg, DATABASE)
        url = socket_url(work / "pg", DATABASE)
        migrate.upgrade(url)
        port = _free_port()
        coremem = str(Path(sys.executable).parent / "coremem")
        env = {**os.environ, "CORE_DATABASE_URL": url, "CORE_DATA_DIR": str(work / "data"), "CORE_SECRET": SECRET}
        server = start_server("product", [coremem, "serve", "--host", "127.0.0.1", "--port", str(port)], env, port,
                              "/health", work)
        boot = build(server, url, args.windows)
        cold, warm = render_times(server.base, boot, args.repeat)
        routes = route_times(server.base, boot, args.repeat)
        text = table(args.windows, cold, warm, routes)
        print(text)
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(text)
    finally:
        if server is not None:
            server.stop()
        pg.cleanup()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
