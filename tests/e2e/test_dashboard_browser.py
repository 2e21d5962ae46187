"""DSH-11 end to end: `coremem dashboard` against the live API, driven by headless Chromium.

Logs in (after one wrong password), opens every page the registry lists, fails on any Streamlit exception
or error box, and keeps a screenshot of each page in test-artifacts/screenshots/.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Page, sync_playwright

from dashboard import navigation
from tests.helpers import Org, bearer

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "test-artifacts" / "screenshots"
CHROMIUM = os.environ.get("CORE_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
IDLE = '[data-testid="stApp"][data-test-script-state="notRunning"]'
WAIT_MS = 30_000


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _coremem() -> list[str]:
    script = Path(sys.executable).parent / "coremem"
    return [str(script)] if script.exists() else [sys.executable, "-m", "backend.cli"]


@pytest.fixture
def dashboard_url(live_api: str, tmp_path: Path) -> Iterator[str]:
    """`coremem dashboard` on a free port, pointed at the live API."""
    port = _free_port()
    log = (tmp_path / "dashboard.log").open("w+")
    proc = subprocess.Popen([*_coremem(), "dashboard", "--host", "127.0.0.1", "--port", str(port),
                             "--api-url", live_api], stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                log.seek(0)
                pytest.fail(f"coremem dashboard exited with {proc.returncode}:\n{log.read()}")
            try:
                if httpx.get(f"{url}/_stcore/health", timeout=1).text == "ok":
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail("coremem dashboard did not answer within 60 s")
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def settle(page: Page) -> None:
    """Wait until the script run is over and the page had a moment to draw its tables and charts."""
    page.wait_for_selector(IDLE, timeout=WAIT_MS)
    page.wait_for_timeout(800)
    page.wait_for_selector(IDLE, timeout=WAIT_MS)


def assert_clean(page: Page, where: str) -> None:
    exceptions = page.locator('[data-testid="stException"]')
    assert exceptions.count() == 0, f"{where}: Streamlit exception: {exceptions.all_inner_texts()}"
    errors = page.locator('[data-testid="stAlertContentError"]')
    assert errors.count() == 0, f"{where}: error shown: {errors.all_inner_texts()}"


def shot(page: Page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def test_dsh_11_browser_logs_in_and_opens_every_page(dashboard_url: str, org: Org) -> None:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing; install Debian's chromium (apt-get install -y chromium) "
                    "or point CORE_CHROMIUM at a Chromium binary")
    # Something on every page: an index with records and changed settings, a second key, and so audit events.
    index = org.client.post("/indexes", json={"name": "handbook"}, headers=org.full)
    assert index.status_code == 201
    index_id = index.json()["id"]
    org.make_key(["knowledge"], name="reader")
    for text, person, kind in (("The office opens at eight", None, "fact"), ("Anna drinks green tea", "anna",
                                                                             "preference"),
                               ("Bert cycles to work", "bert", "fact")):
        written = org.client.post("/memory", json={"index_id": index_id, "type": kind, "text": text},
                                  headers=bearer(org.key, person) if person else org.full)
        assert written.status_code == 201, written.text
    opened = written.json()["id"]
    changed = org.client.patch(f"/memory/stores/{index_id}", json={"commitments": {"inject_limit": 3}},
                               headers=org.admin)
    assert changed.status_code == 200, changed.text
    thread = org.client.post("/threads", headers=bearer(org.key, "anna"), json={
        "metadata": {"dossier": "4711"},
        "items": [{"type": "message", "role": "user", "content": "🎉 Wanneer komt mijn terugbetaling?"},
                  {"type": "function_call", "call_id": "c1", "name": "refund_status", "arguments": '{"order": 7}'},
                  {"type": "message", "role": "assistant", "content": "Uw terugbetaling komt binnen vijf dagen."}]})
    assert thread.status_code == 201, thread.text
    thread_id = thread.json()["id"]
    state = org.client.put(f"/threads/{thread_id}/state", json={"state": {"step": "refund"}}, headers=org.full)
    assert state.status_code == 200, state.text

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1600})
            page.goto(dashboard_url, timeout=WAIT_MS)
            settle(page)
            page.get_by_role("heading", name="coremem").wait_for(timeout=WAIT_MS)
            assert_clean(page, "login")
            shot(page, "00-login")

            page.get_by_label("E-mail").fill(org.admin_email)
            page.get_by_label("Password", exact=True).fill("not-the-password")
            page.get_by_role("button", name="Log in").click()
            error = page.locator('[data-testid="stAlertContentError"]')
            error.wait_for(timeout=WAIT_MS)
            assert "Wrong e-mail address or password." in error.inner_text() and "bad_login" in error.inner_text()
            assert page.locator('[data-testid="stException"]').count() == 0
            shot(page, "01-login-wrong-password")

            page.get_by_label("Password", exact=True).fill(org.admin_password)
            page.get_by_role("button", name="Log in").click()
            page.locator('[data-testid="stSidebarNav"]').wait_for(timeout=WAIT_MS)

            pages = navigation.all_pages()
            for number, spec in enumerate(pages, start=2):
                page.locator('[data-testid="stSidebarNav"] a', has_text=spec.title).click()
                page.get_by_role("heading", name=spec.title, exact=True).wait_for(timeout=WAIT_MS)
                settle(page)
                assert_clean(page, spec.title)
                shot(page, f"{number:02d}-{spec.url_path}")
            assert len(pages) >= 2

            # A record's detail view (DSH-3): history, provenance, the edit form.
            page.locator('[data-testid="stSidebarNav"] a', has_text="Records").click()
            page.get_by_role("heading", name="Records", exact=True).wait_for(timeout=WAIT_MS)
            settle(page)
            field = page.get_by_role("textbox", name="Open a record by id")
            field.fill(opened)
            field.press("Enter")
            page.get_by_role("tab", name="History").wait_for(timeout=WAIT_MS)
            settle(page)
            assert_clean(page, "record detail")
            shot(page, f"{len(pages) + 2:02d}-records-detail")

            # A thread's items and working state, then a message search with its highlights (DSH-7).
            page.locator('[data-testid="stSidebarNav"] a', has_text="Threads").click()
            page.get_by_role("heading", name="Threads", exact=True).wait_for(timeout=WAIT_MS)
            settle(page)
            field = page.get_by_role("textbox", name="Open a thread by id")
            field.fill(thread_id)
            field.press("Enter")
            page.get_by_role("tab", name="Working state").wait_for(timeout=WAIT_MS)
            settle(page)
            assert_clean(page, "thread detail")
            shot(page, f"{len(pages) + 3:02d}-threads-detail")
            page.get_by_role("tab", name="Search messages").click()
            settle(page)
            query = page.get_by_role("textbox", name="Words to find")
            query.fill("terugbetaling")
            page.get_by_role("button", name="Search", exact=True).click()
            page.get_by_text("searched back to").wait_for(timeout=WAIT_MS)
            settle(page)
            assert_clean(page, "message search")
            assert page.locator("strong", has_text="terugbetaling").count() == 2
            shot(page, f"{len(pages) + 4:02d}-threads-search")

            # The injection previewer (DSH-6): Anna's block, as a model would get it.
            page.locator('[data-testid="stSidebarNav"] a', has_text="Injection previewer").click()
            page.get_by_role("heading", name="Injection previewer", exact=True).wait_for(timeout=WAIT_MS)
            settle(page)
            page.get_by_role("textbox", name="Person id").fill("anna")
            page.get_by_role("button", name="Preview").click()
            page.get_by_role("heading", name="The block, as the model gets it").wait_for(timeout=WAIT_MS)
            settle(page)
            assert_clean(page, "injection preview")
            block = page.locator('[data-testid="stCode"]').first.inner_text()
            assert "Anna drinks green tea" in block and "The office opens at eight" in block
            assert "Bert cycles to work" not in block
            shot(page, f"{len(pages) + 5:02d}-previewer-anna")
        finally:
            browser.close()
