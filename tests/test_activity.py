"""Activity over time (the overview's trends, DSH-2), the record changes feed (the audit log's activity view,
DSH-8), `exclude_action` on GET /audit, and an administrator's subject token for one key (PLT-7), over HTTP."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from tests.helpers import Org, assert_error, bearer


def _index(org: Org, name: str = "handbook") -> str:
    response = org.client.post("/indexes", json={"name": name}, headers=org.full)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def _write(org: Org, index_id: str, text: str, person: str | None = None) -> str:
    response = org.client.post("/memory", json={"index_id": index_id, "type": "fact", "text": text},
                               headers=bearer(org.key, person) if person else org.full)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def _get(org: Org, path: str, headers: dict[str, str], **params: Any) -> dict[str, Any]:
    response = org.client.get(path, params=params, headers=headers)
    assert response.status_code == 200, response.text
    return dict(response.json())


def _counts(body: dict[str, Any]) -> dict[tuple[str, str], int]:
    return {(row["day"], row["name"]): row["count"] for row in body["data"]}


def test_dsh_2_activity_counts_versions_messages_and_events_per_local_day(org: Org, db: Any) -> None:
    index_id = _index(org)
    anna = _write(org, index_id, "Anna drinks tea", "anna")
    _write(org, index_id, "Bert cycles to work", "bert")
    shared = _write(org, index_id, "The office opens at eight")
    assert org.client.patch(f"/memory/{anna}", json={"text": "Anna drinks mint tea"},
                            headers=bearer(org.key, "anna")).status_code == 200
    # One version written yesterday and one 40 days ago: the first is counted on its own day, the second not at all.
    db.execute("UPDATE memory_versions SET at = now() - interval '1 day' WHERE org_id = %s AND record_id = %s",
               (org.org_id, shared))
    old = _write(org, index_id, "An old fact")
    db.execute("UPDATE memory_versions SET at = now() - interval '40 days' WHERE org_id = %s AND record_id = %s",
               (org.org_id, old))
    thread = org.client.post("/threads", headers=bearer(org.key, "anna"), json={"items": [
        {"type": "message", "role": "user", "content": "Hallo"},
        {"type": "message", "role": "assistant", "content": "Dag Anna"},
        {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": "{}"}]})
    assert thread.status_code == 201, thread.text

    today = datetime.now(UTC).date().isoformat()
    yesterday = (datetime.now(UTC).date() - timedelta(days=1)).isoformat()
    records = _get(org, "/activity/records", org.admin)
    assert records["timezone"] == "UTC" and len(records["days"]) == 30 and records["days"][-1] == today
    assert _counts(records) == {(today, "created"): 2, (today, "updated"): 1, (yesterday, "created"): 1}
    assert _counts(_get(org, "/activity/records", org.admin, days=1)) == {(today, "created"): 2,
                                                                            (today, "updated"): 1}
    assert _counts(_get(org, "/activity/messages", org.admin)) == {(today, "assistant"): 1, (today, "user"): 1}
    events = _counts(_get(org, "/activity/audit", org.admin))
    assert events[(today, "index.created")] == 1 and events[(today, "memory.read")] >= 1  # the reads above

    # A request for a person counts what she may read: her own records and the shared ones, never Bert's.
    hers = _counts(_get(org, "/activity/records", bearer(org.key, "anna")))
    assert hers == {(today, "created"): 1, (today, "updated"): 1, (yesterday, "created"): 1}
    # The organisation's time zone draws the days.
    assert org.client.patch(f"/tenants/{org.org_id}", json={"timezone": "Pacific/Kiritimati"},
                            headers=org.admin).status_code == 200
    shifted = _get(org, "/activity/records", org.admin, days=2)
    assert shifted["timezone"] == "Pacific/Kiritimati"
    assert shifted["days"][-1] == datetime.now(ZoneInfo("Pacific/Kiritimati")).date().isoformat()


def test_dsh_2_activity_is_for_administrators_and_management_keys(org: Org, db: Any) -> None:
    _index(org)
    reader = org.make_key(["knowledge", "memory", "threads"], name="reader")["secret"]
    assert_error(org.client.get("/activity/records", headers=bearer(reader)), 403, code="capability_missing")
    assert_error(org.client.get("/activity/messages", headers=bearer(reader)), 403, code="capability_missing")
    token = org.subject_token(org.key, "anna")
    assert_error(org.client.get("/activity/records", headers=bearer(token)), 403, code="subject_token_forbidden")
    assert_error(org.client.get("/activity/audit", headers=org.full), 403, code="admin_required")
    for days in ("0", "367", "many"):
        assert_error(org.client.get("/activity/records", params={"days": days}, headers=org.admin), 422,
                     param="days")
    # An administrator's count is a read of records, threads or the trail, and is audited as one, without ids.
    _get(org, "/activity/records", org.admin)
    _get(org, "/activity/messages", org.admin)
    _get(org, "/activity/audit", org.admin)
    routes = {row[0]: row[1] for row in db.execute(
        "SELECT detail->>'route', action FROM audit_events WHERE org_id = %s AND detail->>'route' LIKE "
        "'GET /activity/%%'", (org.org_id,)).fetchall()}
    assert routes == {"GET /activity/records": "memory.read", "GET /activity/messages": "thread.read",
                      "GET /activity/audit": "audit.read"}


def test_plt_2_an_administrator_s_message_counts_are_audited_with_their_count(org: Org, db: Any) -> None:
    thread = org.client.post("/threads", headers=bearer(org.key, "anna"), json={"items": [
        {"type": "message", "role": "user", "content": "Hallo"},
        {"type": "message", "role": "assistant", "content": "Dag Anna"},
        {"type": "message", "role": "user", "content": "Tot ziens"}]})
    assert thread.status_code == 201, thread.text
    _get(org, "/activity/messages", org.admin, days=7)
    (detail,) = db.execute("SELECT detail FROM audit_events WHERE org_id = %s AND action = 'thread.read' AND "
                           "detail->>'route' = 'GET /activity/messages'", (org.org_id,)).fetchone()
    assert detail == {"route": "GET /activity/messages", "filters": {"days": 7}, "count": 3}


def test_dsh_8_record_changes_newest_first_with_cursor_filters_and_scope(org: Org) -> None:
    index_id = _index(org)
    other_index = _index(org, "tickets")
    anna = _write(org, index_id, "Anna drinks tea", "anna")
    bert = _write(org, index_id, "Bert cycles to work", "bert")
    shared = _write(org, other_index, "The office opens at eight")
    assert org.client.patch(f"/memory/{anna}", json={"priority": "high"}, headers=org.admin).status_code == 200

    first = _get(org, "/activity/changes", org.admin, limit=2)
    assert [(c["record_id"], c["version"], c["action"]) for c in first["data"]] == [
        (anna, 2, "updated"), (shared, 1, "created")]
    assert first["data"][0]["actor"]["type"] == "admin" and first["data"][0]["subject"] == "anna"
    assert first["data"][0]["text"] == "Anna drinks tea" and first["data"][1]["subject"] is None
    second = _get(org, "/activity/changes", org.admin, limit=2, cursor=first["next_cursor"])
    assert [(c["record_id"], c["version"]) for c in second["data"]] == [(bert, 1), (anna, 1)]
    assert second["next_cursor"] is None

    def ids(**params: Any) -> list[tuple[str, int]]:
        return [(c["record_id"], c["version"]) for c in _get(org, "/activity/changes", org.admin, **params)["data"]]

    assert ids(action="updated") == [(anna, 2)]
    assert ids(subject="anna") == [(anna, 2), (anna, 1)]
    assert ids(index_id=other_index) == [(shared, 1)]
    assert ids(actor_type="admin") == [(anna, 2)]
    # A person sees the changes of what she may read; the subject filter is not hers to use.
    as_anna = _get(org, "/activity/changes", bearer(org.key, "anna"))
    assert {c["record_id"] for c in as_anna["data"]} == {anna, shared}
    assert_error(org.client.get("/activity/changes", params={"subject": "bert"}, headers=bearer(org.key, "anna")),
                 403, code="subject_filter_forbidden")
    assert_error(org.client.get("/activity/changes", params={"cursor": "bm9wZQ"}, headers=org.admin), 400,
                 code="invalid_cursor")
    assert_error(org.client.get("/activity/changes", params={"action": "shredded"}, headers=org.admin), 422,
                 param="action")
    # A deleted record takes its history with it; an erased person's changes are gone too.
    assert org.client.delete(f"/memory/{bert}", headers=org.admin).status_code == 204
    assert org.client.delete("/subjects/anna", headers=org.admin).status_code == 200
    assert ids() == [(shared, 1)]


def test_dsh_8_audit_leaves_out_excluded_actions(org: Org) -> None:
    _index(org)
    _get(org, "/audit", org.admin)
    every = {e["action"] for e in _get(org, "/audit", org.admin)["data"]}
    assert {"audit.read", "index.created", "key.created"} <= every
    changes = {e["action"] for e in _get(org, "/audit", org.admin, exclude_action=["audit.read", "memory.read"])[
        "data"]}
    assert "audit.read" not in changes and {"index.created", "key.created"} <= changes


def test_plt_7_an_administrator_mints_a_subject_token_for_one_key(org: Org, db: Any) -> None:
    index_id = _index(org)
    _write(org, index_id, "Anna drinks tea", "anna")
    _write(org, index_id, "Bert cycles to work", "bert")
    response = org.client.post(f"/tenants/{org.org_id}/keys/{org.key_id}/subject-tokens", headers=org.admin,
                               json={"subject": {"id": "anna", "attributes": {"team": ["support"]}},
                                     "ttl_seconds": 300})
    assert response.status_code == 201, response.text
    token = response.json()["token"]
    assert token.startswith("cst_")
    # The token is the key's, narrowed to Anna: it reads her record and never Bert's, and what it writes is the
    # key's work for her (the key's own document is not the token's to read: PLT-7).
    texts = {r["text"] for r in _get(org, "/memory", bearer(token))["data"]}
    assert texts == {"Anna drinks tea"}
    written = org.client.post("/memory", json={"index_id": index_id, "type": "fact", "text": "Anna walks"},
                              headers=bearer(token))
    assert written.status_code == 201 and written.json()["subject"] == "anna", written.text
    versions = _get(org, f"/memory/{written.json()['id']}/history", org.admin)["versions"]
    assert [v["actor"] for v in versions] == [{"type": "subject", "id": org.key_id}]
    assert_error(org.client.get("/key", headers=bearer(token)), 403, code="subject_token_forbidden")
    event = db.execute("SELECT object_id, subject_hash, detail FROM audit_events WHERE org_id = %s AND action = "
                       "'key.subject_token_minted'", (org.org_id,)).fetchone()
    assert event[0] == org.key_id and event[1] and event[1] != "anna" and "anna" not in str(event[2])

    assert_error(org.client.post(f"/tenants/{org.org_id}/keys/{org.key_id}/subject-tokens", headers=org.full,
                                 json={"subject": {"id": "anna"}}), 403, code="admin_required")
    assert_error(org.client.post(f"/tenants/{org.org_id}/keys/key_nothing/subject-tokens", headers=org.admin,
                                 json={"subject": {"id": "anna"}}), 404, param="key_id")
    assert_error(org.client.post(f"/tenants/{org.org_id}/keys/{org.key_id}/subject-tokens", headers=org.admin,
                                 json={"subject": {"id": "anna"}, "ttl_seconds": 10 ** 7}), 422, param="ttl_seconds")
    spare = org.make_key(["knowledge"], name="spare")
    assert org.client.post(f"/tenants/{org.org_id}/keys/{spare['id']}/revoke", headers=org.admin).status_code == 200
    assert_error(org.client.post(f"/tenants/{org.org_id}/keys/{spare['id']}/subject-tokens", headers=org.admin,
                                 json={"subject": {"id": "anna"}}), 409, code="key_not_active")
