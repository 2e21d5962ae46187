"""PLT-19 as a newcomer meets it: `coremem run` on a fresh data folder (its own embedded PostgreSQL) creates the
demo through the API, serves the API and the dashboard, answers the README's curl tour, and Ctrl-C (SIGINT)
stops every process it started.

The tests share one `coremem run` and run in file order; the last one stops it.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import psutil
import pytest

from tests.e2e.test_dashboard_browser import ROOT, _coremem, _free_port
from tests.test_readme import curl_tour

STARTUP_SECONDS = 120


@dataclass
class Running:
    proc: subprocess.Popen[bytes]
    api: str
    dashboard: str
    data_dir: Path
    log: Path
    env: dict[str, str]

    def printed(self) -> str:
        return self.log.read_text()


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


@pytest.fixture(scope="module")
def running() -> Iterator[Running]:
    """`coremem run` with nothing configured but a fresh data folder, as `make run` starts it the first time."""
    # Short and outside pytest's folders: the embedded server's socket lives in it (paths are limited to ~100
    # bytes) and pytest prunes its old folders while other sessions run.
    data_dir = Path(tempfile.mkdtemp(prefix="coremem-run-"))
    api_port, dash_port = _free_port(), _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("CORE_")}
    env["CORE_DATA_DIR"] = str(data_dir)
    log = data_dir / "run.log"
    with log.open("w") as out:
        proc = subprocess.Popen([*_coremem(), "run", "--port", str(api_port), "--dashboard-port", str(dash_port)],
                                stdout=out, stderr=subprocess.STDOUT, env=env, cwd=ROOT)
    state = Running(proc, f"http://127.0.0.1:{api_port}", f"http://127.0.0.1:{dash_port}", data_dir, log, env)
    try:
        deadline = time.monotonic() + STARTUP_SECONDS
        while not (_answers(f"{state.api}/ready") and _answers(f"{state.dashboard}/_stcore/health")):
            assert proc.poll() is None, state.printed()
            assert time.monotonic() < deadline, state.printed()
            time.sleep(0.3)
        yield state
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=20)


def _printed(text: str, label: str) -> str:
    found = re.search(rf"^\s*{label}:\s+(\S+)", text, re.MULTILINE)
    assert found, f"{label!r} is not in what `coremem run` printed:\n{text}"
    return found.group(1)


def test_plt_19_run_creates_the_demo_through_the_api_on_an_empty_database(running: Running) -> None:
    printed = running.printed()
    assert _printed(printed, "API") == running.api
    assert _printed(printed, "Swagger UI") == f"{running.api}/schema/swagger"
    assert _printed(printed, "Dashboard") == running.dashboard
    org_id = re.search(r"Demo organisation 'Demo' \((org_\w+)\) created", printed)
    assert org_id, printed
    email, password, key = (_printed(printed, label) for label in ("login", "password", "API key"))
    assert email == "admin@demo.local" and key.startswith("ck_")
    # The credentials file the README's tour reads holds what was printed.
    env_file = (running.data_dir / "demo.env").read_text()
    assert f"KEY={key}\n" in env_file and f"ORG={org_id.group(1)}\n" in env_file
    assert oct((running.data_dir / "demo.env").stat().st_mode & 0o777) == "0o600"

    with httpx.Client(base_url=running.api, timeout=10) as http:
        token = http.post("/admin/login", json={"email": email, "password": password})
        assert token.status_code == 200, token.text
        admin = {"Authorization": f"Bearer {token.json()['token']}"}
        assert http.get(f"/tenants/{org_id.group(1)}", headers=admin).json()["timezone"] == "Europe/Amsterdam"
        records = http.get("/memory/stats", headers=admin).json()
        assert records["people"] >= 40 and records["records"] >= 300 and records["shared"] > 0, records
        threads = http.get("/threads/stats", headers=admin).json()
        assert threads["threads"] >= 20 and threads["messages"]["assistant"] >= 20, threads
        stores = http.get("/indexes", headers={"Authorization": f"Bearer {key}"}).json()["data"]
        assert {s["name"] for s in stores} == {"Customer support", "People and payroll", "Sales"}
        support = next(s["id"] for s in stores if s["name"] == "Customer support")
        runs = http.get(f"/memory/stores/{support}/extraction/runs", headers=admin).json()["data"]
        assert runs and runs[0]["finished_at"] and runs[0]["written"] > 0, runs  # the recorded model's run
        windows = http.get(f"/memory/stores/{support}/extraction", headers=admin).json()["windows"]
        assert windows["ready"] > 0 and windows["failed"] > 0, windows
        proposals = http.get("/memory/proposals", headers=admin).json()["data"]
        assert any(p["people"] >= 2 for p in proposals), proposals  # the maintenance pass after the run
        swagger = http.get("/schema/swagger")
        assert swagger.status_code == 200 and "swagger" in swagger.text.lower()

    # The dashboard's first page: Streamlit's page, served over HTTP (the browser test drives it further).
    page = httpx.get(running.dashboard, timeout=10)
    assert page.status_code == 200 and '<div id="root">' in page.text


def test_the_readme_curl_tour_runs_top_to_bottom_against_the_demo(running: Running) -> None:
    """Every command of the README's tour answers 2xx; a variable used before it is set fails the script."""
    tour = curl_tour()
    first, _, rest = tour.partition("\n")
    assert first == "BASE=http://127.0.0.1:8000", "the tour starts by naming the API's address"
    prelude = "\n".join([
        "set -euo pipefail -o xtrace",
        # Any answer outside 2xx ends the script with curl's exit code 22, printing the answer's body.
        'curl() { command curl --fail-with-body --show-error --max-time 30 "$@" && echo; }',
        f"BASE={running.api}",
    ])

    def bash(body: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["bash", "-c", f"{prelude}\n{body}\necho TOUR-COMPLETE"], env=running.env, cwd=ROOT,
                              capture_output=True, text=True, timeout=300)

    # The harness itself stops at a refusal, also one inside a command substitution.
    for failing in ("curl -s $BASE/key", 'X=$(curl -s $BASE/key | cat)'):
        refused = bash(failing)
        assert refused.returncode == 22 and "TOUR-COMPLETE" not in refused.stdout, (failing, refused)
    done = bash(rest)
    report = f"exit {done.returncode}\n--- stdout (end)\n{done.stdout[-6000:]}\n--- stderr (end)\n{done.stderr[-4000:]}"
    assert done.returncode == 0, report
    assert done.stdout.rstrip().endswith("TOUR-COMPLETE"), report
    # The searches find what the tour and the demo hold, not an empty page.
    assert "thursday" in done.stdout.lower() and "drie uur" in done.stdout and "terugbetaling" in done.stdout


