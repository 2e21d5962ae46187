"""PLT-19 `coremem demo`: the demo organisation, written through the API, is the same content every time.

Two runs of the command into one database (`--org "Demo A"`, `--org "Demo B"`) are read back through the API
and compared field by field, with ids, secrets and creation times left out (they must differ).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from litestar.testing import TestClient

from backend.app import create_app
from backend.config import Settings
from tests.conftest import Postgres
from tests.helpers import bearer

SECRET = "demo-test-secret-" + "x" * 20
ORGS = ("Demo A", "Demo B")


def _coremem(database_url: str, data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    from sqlalchemy.engine import make_url

    plain = make_url(database_url).set(drivername="postgresql").render_as_string(hide_password=False)
    env = {**os.environ, "CORE_DATABASE_URL": plain, "CORE_SECRET": SECRET, "CORE_DATA_DIR": str(data_dir)}
    return subprocess.run([sys.executable, "-m", "backend.cli", *args], env=env, capture_output=True, text=True,
                          timeout=300)


@pytest.fixture(scope="module")
def demo_database(postgres: Postgres, template: str) -> Iterator[str]:
    name = f"demo_{os.getpid()}"
    postgres.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    yield postgres.url_for(name)
    postgres.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="module")
def made(demo_database: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, str]]:
    """Both demo organisations, made by the command; what it printed, per organisation."""
    found = {}
    for org in ORGS:
        done = _coremem(demo_database, tmp_path_factory.mktemp("data"), "demo", "--org", org)
        assert done.returncode == 0, done.stderr
        printed = done.stdout
        found[org] = {"printed": printed, **{label: re.search(rf"{label}:\s+(\S+)", printed).group(1)  # type: ignore[union-attr]
                                             for label in ("login", "password", "API key")}}
        found[org]["org_id"] = re.search(r"\((org_\w+)\) created", printed).group(1)  # type: ignore[union-attr]
    return found


@pytest.fixture(scope="module")
def api(demo_database: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient[Any]]:
    settings = Settings(database_url=demo_database, data_dir=tmp_path_factory.mktemp("api"), secret=SECRET)
    with TestClient(create_app(settings, demo_database)) as client:
        yield client


def _admin(api: TestClient[Any], made: dict[str, str]) -> dict[str, str]:
    answer = api.post("/admin/login", json={"email": made["login"], "password": made["password"]})
    assert answer.status_code == 200, answer.text
    return bearer(answer.json()["token"])


def _all(api: TestClient[Any], path: str, headers: dict[str, str], field: str = "data") -> list[dict[str, Any]]:
    found, cursor = [], None
    while True:
        page = api.get(path, params={"limit": 200, **({"cursor": cursor} if cursor else {})}, headers=headers)
        assert page.status_code == 200, page.text
        found += page.json()[field]
        cursor = page.json()["next_cursor"]
        if not cursor:
            return found


def snapshot(api: TestClient[Any], made: dict[str, str]) -> dict[str, Any]:
    """Everything the demo wrote, as the API answers it, in an order and a form that ids and times do not touch."""
    admin = _admin(api, made)
    stores = {i["id"]: i["name"] for i in _all(api, "/indexes", admin)}

    def named(value: Any) -> Any:  # index ids replaced by their store's name
        text = json.dumps(value, sort_keys=True)
        for index_id, name in stores.items():
            text = text.replace(index_id, name)
        return json.loads(text)

    settings = {name: {k: v for k, v in api.get(f"/memory/stores/{i}", headers=admin).json().items()
                       if k not in ("index_id", "updated_at", "last_maintenance_run_at")} for i, name in stores.items()}
    indexes = sorted((i["name"], json.dumps(i["embedding"])) for i in _all(api, "/indexes", admin))
    records = sorted(json.dumps(named({k: r[k] for k in (
        "index_id", "subject", "type", "text", "key", "tags", "priority", "confidence", "metadata", "labels",
        "expires_at", "commitment", "status", "source", "verified")} | {"episode": {
            k: v for k, v in (r["episode"] or {}).items() if k in ("intent", "result", "result_basis")}}),
        sort_keys=True) for r in _all(api, "/memory", admin))
    threads = []
    for t in _all(api, "/threads", admin):
        items = _all(api, f"/threads/{t['id']}/items", admin, field="items")
        notes = [[(n["by"], n["metadata"]) for n in api.get(f"/threads/{t['id']}/items/{i['id']}/metadata",
                                                               headers=admin).json()["data"]]
                 for i in items if i["type"] == "message"]
        state = api.get(f"/threads/{t['id']}/state", headers=admin).json()
        threads.append(json.dumps({
            "subject": t["subject"], "metadata": t["metadata"], "labels": t["labels"],
            "items": [{k: v for k, v in i.items() if k not in ("id", "created_at", "response_id")} for i in items],
            "notes": notes, "state": state["state"], "version": state["version"]}, sort_keys=True))
    keys = sorted(json.dumps(named({k: key[k] for k in ("name", "capabilities", "memory", "policy", "status")}),
                             sort_keys=True) for key in _all(api, f"/tenants/{made['org_id']}/keys", admin))
    org = api.get(f"/tenants/{made['org_id']}", headers=admin).json()
    extraction = {}
    for index_id, name in stores.items():
        switch = api.get(f"/memory/stores/{index_id}/extraction", headers=admin).json()
        if switch.get("enabled"):
            windows = api.get(f"/memory/stores/{index_id}/extraction/windows", headers=admin).json()
            runs = _all(api, f"/memory/stores/{index_id}/extraction/runs", admin)
            extraction[name] = {"model": switch["model"], "state": switch["state"], "windows": switch["windows"],
                                "error_codes": windows["error_codes"],
                                "runs": [{k: run[k] for k in ("trigger", "windows", "written", "confirmed", "failures")}
                                         | {"finished": run["finished_at"] is not None} for run in runs]}
    proposals = sorted(json.dumps(named({k: p[k] for k in ("index_id", "type", "text", "basis", "status", "people")}),
                                  sort_keys=True) for p in _all(api, "/memory/proposals", admin))
    return {"org": {k: org[k] for k in ("timezone", "capabilities", "improvements", "memory", "vocabulary")},
            "indexes": indexes, "settings": settings, "records": records, "threads": sorted(threads), "keys": keys,
            "extraction": extraction, "proposals": proposals}


@pytest.fixture(scope="module")
def snapshots(api: TestClient[Any], made: dict[str, dict[str, str]]) -> dict[str, dict[str, Any]]:
    return {org: snapshot(api, made[org]) for org in ORGS}


def test_plt_19_demo_writes_the_same_content_every_time(made: dict[str, dict[str, str]],
                                                        snapshots: dict[str, dict[str, Any]]) -> None:
    first, second = (snapshots[org] for org in ORGS)
    assert made["Demo A"]["org_id"] != made["Demo B"]["org_id"]
    for part in first:
        assert first[part] == second[part], part


def test_plt_19_demo_holds_people_records_threads_and_keys_in_two_languages(
        made: dict[str, dict[str, str]], snapshots: dict[str, dict[str, Any]]) -> None:
    assert made["Demo A"]["login"] == "admin@demo-a.local"
    shot = snapshots["Demo A"]
    records = [json.loads(r) for r in shot["records"]]
    assert len(records) >= 300 and len({r["subject"] for r in records} - {None}) >= 40
    assert {r["type"] for r in records} == {"fact", "preference", "commitment", "behaviour", "episode", "lesson"}
    texts = " ".join(r["text"] for r in records)
    assert "Terugbetalingen" in texts and "Refunds are paid" in texts  # Dutch and English
    assert all(r["commitment"]["due_at"] for r in records if r["type"] == "commitment")
    assert any(r["expires_at"] for r in records) and any(r["key"] for r in records)
    shared = [r for r in records if r["subject"] is None]
    assert {r["labels"].get("department") for r in shared} >= {"support", "payroll", "sales", "it"}
    threads = [json.loads(t) for t in shot["threads"]]
    assert len(threads) >= 20 and sum(t["subject"] is None for t in threads) == 3
    assert sum(any(n for n in t["notes"]) for t in threads) >= 20 and sum(t["version"] > 0 for t in threads) >= 5
    item_types = {i["type"] for t in threads for i in t["items"]}
    assert item_types == {"message", "function_call", "function_call_output", "refusal"}
    assert len({json.dumps(s["injection"], sort_keys=True) for s in shot["settings"].values()}) == 3
    keys = [json.loads(k) for k in shot["keys"]]
    assert sorted(k["status"] for k in keys).count("revoked") == 1 and len(keys) == 8
    assert len({json.dumps(k["policy"], sort_keys=True) for k in keys}) >= 5


def test_plt_19_demo_keys_policies_decide_what_a_turn_is_given(api: TestClient[Any],
                                                                made: dict[str, dict[str, str]]) -> None:
    """The people assistant's key gives an employee her own department's shared records, not another's."""
    demo = made["Demo A"]
    admin = _admin(api, demo)
    keys = {k["name"]: k for k in _all(api, f"/tenants/{demo['org_id']}/keys", admin)}
    people_key = keys["People assistant"]
    store = people_key["memory"]["injection"]["index_id"]
    preview = api.post(f"/memory/stores/{store}/injection/preview", headers=admin, json={
        "key_id": people_key["id"], "subject": {"id": "marieke.postma", "attributes": {"department": ["payroll"]}}})
    assert preview.status_code == 200, preview.text
    block = preview.json()["block"]
    assert "Salarissen worden op de 25e betaald" in block  # payroll's shared record, in her department
    assert "Laptops are replaced" not in block  # IT's shared record: another department
    assert "Werkt" in block or "Heeft dit jaar" in block  # her own records


