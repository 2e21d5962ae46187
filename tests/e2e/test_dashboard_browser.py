"""DSH-11 end to end: `coremem dashboard` against the live API, driven by headless Chromium.

Logs in (after one wrong password), opens every page the registry lists and fails on any Streamlit exception or
error box, a primary button whose label does not fit, or a requirement id in the page's text. Each page is then
brought to a state an administrator would look at (a person looked up, an index created, two people compared)
and photographed for the documentation (docs/screenshots/<page>.png); working shots go to
test-artifacts/screenshots/.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Page, sync_playwright

from dashboard import navigation
from tests.dashboard.extraction_seed import seed_windows
from tests.helpers import Org, bearer

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "test-artifacts" / "screenshots"
DOC_SHOTS = ROOT / "docs" / "screenshots"
CHROMIUM = os.environ.get("CORE_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
IDLE = '[data-testid="stApp"][data-test-script-state="notRunning"]'
WAIT_MS = 30_000
VIEWPORT = {"width": 1440, "height": 1000}
MAX_SHOT_HEIGHT = 4000
SPEC_ID = re.compile(r"\b(PLT|MEM|INJ|EXT|THR|TRN|DSH|EXP)-\d+")
# The documentation's screenshot of each page, by the page's url path.
DOC_NAMES = {"overview": "overview", "records": "records", "stores": "stores", "previewer": "previewer",
             "threads": "threads", "audit": "audit", "keys": "keys", "people": "people", "indexes": "indexes",
             "extraction": "extraction", "proposals": "proposals"}
# Labels of primary buttons whose text does not fit its box: Streamlit then cuts the label ("S…", or nothing but
# the icon) and the label's box scrolls (its scrollWidth exceeds its clientWidth, which may be 0).
CUT_PRIMARY_BUTTONS = """() => Array.from(document.querySelectorAll('button[data-testid^="stBaseButton-primary"]'))
    .filter(b => b.offsetParent !== null)
    .filter(b => Array.from(b.querySelectorAll('[data-testid="stMarkdownContainer"]'))
        .some(e => e.scrollWidth > e.clientWidth + 1))
    .map(b => b.textContent.trim())"""


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
    cut = page.evaluate(CUT_PRIMARY_BUTTONS)
    assert cut == [], f"{where}: primary buttons with a cut label: {cut}"
    text = page.locator('[data-testid="stMain"]').inner_text()
    assert not SPEC_ID.search(text), f"{where}: a requirement id in the page's text: {SPEC_ID.search(text)}"


def shot(page: Page, name: str, folder: Path = SHOTS) -> None:
    """The whole page: Streamlit scrolls inside its own container, so the window is made as tall as the content
    (at most MAX_SHOT_HEIGHT) for the picture, then put back."""
    folder.mkdir(parents=True, exist_ok=True)
    size = page.viewport_size or VIEWPORT
    height = page.evaluate("() => document.querySelector('[data-testid=\"stMain\"]')?.scrollHeight || 0")
    page.set_viewport_size({"width": size["width"], "height": max(size["height"], min(height, MAX_SHOT_HEIGHT))})
    settle(page)
    page.screenshot(path=str(folder / f"{name}.png"))
    page.set_viewport_size(size)


def open_page(page: Page, title: str) -> None:
    page.locator('[data-testid="stSidebarNav"] a', has_text=title).click()
    page.get_by_role("heading", name=title, exact=True).wait_for(timeout=WAIT_MS)
    settle(page)


def seed(org: Org, db: Any) -> dict[str, str]:
    """Something on every page: two stores with personal and shared records, a changed setting, a second key,
    a thread with a tool call and a note, an extraction switch with windows and runs, and so audit events and
    trends."""
    index = org.client.post("/indexes", json={"name": "handbook"}, headers=org.full)
    assert index.status_code == 201
    index_id = index.json()["id"]
    org.make_key(["knowledge", "memory"], name="reader")
    for body, person in (({"type": "fact", "text": "The office opens at eight", "tags": ["office"]}, None),
                         ({"type": "preference", "text": "Anna drinks green tea", "tags": ["drinks"],
                           "priority": "high"}, "anna"),
                         ({"type": "commitment", "text": "Send Anna the refund form", "expires_at":
                           "2030-01-01T00:00:00+00:00", "commitment": {"status": "open"}}, "anna"),
                         ({"type": "fact", "text": "Bert cycles to work"}, "bert")):
        written = org.client.post("/memory", json={"index_id": index_id, **body},
                                  headers=bearer(org.key, person) if person else org.full)
        assert written.status_code == 201, written.text
    record_id = written.json()["id"]
    assert org.client.patch(f"/memory/{record_id}", json={"text": "Bert cycles to work every day"},
                            headers=org.admin).status_code == 200
    changed = org.client.patch(f"/memory/stores/{index_id}", json={"commitments": {"inject_limit": 3}},
                               headers=org.admin)
    assert changed.status_code == 200, changed.text
    thread = org.client.post("/threads", headers=bearer(org.key, "anna"), json={
        "metadata": {"dossier": "4711"},
        "items": [{"type": "message", "role": "user", "content": "🎉 Wanneer komt mijn terugbetaling?"},
                  {"type": "function_call", "call_id": "c1", "name": "refund_status", "arguments": '{"order": 7}'},
                  {"type": "function_call_output", "call_id": "c1", "output": "paid"},
                  {"type": "message", "role": "assistant", "content": "Uw terugbetaling komt binnen vijf dagen."}]})
    assert thread.status_code == 201, thread.text
    thread_id = thread.json()["id"]
    item_id = thread.json()["items"][0]["id"]
    assert org.client.put(f"/threads/{thread_id}/items/{item_id}/metadata", json={"metadata": {"status": "open"}},
                          headers=bearer(org.key, "anna")).status_code == 200
    state = org.client.put(f"/threads/{thread_id}/state", json={"state": {"step": "refund"}}, headers=org.full)
    assert state.status_code == 200, state.text
    offered = org.client.post("/admin/models", headers=org.admin, json={"id": "recorded", "provider": "replay",
                                                                        "model": "demo"})
    assert offered.status_code == 201, offered.text
    switch = org.client.put(f"/memory/stores/{index_id}/extraction", headers=org.full,
                            json={"enabled": True, "model": "recorded", "instructions": "Note what people prefer."})
    assert switch.status_code == 200, switch.text
    seed_windows(db, org.org_id, index_id, 600, thread_id)  # no worker here: windows and runs straight in SQL
    return {"index_id": index_id, "record_id": record_id, "thread_id": thread_id}


def look_up_anna(page: Page) -> None:
    page.get_by_role("textbox", name="Person id").fill("anna")
    page.get_by_role("button", name="Look up").click()
    page.get_by_text("What the organisation holds of anna").wait_for(timeout=WAIT_MS)
    settle(page)


def create_an_index(page: Page) -> None:
    page.get_by_text("Create an index", exact=True).first.click()
    page.get_by_role("textbox", name="Name").fill("tickets")
    page.get_by_text("Hashing", exact=True).click()
    settle(page)
    page.get_by_role("button", name="Create index").click()
    page.get_by_text("Created index tickets").wait_for(timeout=WAIT_MS)
    settle(page)


def compare_anna_and_bert(page: Page) -> None:
    page.get_by_text("Compare two people").click()
    settle(page)
    page.get_by_role("textbox", name="First person's id").fill("anna")
    page.get_by_role("textbox", name="Second person's id").fill("bert")
    page.get_by_role("button", name="Preview").click()
    page.get_by_role("heading", name="bert", exact=True).wait_for(timeout=WAIT_MS)
    settle(page)
    anna, bert = page.locator('[data-testid="stCode"]').all_inner_texts()[:2]
    assert "Anna drinks green tea" in anna and "The office opens at eight" in anna and "Bert" not in anna
    assert "Bert cycles to work" in bert and "The office opens at eight" in bert and "Anna" not in bert


def select_first_row(page: Page, heading: str) -> None:
    """Tick the first row of the page's first table (the grid is drawn on a canvas: click where its box is)."""
    grid = page.locator('[data-testid="stDataFrame"]').first
    box = grid.bounding_box()
    assert box is not None
    page.mouse.click(box["x"] + 18, box["y"] + 35 + 17)
    page.get_by_text(heading).first.wait_for(timeout=WAIT_MS)
    settle(page)


