"""Issue 17 item 3, PLT-1/PLT-7/PLT-9: isolation under concurrency.

Sixteen clients share eight identities (the same four look-alike people in two organisations) and interleave
writes and reads against the API under uvicorn over real HTTP: records, threads with appended items, notes,
working state, lists, gets and searches. Every text names the organisation and person it was written for.
Pass: no answer shows another identity's row, and afterwards no row in the database sits under the wrong
organisation or person.
"""

from __future__ import annotations

import random
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from backend.access.policy import writer_policy
from tests.helpers import ALL_CAPS, bearer, bootstrap_org

PEOPLE = ["a_b", "a-b", "A_B", "\u0430_b"]


class Identity:
    def __init__(self, org_id: str, tag: str, person: str, key: str, index_id: str) -> None:
        self.org_id, self.tag, self.person, self.key, self.index_id = org_id, tag, person, key, index_id
        self.headers = bearer(key, person)
        self.marker = f"{tag}|{person}|"
        self.threads: list[str] = []
        self.lock = threading.Lock()


def _setup(base: str, settings: Any, database_url: str, run: int) -> list[Identity]:
    http = httpx.Client(base_url=base, timeout=30)
    identities = []
    for tag in (f"org1-{run}", f"org2-{run}"):
        org = bootstrap_org(http, settings, database_url, f"Conc {tag}", f"admin@{tag}.test")
        index = http.post("/indexes", json={"name": "shared-store"}, headers=org.admin).json()["id"]
        key = org.make_key(ALL_CAPS, policy=writer_policy())["secret"]
        identities += [Identity(org.org_id, tag, person, key, index) for person in PEOPLE]
    http.close()
    return identities


class Run:
    def __init__(self, base: str, identities: list[Identity], operations: int) -> None:
        self.base = base
        self.identities = identities
        self.operations = operations
        self.done = 0
        self.lock = threading.Lock()
        self.wrong: list[str] = []
        self.statuses: dict[int, int] = {}

    def claim(self) -> bool:
        with self.lock:
            if self.done >= self.operations:
                return False
            self.done += 1
            return True

    def client(self, seed: int) -> None:
        rng = random.Random(seed)
        with httpx.Client(base_url=self.base, timeout=60) as http:
            while self.claim():
                me = rng.choice(self.identities)
                op = rng.choice(self.OPS)
                status = op(self, http, me, rng)
                with self.lock:
                    self.statuses[status] = self.statuses.get(status, 0) + 1

    def check_text(self, me: Identity, text: str, where: str) -> None:
        if not text.startswith(me.marker):
            self.wrong.append(f"{me.marker} {where} shows {text[:60]!r}")

    # ------------------------------------------------------------ operations

    def write_record(self, http: httpx.Client, me: Identity, rng: random.Random) -> int:
        text = f"{me.marker}record {rng.random()}"
        r = http.post("/memory", headers=me.headers, json={"index_id": me.index_id, "type": "fact", "text": text})
        if r.status_code == 201:
            body = r.json()
            if body["subject"] != me.person or body["text"] != text:
                self.wrong.append(f"{me.marker} write answered {body['subject']!r} {body['text'][:40]!r}")
        return r.status_code

    def list_records(self, http: httpx.Client, me: Identity, rng: random.Random) -> int:
        r = http.get("/memory", headers=me.headers, params={"index_id": me.index_id, "limit": 50})
        if r.status_code == 200:
            for row in r.json()["data"]:
                self.check_text(me, row["text"], "list")
                if row["subject"] != me.person:
                    self.wrong.append(f"{me.marker} list shows owner {row['subject']!r}")
        return r.status_code

    def search_records(self, http: httpx.Client, me: Identity, rng: random.Random) -> int:
        r = http.get("/memory/search", headers=me.headers, params={"index_id": me.index_id, "q": "record"})
        if r.status_code == 200:
            for row in r.json()["data"]:
                self.check_text(me, row["text"], "search")
        return r.status_code

    def open_thread(self, http: httpx.Client, me: Identity, rng: random.Random) -> int:
        r = http.post("/threads", headers=me.headers, json={"items": [
            {"type": "message", "role": "user", "content": f"{me.marker}opening {rng.random()}"}]})
        if r.status_code == 201:
            body = r.json()
            if body["subject"] != me.person:
                self.wrong.append(f"{me.marker} thread owned by {body['subject']!r}")
            with me.lock:
                me.threads.append(body["id"])
        return r.status_code

    def append(self, http: httpx.Client, me: Identity, rng: random.Random) -> int:
        if not me.threads:
            return self.open_thread(http, me, rng)
        thread = rng.choice(me.threads)
        r = http.post(f"/threads/{thread}/items", headers=me.headers, json={"items": [
            {"type": "message", "role": "user", "content": f"{me.marker}more {rng.random()}"},
            {"type": "message", "role": "assistant", "content": f"{me.marker}answer"}]})
        return r.status_code

    def read_thread(self, http: httpx.Client, me: Identity, rng: random.Random) -> int:
        if not me.threads:
            return self.open_thread(http, me, rng)
        thread = rng.choice(me.threads)
        r = http.get(f"/threads/{thread}/items", headers=me.headers, params={"limit": 200})
        if r.status_code == 200:
            for item in r.json()["items"]:
                content = item.get("content")
                if isinstance(content, str):
                    self.check_text(me, content, "items")
                if item.get("subject") != me.person:
                    self.wrong.append(f"{me.marker} item by {item.get('subject')!r}")
        return r.status_code

    def note_and_state(self, http: httpx.Client, me: Identity, rng: random.Random) -> int:
        if not me.threads:
            return self.open_thread(http, me, rng)
        thread = rng.choice(me.threads)
        r = http.put(f"/threads/{thread}/state", headers=me.headers, json={"state": {"who": me.marker}})
        if r.status_code != 200:
            return r.status_code
        got = http.get(f"/threads/{thread}/state", headers=me.headers)
        # another client of the same identity may have written it meanwhile, never another identity
        if got.status_code == 200 and not str(got.json()["state"].get("who", "")).startswith(me.marker):
            self.wrong.append(f"{me.marker} state {got.json()['state']}")
        return got.status_code

    def list_threads(self, http: httpx.Client, me: Identity, rng: random.Random) -> int:
        r = http.get("/threads", headers=me.headers, params={"limit": 200})
        if r.status_code == 200:
            for row in r.json()["data"]:
                if row["subject"] != me.person:
                    self.wrong.append(f"{me.marker} thread list shows {row['subject']!r}")
            foreign = {t["id"] for t in r.json()["data"]} - set(me.threads)
            mine_elsewhere = [i for i in self.identities if i is not me and foreign & set(i.threads)]
            if mine_elsewhere:
                self.wrong.append(f"{me.marker} thread list shows threads of {mine_elsewhere[0].marker}")
        return r.status_code

    OPS = [write_record, write_record, list_records, search_records, open_thread, append, append, read_thread,
           note_and_state, list_threads]