def test_plt_19_demo_refuses_a_name_that_exists(demo_database: str, made: dict[str, dict[str, str]],
                                                tmp_path: Path) -> None:
    again = _coremem(demo_database, tmp_path, "demo", "--org", "Demo A")
    assert again.returncode == 1 and "exists already" in again.stderr


def test_plt_19_demo_extraction_run_finished_with_ready_and_failed_windows(
        snapshots: dict[str, dict[str, Any]]) -> None:
    """The recorded model read every thread through the job queue: records written, delivery windows failed."""
    shot = snapshots["Demo A"]
    support = shot["extraction"]["Customer support"]
    assert support["state"] == "active" and support["model"] == "demo-extraction"
    counts = support["windows"]
    assert counts["ready"] >= 20 and counts["failed"] >= 3 and counts["queued"] == counts["parked"] == 0, counts
    assert set(support["error_codes"]) == {"invalid_model_output"}
    assert len(support["runs"]) == 1 and support["runs"][0]["finished"]
    records = [json.loads(r) for r in shot["records"]]
    extracted = [r for r in records if r["source"] == "extraction"]
    assert len(extracted) >= 20 and all(r["subject"] for r in extracted if r["type"] != "episode")
    assert any("turbo" in r["text"] for r in extracted) and any("terugbetaling" in r["text"] for r in extracted)
    episodes = [r for r in extracted if r["type"] == "episode"]
    assert len(episodes) >= 20 and {r["episode"]["result"] for r in episodes} == {
        "succeeded", "failed", "unknown"}
    assert any(r["type"] == "lesson" for r in extracted)
    # The range fact several people hold, proposed as a shared record by the maintenance pass.
    proposals = [json.loads(p) for p in shot["proposals"]]
    assert any("80 km" in p["text"] and p["people"] >= 2 and p["status"] == "open" for p in proposals), proposals
