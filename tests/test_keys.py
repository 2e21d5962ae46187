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


def test_plt_5_put_key_policy_needs_management_and_may_only_narrow(org, client):
    plain = org.make_key(["knowledge"])
    doc = default_policy()
    assert_error(client.put("/key/policy", json=doc, headers=bearer(plain["secret"])), 403, "capability_missing")
    wide = default_policy()
    wide["rules"].append({"id": "w", "effect": "permit", "kind": "memory_write"})
    manager = org.make_key(["knowledge", "management"], policy=wide)
    narrower = default_policy()
    narrower["rules"].append({"id": "no-hr", "effect": "deny", "kind": "memory_record",
                              "match": {"labels": {"department": "hr"}}})
    response = client.put("/key/policy", json=narrower, headers=bearer(manager["secret"]))
    assert response.status_code == 200, response.text
    assert client.get("/key", headers=bearer(manager["secret"])).json()["policy"] == narrower
    # Giving itself back what it gave up is widening: only an administrator may.
    back = assert_error(client.put("/key/policy", json=wide, headers=bearer(manager["secret"])), 403,
                        "policy_not_grantable")
    assert back["param"] == "policy.rules[6]"  # the memory_write rule it gave up
    actions = [e["action"] for e in client.get(f"/tenants/{org.org_id}/keys/audit?key_id={manager['id']}",
                                                headers=org.admin).json()["data"]]
    assert actions == ["changed", "created"]


def test_plt_7_a_subject_token_cannot_read_its_keys_policy(org, client):
    """`GET /key` holds the key's policy, whose rules and writable values may name other people: a subject token
    gets 403 like on the tenant key routes, and the key itself (also naming a person) still reads it."""
    policy = default_policy()
    policy["rules"].append({"id": "hr-case", "effect": "deny", "kind": "memory_record",
                            "match": {"labels": {"subject": "bob"}}})
    policy["settings"] = {"writable_labels": {"participants": {"values": ["bob", "carol"]}}}
    key = org.make_key(["knowledge", "memory", "threads", "management"], policy=policy)
    token = client.post("/subject-tokens", headers=bearer(key["secret"]),
                        json={"subject": {"id": "anna"}, "ttl_seconds": 60}).json()["token"]
    for path in ("/key", f"/tenants/{org.org_id}/keys/{key['id']}"):
        refused = assert_error(client.get(path, headers=bearer(token)), 403, "subject_token_forbidden")
        assert "A subject token cannot" in refused["message"] and "bob" not in str(refused)
    assert "the key itself" in assert_error(client.get("/key", headers=bearer(token)), 403)["message"]
    assert_error(client.put("/key/policy", headers=bearer(token), json=default_policy()), 403,
                 "subject_token_forbidden")
    for headers in (bearer(key["secret"]), bearer(key["secret"], "anna")):
        own = client.get("/key", headers=headers)
        assert own.status_code == 200 and own.json()["policy"] == policy, own.text


def test_plt_4_a_management_key_never_widens_policies_nor_touches_administrators_keys(org, client):
    index = client.post("/indexes", json={"name": "payroll"}, headers=org.admin).json()["id"]
    own = default_policy()
    own["indexes"] = [index]
    own["rules"].append({"id": "no-hr", "effect": "deny", "kind": "memory_record",
                         "match": {"labels": {"department": "hr"}}})
    own["settings"] = {"subjects_required": True}
    manager = org.make_key(["management", "knowledge", "memory"], policy=own)
    headers = bearer(manager["secret"])
    keys = f"/tenants/{org.org_id}/keys"

    def create(policy):  # type: ignore[no-untyped-def]
        body = {"name": "child", "capabilities": ["knowledge"]}
        if policy is not None:
            body["policy"] = policy
        return client.post(keys, json=body, headers=headers)

    every_index = {**own, "indexes": ["*"]}
    assert assert_error(create(every_index), 403, "policy_not_grantable")["param"] == "policy.indexes"
    assert assert_error(create(None), 403, "policy_not_grantable")["param"] == "policy.indexes"  # default: "*"
    writes = {**own, "rules": [*own["rules"], {"id": "w", "effect": "permit", "kind": "memory_write"}]}
    assert assert_error(create(writes), 403, "policy_not_grantable")["param"] == f"policy.rules[{len(own['rules'])}]"
    no_deny = {**own, "rules": default_policy()["rules"]}
    assert assert_error(create(no_deny), 403, "policy_not_grantable")["param"] == "policy.rules"
    optional = {**own, "settings": {}}
    assert assert_error(create(optional), 403, "policy_not_grantable")["param"] == "policy.settings.subjects_required"
    narrower = {**own, "rules": [r for r in own["rules"] if r["kind"] != "thread"]}
    child = create(narrower)
    assert child.status_code == 201, child.text
    child_id = child.json()["id"]
    # Its own children it may change within its bounds, revoke and delete.
    widened = client.patch(f"{keys}/{child_id}", json={"policy": every_index}, headers=headers)
    assert_error(widened, 403, "policy_not_grantable")
    assert client.patch(f"{keys}/{child_id}", json={"name": "renamed"}, headers=headers).status_code == 200
    assert client.post(f"{keys}/{child_id}/revoke", headers=headers).status_code == 200
    assert client.delete(f"{keys}/{child_id}", headers=headers).status_code == 204
    # Keys an administrator made (itself included) are not its to revoke, delete or change.
    admins = org.make_key(["knowledge"])
    for response in (client.post(f"{keys}/{admins['id']}/revoke", headers=headers),
                     client.delete(f"{keys}/{admins['id']}", headers=headers),
                     client.patch(f"{keys}/{admins['id']}", json={"name": "x"}, headers=headers),
                     client.post(f"{keys}/{org.key_id}/revoke", headers=headers),
                     client.post(f"{keys}/{manager['id']}/revoke", headers=headers)):
        assert_error(response, 403, "key_created_by_administrator")
    assert client.get("/key", headers=bearer(admins["secret"])).status_code == 200


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


