"""PLT-19: `coremem run` starts the dashboard beside the API, prints both URLs, and stops both."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import httpx

from tests.e2e.test_dashboard_browser import ROOT, _coremem, _free_port


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def test_plt_19_run_starts_api_and_dashboard_and_stops_both(database_url: str, tmp_path: Path) -> None:
    api_port, dash_port = _free_port(), _free_port()
    env = {**os.environ, "CORE_DATABASE_URL": database_url, "CORE_DATA_DIR": str(tmp_path / "data"),
           "CORE_SECRET": "run-test-secret-" + "x" * 20}
    log = tmp_path / "run.log"
    with log.open("w") as out:
        proc = subprocess.Popen([*_coremem(), "run", "--port", str(api_port), "--dashboard-port", str(dash_port)],
                                stdout=out, stderr=subprocess.STDOUT, env=env, cwd=ROOT)
    api, dashboard = f"http://127.0.0.1:{api_port}", f"http://127.0.0.1:{dash_port}"
    try:
        deadline = time.monotonic() + 60
        while not (_answers(f"{api}/health") and _answers(f"{dashboard}/_stcore/health")):
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        printed = log.read_text()
        assert f"API:       {api}\n" in printed
        assert f"Dashboard: {dashboard}\n" in printed  # no demo administrator in this database: no login hint
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)
    deadline = time.monotonic() + 10
    while _answers(f"{dashboard}/_stcore/health") and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _answers(f"{dashboard}/_stcore/health"), "the dashboard outlived `coremem run`"
    assert not _answers(f"{api}/health")
