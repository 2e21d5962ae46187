"""PLT-4 … PLT-6: keys, capabilities, the key's own document, the key audit trail."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from backend.access.credentials import hash_secret
from backend.access.policy import default_policy
from tests.helpers import assert_error, bearer


def test_plt_4_secret_shown_once_and_only_its_hash_stored(org, client, db):
    created = org.make_key(["knowledge"], name="reader")
    secret = created["secret"]
    assert secret.startswith("ck_") and len(secret) >= 3 + 43  # 32 random bytes, base64url
    fetched = client.get(f"/tenants/{org.org_id}/keys/{created['id']}", headers=org.admin).json()
    assert "secret" not in fetched
    listed = client.get(f"/tenants/{org.org_id}/keys", headers=org.admin).json()["data"]
    assert all("secret" not in k for k in listed)
    stored = db.execute("SELECT secret_hash FROM api_keys WHERE id = %s", (created["id"],)).fetchone()
    assert stored[0] == hash_secret(secret)
    dump = db.execute("SELECT string_agg(t::text, ' ') FROM api_keys t").fetchone()[0]
    assert secret not in dump


def test_plt_4_revoked_expired_and_deleted_keys_are_401_everywhere(org, client, db):
    revoked = org.make_key(["knowledge"])
    assert client.get("/indexes", headers=bearer(revoked["secret"])).status_code == 200
    response = client.post(f"/tenants/{org.org_id}/keys/{revoked['id']}/revoke", headers=org.admin)
    assert response.status_code == 200 and response.json()["status"] == "revoked"
    for path in ("/indexes", "/key"):
        assert_error(client.get(path, headers=bearer(revoked["secret"])), 401, "key_revoked")
    listed = client.get(f"/tenants/{org.org_id}/keys", headers=org.admin).json()["data"]
    assert {k["id"]: k["status"] for k in listed}[revoked["id"]] == "revoked"

    expiring = org.make_key(["knowledge"], expires_at=(datetime.now(UTC) + timedelta(hours=1)).isoformat())
    db.execute("UPDATE api_keys SET expires_at = now() - interval '1 second' WHERE id = %s", (expiring["id"],))
    assert_error(client.get("/indexes", headers=bearer(expiring["secret"])), 401, "key_expired")

    deleted = org.make_key(["knowledge"])
    assert client.delete(f"/tenants/{org.org_id}/keys/{deleted['id']}", headers=org.admin).status_code == 204
    assert_error(client.get("/indexes", headers=bearer(deleted["secret"])), 401, "bad_credential")
    assert_error(client.get(f"/tenants/{org.org_id}/keys/{deleted['id']}", headers=org.admin), 404)
    trail = client.get(f"/tenants/{org.org_id}/keys/audit?key_id={deleted['id']}", headers=org.admin).json()["data"]
    assert [e["action"] for e in trail] == ["deleted", "created"]


def test_plt_4_memory_needs_knowledge(org, client):
    response = client.post(f"/tenants/{org.org_id}/keys", headers=org.admin,
                           json={"name": "m", "capabilities": ["memory"]})
    assert_error(response, 422, "capability_dependency", "capabilities")


def test_plt_4_a_key_grants_only_a_subset_and_never_management(org, client):
    manager = org.make_key(["management", "knowledge"])
    too_much = client.post(f"/tenants/{org.org_id}/keys", headers=bearer(manager["secret"]),
                           json={"name": "x", "capabilities": ["knowledge", "threads"]})
    assert_error(too_much, 403, "capability_not_grantable", "capabilities")
    management = client.post(f"/tenants/{org.org_id}/keys", headers=bearer(manager["secret"]),
                             json={"name": "x", "capabilities": ["management"]})
    assert_error(management, 403, "capability_not_grantable")
    fine = client.post(f"/tenants/{org.org_id}/keys", headers=bearer(manager["secret"]),
                       json={"name": "x", "capabilities": ["knowledge"]})
    assert fine.status_code == 201, fine.text


def test_plt_9_key_without_policy_stores_the_default_verbatim(org, client):
    created = org.make_key(["knowledge"])
    own = client.get("/key", headers=bearer(created["secret"])).json()
    assert own["policy"] == default_policy()
    given = {"indexes": ["*"], "rules": [{"id": "x", "effect": "permit", "kind": "thread", "actions": ["see"]}]}
    second = org.make_key(["knowledge"], policy=given)
    assert client.get("/key", headers=bearer(second["secret"])).json()["policy"] == given


def test_plt_5_put_key_policy_needs_management(org, client):
    plain = org.make_key(["knowledge"])
    doc = default_policy()
    doc["rules"].append({"id": "w", "effect": "permit", "kind": "memory_write"})
    assert_error(client.put("/key/policy", json=doc, headers=bearer(plain["secret"])), 403, "capability_missing")
    manager = org.make_key(["knowledge", "management"])
    response = client.put("/key/policy", json=doc, headers=bearer(manager["secret"]))
    assert response.status_code == 200, response.text
    assert client.get("/key", headers=bearer(manager["secret"])).json()["policy"] == doc
    actions = [e["action"] for e in client.get(f"/tenants/{org.org_id}/keys/audit?key_id={manager['id']}",
                                                headers=org.admin).json()["data"]]
    assert actions == ["changed", "created"]


def test_plt_6_missing_capability_is_403_naming_it(org, client):
    threads_only = org.make_key(["threads"])
    body = assert_error(client.get("/indexes", headers=bearer(threads_only["secret"])), 403, "capability_missing")
    assert "`knowledge`" in body["message"]
    keys_route = client.get(f"/tenants/{org.org_id}/keys", headers=bearer(threads_only["secret"]))
    assert "`management`" in assert_error(keys_route, 403, "capability_missing")["message"]


def test_plt_4_another_organisation_is_404(org, other_org, client):
    assert_error(client.get(f"/tenants/{other_org.org_id}/keys", headers=org.admin), 404)
    assert_error(client.get(f"/tenants/{other_org.org_id}/keys/{other_org.key_id}", headers=org.full), 404)
    assert_error(client.get(f"/tenants/{org.org_id}/keys/{other_org.key_id}", headers=org.admin), 404)


def test_plt_4_patch_changes_and_audits(org, client):
    created = org.make_key(["knowledge"])
    response = client.patch(f"/tenants/{org.org_id}/keys/{created['id']}", headers=org.admin,
                            json={"name": "renamed", "capabilities": ["knowledge", "memory"]})
    assert response.status_code == 200, response.text
    assert response.json()["name"] == "renamed"
    assert response.json()["capabilities"] == ["knowledge", "memory"]
    events = client.get(f"/audit?action=key.changed&object_id={created['id']}", headers=org.admin).json()["data"]
    assert len(events) == 1
    assert events[0]["detail"]["before"]["name"] == "test key"
    assert events[0]["detail"]["after"]["name"] == "renamed"