def test_plt_4_a_privacy_change_is_audited_with_its_before_and_after(org, client):
    created = org.make_key(["knowledge"])
    response = client.patch(f"/tenants/{org.org_id}/keys/{created['id']}", headers=org.admin,
                            json={"privacy": {"pseudonymize": True}})
    assert response.status_code == 200, response.text
    events = client.get(f"/audit?action=key.changed&object_id={created['id']}", headers=org.admin).json()["data"]
    assert [(e["detail"]["before"]["privacy"], e["detail"]["after"]["privacy"]) for e in events] == [
        (None, {"pseudonymize": True})]


def test_plt_8_a_rule_description_is_an_unknown_field_everywhere_a_policy_is_sent(org, client, db):
    """A rule is `{id, effect, kind, actions?, match?, when?}`: anything else, `description` too, is 422 at its path."""
    described = default_policy()
    described["rules"][0]["description"] = "Her own records."
    made = client.post(f"/tenants/{org.org_id}/keys", headers=org.admin,
                       json={"name": "x", "capabilities": ["knowledge"], "policy": described})
    assert_error(made, 422, "invalid_policy", "policy.rules[0].description")
    manager = org.make_key(["knowledge", "management"])
    assert_error(client.put("/key/policy", json=described, headers=bearer(manager["secret"])), 422,
                 "invalid_policy", "policy.rules[0].description")
    assert_error(client.patch(f"/tenants/{org.org_id}", json={"policy": {"rules": described["rules"]}},
                              headers=org.admin), 422, "invalid_policy", "policy.rules[0].description")
    stored = db.execute("SELECT count(*) FROM api_keys WHERE policy::text LIKE '%%description%%'").fetchone()[0]
    assert stored == 0


def test_plt_4_an_expiry_in_the_past_is_refused_on_change_as_on_create(org, client, db):
    """PATCH with a past `expires_at` was taken, so the key ended as a change rather than a revocation; now 422
    on `expires_at` as at creation, and nothing is changed."""
    created = org.make_key(["knowledge"])
    past = (datetime.now(UTC) - timedelta(minutes=1)).isoformat()
    for send in (lambda body: client.post(f"/tenants/{org.org_id}/keys", headers=org.admin,
                                          json={"name": "x", "capabilities": ["knowledge"], **body}),
                 lambda body: client.patch(f"/tenants/{org.org_id}/keys/{created['id']}", headers=org.admin,
                                           json={"name": "renamed", **body})):
        assert_error(send({"expires_at": past}), 422, "validation_failed", "expires_at")
    stored = db.execute("SELECT name, expires_at FROM api_keys WHERE id = %s", (created["id"],)).fetchone()
    assert stored == ("test key", None)
    assert client.get("/indexes", headers=bearer(created["secret"])).status_code == 200
    future = (datetime.now(UTC) + timedelta(days=1)).isoformat()
    changed = client.patch(f"/tenants/{org.org_id}/keys/{created['id']}", headers=org.admin,
                           json={"expires_at": future})
    assert changed.status_code == 200, changed.text