def _database_check(db: Any, identities: list[Identity]) -> tuple[int, list[str]]:
    by_marker = {i.marker: i for i in identities}
    wrong: list[str] = []
    orgs = sorted({i.org_id for i in identities})
    rows = db.execute("SELECT org_id, subject, text FROM memory_records WHERE org_id = ANY(%s)", [orgs]).fetchall()
    rows += db.execute("SELECT i.org_id, i.subject, i.text FROM thread_items i WHERE i.org_id = ANY(%s)",
                       [orgs]).fetchall()
    rows += db.execute("SELECT t.org_id, t.subject, i.text FROM thread_items i JOIN threads t "
                       "ON t.org_id = i.org_id AND t.id = i.thread_id WHERE i.org_id = ANY(%s)", [orgs]).fetchall()
    for org_id, subject, text in rows:
        marker = "|".join(str(text).split("|")[:2]) + "|"
        owner = by_marker.get(marker)
        if owner is None or owner.org_id != org_id or owner.person != subject:
            wrong.append(f"row {text[:50]!r} under {org_id}/{subject!r}")
    return len(rows), wrong


def _isolation(live_api: str, settings: Any, database_url: str, db: Any, report: Any, operations: int) -> None:
    identities = _setup(live_api, settings, database_url, operations)
    run = Run(live_api, identities, operations)
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(run.client, range(16)))
    checked, wrong_rows = _database_check(db, identities)
    report(clients=16, identities=len(identities), operations=run.done, statuses=dict(sorted(run.statuses.items())),
           rows_checked=checked, wrong_answers=len(run.wrong), rows_under_wrong_owner=len(wrong_rows))
    assert run.wrong == [], run.wrong[:10]
    assert wrong_rows == [], wrong_rows[:10]
    assert set(run.statuses) <= {200, 201}, run.statuses


def test_plt_1_concurrent_identities_stay_apart(live_api: str, settings: Any, database_url: str, db: Any,
                                                 report: Any) -> None:
    _isolation(live_api, settings, database_url, db, report, 400)


@pytest.mark.slow
def test_plt_1_concurrent_identities_stay_apart_long(live_api: str, settings: Any, database_url: str,
                                                                  db: Any, report: Any) -> None:
    _isolation(live_api, settings, database_url, db, report, 4000)
