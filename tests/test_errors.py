"""PLT-14: every class of bad input gets its status and error body, with `param`, and writes nothing."""

from __future__ import annotations

import json

import pytest

from tests.helpers import assert_error, bearer


def _count_keys(db, org_id):
    return db.execute("SELECT count(*) FROM api_keys WHERE org_id = %s", (org_id,)).fetchone()[0]


@pytest.mark.parametrize(("body", "status", "code", "param"), [
    ('{"name": "x", ', 400, "malformed_body", None),
    ("not json at all", 400, "malformed_body", None),
    (json.dumps({"name": "x", "capabilities": ["knowledge"], "bogus": 1}), 422, "validation_failed", "bogus"),
    (json.dumps({"name": 1, "capabilities": ["knowledge"]}), 422, "validation_failed", "name"),
    (json.dumps({"name": "x", "capabilities": "knowledge"}), 422, "validation_failed", "capabilities"),
    (json.dumps({"name": "x", "capabilities": ["nope"]}), 422, "validation_failed", "capabilities[0]"),
    (json.dumps({"capabilities": ["knowledge"]}), 422, "validation_failed", "name"),
    (json.dumps({"name": "", "capabilities": ["knowledge"]}), 422, "validation_failed", "name"),
    (json.dumps({"name": "x", "capabilities": ["knowledge"], "expires_at": "2030-01-01T00:00:00"}), 422,
     "validation_failed", "expires_at"),
    (json.dumps({"name": "x", "capabilities": ["knowledge"], "memory": {"retrieval_tool": "yes"}}), 422,
     "validation_failed", "memory.retrieval_tool"),
    (json.dumps({"name": "x", "capabilities": ["knowledge"], "memory": {"colour": 1}}), 422,
     "validation_failed", "memory.colour"),
    (json.dumps({"name": "x", "capabilities": ["knowledge"],
                 "policy": {"rules": [{"id": "a", "effect": "permit", "kind": "thread", "when": [{"atom": "zz"}]}]}}),
     422, "invalid_policy", "policy.rules[0].when[0].atom"),
])
def test_plt_14_bad_key_bodies(org, client, db, body, status, code, param):
    before = _count_keys(db, org.org_id)
    response = client.post(f"/tenants/{org.org_id}/keys", content=body,
                           headers={**org.admin, "Content-Type": "application/json"})
    assert_error(response, status, code, param)
    assert _count_keys(db, org.org_id) == before


def test_plt_14_oversized_body_is_413_and_writes_nothing(org, client, db):
    before = _count_keys(db, org.org_id)
    big = json.dumps({"name": "x" * (1024 * 1024 + 1), "capabilities": ["knowledge"]})
    response = client.post(f"/tenants/{org.org_id}/keys", content=big,
                           headers={**org.admin, "Content-Type": "application/json"})
    assert_error(response, 413, "payload_too_large")
    assert _count_keys(db, org.org_id) == before


@pytest.mark.parametrize(("headers", "code"), [
    ({}, "missing_credential"),
    ({"Authorization": "Basic abc"}, "bad_credential"),
    ({"Authorization": "Bearer "}, "missing_credential"),
    ({"Authorization": "Bearer ck_not-a-real-key"}, "bad_credential"),
    ({"Authorization": "Bearer cat_not-a-real-token"}, "bad_credential"),
    ({"Authorization": "Bearer cst_not.a.jwt"}, "bad_credential"),
    ({"Authorization": "Bearer something-else"}, "bad_credential"),
])
def test_plt_14_bad_credentials_are_401(client, org, headers, code):
    assert_error(client.get("/indexes", headers=headers), 401, code)


def test_plt_14_query_type_errors_name_the_parameter(org, client):
    assert_error(client.get("/indexes?limit=abc", headers=org.full), 422, "validation_failed", "limit")
    assert_error(client.get("/indexes?limit=0", headers=org.full), 400, param="limit")
    assert_error(client.get("/indexes?cursor=%%%", headers=org.full), 400, "invalid_cursor", "cursor")


def test_plt_14_unknown_route_and_method(org, client):
    assert_error(client.get("/no-such-route", headers=org.full), 404, "not_found")
    assert_error(client.delete("/health"), 405, "method_not_allowed")


def test_plt_14a_page_size_is_capped_not_obeyed(org, client):
    for i in range(3):
        client.post("/indexes", json={"name": f"i{i}"}, headers=org.full)
    response = client.get("/indexes?limit=1000000", headers=org.full)
    assert response.status_code == 200 and len(response.json()["data"]) == 3


def test_plt_14_unknown_vocabulary_kind_is_422_and_writes_nothing(org, client, db):
    response = client.put(f"/tenants/{org.org_id}/vocabulary", json={"memory_thing": {}}, headers=org.admin)
    assert_error(response, 422, param="memory_thing")
    assert db.execute("SELECT vocabulary FROM orgs WHERE id = %s", (org.org_id,)).fetchone()[0] is None
    ok = client.put(f"/tenants/{org.org_id}/vocabulary", headers=bearer(org.key),
                    json={"memory_record": {"department": {"attribute": True}, "audience": {}}})
    assert ok.status_code == 200, ok.text


def test_plt_11_the_vocabulary_lists_only_names_a_label_can_have(org, client, db):
    """The vocabulary took "", `subject` (the owner's pseudo-label) and names of 100,000 characters, which no record
    or thread can carry; now 422 at the name, as on a record, and nothing is written."""
    for name in ("", "subject", "x" * 65):
        response = client.put(f"/tenants/{org.org_id}/vocabulary", json={"thread": {name: {}}}, headers=org.admin)
        assert_error(response, 422, "validation_failed", f"thread.{name}")
    assert db.execute("SELECT vocabulary FROM orgs WHERE id = %s", (org.org_id,)).fetchone()[0] is None
