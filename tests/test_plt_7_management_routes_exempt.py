"""PLT-7: a key whose policy sets `subjects_required` still uses the organisation's management routes naming
nobody (they do not name people, docs/decisions.md): activity counts, the record changes feed and the export
(EXP-2). A person the request does name still narrows them to what she may read."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from backend.access.policy import writer_policy
from tests.helpers import ALL_CAPS, Org, assert_error, bearer


def _write(org: Org, index_id: str, text: str, person: str | None = None) -> str:
    response = org.client.post("/memory", json={"index_id": index_id, "type": "fact", "text": text},
                               headers=bearer(org.key, person) if person else org.full)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def _ok(response: Any) -> Any:
    assert response.status_code == 200, response.text
    return response


def _exported(org: Org, headers: dict[str, str]) -> set[str]:
    body = _ok(org.client.get("/memory/export", params={"format": "ndjson"}, headers=headers)).text
    return {json.loads(line)["id"] for line in body.splitlines() if line}


def test_plt_7_management_routes_take_a_subjects_required_key_naming_nobody(org: Org) -> None:
    index_id = org.client.post("/indexes", json={"name": "handbook"}, headers=org.full).json()["id"]
    anna = _write(org, index_id, "Anna drinks tea", "anna")
    bert = _write(org, index_id, "Bert cycles to work", "bert")
    shared = _write(org, index_id, "The office opens at eight")
    thread = org.client.post("/threads", headers=bearer(org.key, "anna"), json={"items": [
        {"type": "message", "role": "user", "content": "Hallo"},
        {"type": "message", "role": "assistant", "content": "Dag Anna"}]})
    assert thread.status_code == 201, thread.text
    policy = writer_policy()
    required = org.make_key(ALL_CAPS, policy={**policy, "settings": {"subjects_required": True}})["secret"]
    twin = org.make_key(ALL_CAPS, policy=policy)["secret"]  # the same reach without the setting
    nobody = bearer(required)
    today = datetime.now(UTC).date().isoformat()

    # Data routes still refuse it (unchanged) ...
    assert_error(org.client.get("/memory", headers=nobody), 400, "subject_required")
    # ... management routes answer what the same key without the setting sees.
    records = _ok(org.client.get("/activity/records", headers=nobody)).json()
    assert {(r["day"], r["name"]): r["count"] for r in records["data"]} == {(today, "created"): 3}
    assert records == _ok(org.client.get("/activity/records", headers=bearer(twin))).json()
    messages = _ok(org.client.get("/activity/messages", headers=nobody)).json()
    assert {(r["day"], r["name"]): r["count"] for r in messages["data"]} == {(today, "assistant"): 1,
                                                                             (today, "user"): 1}
    changes = _ok(org.client.get("/activity/changes", headers=nobody)).json()
    assert {c["record_id"] for c in changes["data"]} == {anna, bert, shared}
    assert _exported(org, nobody) == {anna, bert, shared} == _exported(org, bearer(twin))
    stats = _ok(org.client.get("/threads/stats", headers=nobody)).json()
    assert (stats["threads"], stats["messages"]["user"]) == (1, 1)
    assert stats == _ok(org.client.get("/threads/stats", headers=bearer(twin))).json()

    # A request naming a person is for her (EXP-2 keeps the view of GET /memory): her records and shared ones.
    as_anna = bearer(required, "anna")
    seen = {r["id"] for r in _ok(org.client.get("/memory", headers=as_anna)).json()["data"]}
    assert seen == {anna, shared}
    assert _exported(org, as_anna) == seen
    changed = _ok(org.client.get("/activity/changes", headers=as_anna)).json()["data"]
    assert {c["record_id"] for c in changed} == seen
    hers = _ok(org.client.get("/activity/records", headers=as_anna)).json()["data"]
    assert {(r["day"], r["name"]): r["count"] for r in hers} == {(today, "created"): 2}
    assert_error(org.client.get("/memory/export", params={"format": "ndjson", "subject": "bert"}, headers=as_anna),
                 403, "subject_filter_forbidden")

    # The gates in front of them are unchanged: `management`, the data capability, no subject token.
    no_memory = org.make_key(["knowledge", "threads", "management"],
                             policy={**policy, "settings": {"subjects_required": True}})["secret"]
    for path in ("/activity/records", "/activity/changes", "/memory/export"):
        assert_error(org.client.get(path, headers=bearer(no_memory)), 403, "capability_missing")
    no_threads = org.make_key([c for c in ALL_CAPS if c != "threads"],
                              policy={**policy, "settings": {"subjects_required": True}})["secret"]
    assert org.client.get("/activity/messages", headers=bearer(no_threads)).json()["code"] == "threads_not_kept"
    no_management = org.make_key([c for c in ALL_CAPS if c != "management"],
                                 policy={**policy, "settings": {"subjects_required": True}})["secret"]
    for path in ("/activity/records", "/activity/messages", "/activity/changes", "/memory/export"):
        assert_error(org.client.get(path, headers=bearer(no_management)), 403, "capability_missing")
    token = org.subject_token(required, "anna")
    assert_error(org.client.get("/memory/export", headers=bearer(token)), 403, "subject_token_forbidden")