def open_the_thread(thread_id: str) -> Callable[[Page], None]:
    def prepare(page: Page) -> None:
        field = page.get_by_role("textbox", name="Open a thread by id")
        field.fill(thread_id)
        field.press("Enter")
        page.get_by_role("tab", name="Working state").wait_for(timeout=WAIT_MS)
        settle(page)
    return prepare


def review_a_change(page: Page) -> None:
    """Stores: change a setting and review it, so the *Save* button shows (and must fit)."""
    card = page.locator(".st-key-stores_card_commitments")
    card.get_by_text("Edit commitments").click()
    field = card.get_by_role("spinbutton", name="Commitments per turn")
    field.fill("4")
    field.press("Tab")
    card.get_by_role("button", name="Review change").click()
    card.get_by_text("The change").wait_for(timeout=WAIT_MS)
    settle(page)
    assert card.get_by_role("button", name="Save", exact=True).is_visible()


def prepare_steps(seeded: dict[str, str]) -> dict[str, Callable[[Page], None]]:
    """What each page shows in its documentation screenshot, when more than its first view."""
    return {"people": look_up_anna, "indexes": create_an_index, "previewer": compare_anna_and_bert,
            "keys": lambda page: select_first_row(page, "Capabilities and status"),
            "threads": open_the_thread(seeded["thread_id"]), "stores": review_a_change}