def test_plt_19_sigint_stops_the_api_the_dashboard_and_the_database(running: Running) -> None:
    parent = psutil.Process(running.proc.pid)
    children = parent.children(recursive=True)
    assert any("streamlit" in " ".join(c.cmdline()) for c in children), [c.cmdline() for c in children]
    postmaster = running.data_dir / "pg" / "postmaster.pid"
    database_pid = int(postmaster.read_text().splitlines()[0])
    assert psutil.pid_exists(database_pid)

    running.proc.send_signal(signal.SIGINT)
    assert running.proc.wait(timeout=60) == 0, running.printed()
    _, alive = psutil.wait_procs(children, timeout=15)
    assert alive == [], f"still running after Ctrl-C: {[p.cmdline() for p in alive]}"
    deadline = time.monotonic() + 15
    while psutil.pid_exists(database_pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not psutil.pid_exists(database_pid), "the embedded PostgreSQL outlived `coremem run`"
    assert not _answers(f"{running.api}/health") and not _answers(f"{running.dashboard}/_stcore/health")


def _start(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("w") as out:
        return subprocess.Popen([*_coremem(), "run", *args], stdout=out, stderr=subprocess.STDOUT, env=env, cwd=ROOT)


def _wait_ready(proc: subprocess.Popen[bytes], log: Path, *urls: str) -> None:
    deadline = time.monotonic() + STARTUP_SECONDS
    while not all(_answers(u) for u in urls):
        assert proc.poll() is None, log.read_text()
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.3)


def test_plt_19_sigterm_stops_both_and_a_restart_keeps_the_one_demo(database_url: str, tmp_path: Path) -> None:
    """A process manager's SIGTERM stops the API and the dashboard; the next start finds the demo, makes none."""
    api_port, dash_port = _free_port(), _free_port()
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("CORE_")}, "CORE_DATABASE_URL": database_url,
           "CORE_DATA_DIR": str(tmp_path / "data"), "CORE_SECRET": "run-test-secret-" + "x" * 20}
    api, dashboard = f"http://127.0.0.1:{api_port}", f"http://127.0.0.1:{dash_port}"
    first = tmp_path / "first.log"
    proc = _start(["--port", str(api_port), "--dashboard-port", str(dash_port)], env, first)
    try:
        _wait_ready(proc, first, f"{api}/ready", f"{dashboard}/_stcore/health")
        org_id = re.search(r"Demo organisation 'Demo' \((org_\w+)\) created", first.read_text())
        assert org_id, first.read_text()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    deadline = time.monotonic() + 15
    while _answers(f"{dashboard}/_stcore/health") and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _answers(f"{dashboard}/_stcore/health"), "the dashboard outlived `coremem run`"
    assert not _answers(f"{api}/health")

    second = tmp_path / "second.log"
    proc = _start(["--port", str(api_port), "--no-dashboard"], env, second)
    try:
        _wait_ready(proc, second, f"{api}/ready")
        printed = second.read_text()
        assert "created" not in printed and f"Demo organisation 'Demo' ({org_id.group(1)}); log in as" in printed
        assert f"kept in {tmp_path / 'data' / 'demo.env'}" in printed
        assert "Dashboard:" not in printed
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