def test_dsh_11_browser_logs_in_and_opens_every_page(dashboard_url: str, org: Org, db: Any) -> None:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing; install Debian's chromium (apt-get install -y chromium) "
                    "or point CORE_CHROMIUM at a Chromium binary")
    seeded = seed(org, db)
    pages = navigation.all_pages()
    assert {p.url_path for p in pages} == set(DOC_NAMES), "every page has its documentation screenshot"

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_page(viewport=VIEWPORT)
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

            for number, spec in enumerate(pages, start=2):
                open_page(page, spec.title)
                assert_clean(page, spec.title)
                shot(page, f"{number:02d}-{spec.url_path}")
                prepare = prepare_steps(seeded).get(spec.url_path)
                if prepare is not None:
                    prepare(page)
                    assert_clean(page, f"{spec.title} in use")
                shot(page, DOC_NAMES[spec.url_path], DOC_SHOTS)

            # A record's detail view: every field, history, provenance, the edit form.
            open_page(page, "Records")
            field = page.get_by_role("textbox", name="Open a record by id")
            field.fill(seeded["record_id"])
            field.press("Enter")
            page.get_by_role("tab", name="History").wait_for(timeout=WAIT_MS)
            settle(page)
            assert_clean(page, "record detail")
            shot(page, f"{len(pages) + 2:02d}-records-detail")

            # A thread's items (who wrote each, the tool's name on its result) and working state, then a search.
            open_page(page, "Threads")
            field = page.get_by_role("textbox", name="Open a thread by id")
            field.fill(seeded["thread_id"])
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

            # The audit log's record changes: who changed which record.
            open_page(page, "Audit log")
            page.get_by_role("tab", name="Record changes").click()
            page.get_by_text("Newest threads").wait_for(timeout=WAIT_MS)
            settle(page)
            assert_clean(page, "record changes")
            shot(page, f"{len(pages) + 5:02d}-audit-record-changes")
        finally:
            browser.close()
