"""Edges of keys, organisations, subject tokens and the audit trail (PLT-4, PLT-7, PLT-10, PLT-12, PLT-14).

A long half-life in an audited detail still verifies, lone surrogates in cursors and subject attributes are 400s,
and a management key learns nothing of an index beyond its reach; then the audit chain under concurrent writers,
the one `request.denied` event a refused grant leaves, and a subject token refused on every management route.
"""

from __future__ import annotations

import base64
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

from backend.access.policy import default_policy, writer_policy
from tests.helpers import Org, assert_error, bearer


def _raw_cursor(json_text: bytes) -> str:
    """A cursor holding exactly this JSON text (`json.dumps` would escape what the test needs raw)."""
    return base64.urlsafe_b64encode(json_text).decode().rstrip("=")


def _index(client: Any, org: Org, name: str) -> str:
    response = client.post("/indexes", headers=org.admin, json={"name": name})
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def _verify(client: Any, org: Org) -> dict[str, Any]:
    response = client.get("/audit/verify", headers=org.admin)
    assert response.status_code == 200, response.text
    return dict(response.json())


# ---------------------------------------------------------------- edges of input and reach

def test_plt_12_the_chain_verifies_after_an_organisation_gets_a_long_half_life(org: Org, client: Any) -> None:
    """`org.updated` hashes the body's float 1e20 as `1e+20`; JSONB stores and hands back the integer
    100000000000000000000, so the row no longer matches its hash and `coremem audit verify` reports tampering."""
    changed = client.patch(f"/tenants/{org.org_id}", headers=org.admin,
                           json={"memory": {"decay": {"fact": {"half_life_days": 1e20}}}})
    assert changed.status_code == 200, changed.text
    report = _verify(client, org)
    assert report["intact"], ("PLT-12: an untampered trail fails verification after org.updated with "
                              f"half_life_days 1e20 (a float the event hashes differently than JSONB returns it): "
                              f"{report}")


def test_plt_14a_a_cursor_holding_a_lone_surrogate_is_400_on_the_key_routes(org: Org, client: Any) -> None:
    """`Page.after` hands the decoded string to the statement; psycopg cannot encode U+D800 as UTF-8: 500."""
    for path, cursor in ((f"/tenants/{org.org_id}/keys", _raw_cursor(b'"\\ud800"')),
                         (f"/tenants/{org.org_id}/keys/audit",
                          _raw_cursor(b'["2026-01-01T00:00:00+00:00", "\\ud800"]'))):
        response = client.get(path, headers=org.admin, params={"cursor": cursor})
        assert response.status_code == 400, (f"PLT-14/PLT-14a: a cursor holding a lone surrogate on GET {path} "
                                             f"answers {response.status_code}, not 400 invalid_cursor: "
                                             f"{response.text[:200]}")
        assert_error(response, 400, "invalid_cursor", "cursor")


def test_plt_10_a_management_key_cannot_learn_that_an_index_out_of_its_reach_exists(org: Org, client: Any) -> None:
    """A key's policy names the indexes it reaches; any other is absent, as if it did not exist (PLT-10). Naming one
    as a new key's injection store must answer as naming an index that does not exist; it is accepted (201)."""
    mine, hidden = _index(client, org, "mine"), _index(client, org, "hidden")
    own = {**writer_policy(), "indexes": [mine]}
    manager = org.make_key(["management", "knowledge", "memory"], policy=own)

    def create(index_id: str) -> Any:
        return client.post(f"/tenants/{org.org_id}/keys", headers=bearer(manager["secret"]),
                           json={"name": "child", "capabilities": ["knowledge", "memory"], "policy": own,
                                 "memory": {"injection": {"index_id": index_id}}})

    missing = create("idx_00000000000000000000000000")
    assert missing.status_code == 422, missing.text
    out_of_reach = create(hidden)
    assert (out_of_reach.status_code, out_of_reach.json().get("code")) == (
        missing.status_code, missing.json()["code"]), (
        f"PLT-10: an index outside the management key's policy answers {out_of_reach.status_code} "
        f"{out_of_reach.json().get('code')}, an index that does not exist {missing.status_code} "
        f"{missing.json()['code']}: the answer tells that the hidden index exists")
    patched = client.patch(f"/tenants/{org.org_id}/keys/{create(mine).json()['id']}",
                           headers=bearer(manager["secret"]), json={"memory": {"injection": {"index_id": hidden}}})
    assert patched.status_code == missing.status_code, (
        f"PLT-10: PATCH naming the hidden index answers {patched.status_code}: {patched.text[:200]}")


def test_plt_14_an_x_core_subject_attribute_holding_a_lone_surrogate_is_400(org: Org, client: Any) -> None:
    """The header is read with `json.loads`, which keeps `\\ud800`; `check_attributes` refuses only NUL, so a policy
    reading the attribute (`label_among`) sends it to PostgreSQL and psycopg cannot encode it: 500."""
    idx = _index(client, org, "d")
    policy = writer_policy()
    policy["rules"].append({"id": "dept", "effect": "permit", "kind": "memory_record",
                            "when": [{"atom": "label_among", "label": "department", "attribute": "department"}]})
    key = org.make_key(policy=policy)
    header = {"X-Core-Subject": '{"id": "anna", "attributes": {"department": ["\\ud800"]}}'}
    response = client.get("/memory", headers={**bearer(key["secret"]), **header}, params={"index_id": idx})
    assert response.status_code == 400, (f"PLT-14: an X-Core-Subject attribute holding a lone surrogate answers "
                                         f"{response.status_code}, not 400 invalid_subject: {response.text[:200]}")
    assert_error(response, 400, "invalid_subject")



def test_plt_4_a_management_key_gives_no_key_a_longer_life_or_less_privacy(org: Org, client: Any) -> None:
    """A key gives no more than it has (PLT-4): a management key that expires in an hour and hides personal data
    from its models made keys that never expired and showed the data (201); now each is 403 naming the field, and
    a key within both limits is made and changed as before."""
    soon = datetime.now(UTC) + timedelta(hours=1)
    manager = bearer(org.make_key(["management", "knowledge", "memory"], expires_at=soon.isoformat(),
                                  privacy={"pseudonymize": True})["secret"])
    keys = f"/tenants/{org.org_id}/keys"
    base = {"name": "child", "capabilities": ["knowledge"], "privacy": {"pseudonymize": True}}
    later = (soon + timedelta(days=1)).isoformat()
    for body, param, code in (({**base}, "expires_at", "expiry_not_grantable"),
                              ({**base, "expires_at": later}, "expires_at", "expiry_not_grantable"),
                              ({**base, "expires_at": soon.isoformat(), "privacy": None}, "privacy.pseudonymize",
                               "privacy_not_grantable"),
                              ({**base, "expires_at": soon.isoformat(), "privacy": {"pseudonymize": False}},
                               "privacy.pseudonymize", "privacy_not_grantable")):
        assert_error(client.post(keys, headers=manager, json=body), 403, code, param)
    made = client.post(keys, headers=manager, json={**base, "expires_at": (soon - timedelta(minutes=5)).isoformat()})
    assert made.status_code == 201, made.text
    child = f"{keys}/{made.json()['id']}"
    assert_error(client.patch(child, headers=manager, json={"expires_at": None}), 403, "expiry_not_grantable",
                 "expires_at")
    assert_error(client.patch(child, headers=manager, json={"privacy": {"pseudonymize": False}}), 403,
                 "privacy_not_grantable", "privacy.pseudonymize")
    renamed = client.patch(child, headers=manager, json={"name": "renamed"})
    assert renamed.status_code == 200, renamed.text
    # An administrator gives any.
    assert client.patch(child, headers=org.admin, json={"expires_at": None}).status_code == 200


# ---------------------------------------------------------------- the chain, refusals and subject tokens

def test_plt_12_concurrent_writers_keep_one_gap_free_chain(org: Org, live_api: str, client: Any, db: Any) -> None:
    import httpx

    plain = org.make_key(["knowledge"])  # no `management`: its key creations are refused, each with an event
    errors: list[str] = []

    def work(n: int) -> None:
        with httpx.Client(base_url=live_api, timeout=30) as http:
            for i in range(5):
                made = http.post(f"/tenants/{org.org_id}/keys", headers=org.admin,
                                 json={"name": f"k{n}-{i}", "capabilities": ["knowledge"]})
                refused = http.post(f"/tenants/{org.org_id}/keys", headers=bearer(plain["secret"]),
                                    json={"name": "x", "capabilities": ["knowledge"]})
                if made.status_code != 201 or refused.status_code != 403:
                    errors.append(f"{made.status_code} {refused.status_code} {refused.text[:100]}")

    before = db.execute("SELECT count(*) FROM audit_events WHERE org_id = %s", (org.org_id,)).fetchone()[0]
    workers = [threading.Thread(target=work, args=(n,)) for n in range(6)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert not errors, errors[:3]
    report = _verify(client, org)
    assert report["intact"], report
    actions = [r[0] for r in db.execute("SELECT action FROM audit_events WHERE org_id = %s ORDER BY seq OFFSET %s",
                                        (org.org_id, before)).fetchall()]
    assert sorted(set(actions)) == ["key.created", "request.denied"] and len(actions) == 60, actions


def test_plt_12_a_refused_grant_leaves_one_request_denied_event(org: Org, client: Any, db: Any) -> None:
    idx = _index(client, org, "a")
    manager = org.make_key(["management", "knowledge"], policy={**default_policy(), "indexes": [idx]})
    before = db.execute("SELECT max(seq) FROM audit_events WHERE org_id = %s", (org.org_id,)).fetchone()[0]
    keys = db.execute("SELECT count(*) FROM api_keys").fetchone()[0]
    refused = client.post(f"/tenants/{org.org_id}/keys", headers=bearer(manager["secret"]),
                          json={"name": "c", "capabilities": ["knowledge"]})  # the default policy: every index
    assert_error(refused, 403, "policy_not_grantable", "policy.indexes")
    rows = db.execute("SELECT action, outcome, actor_id, detail FROM audit_events WHERE org_id = %s AND seq > %s "
                      "ORDER BY seq", (org.org_id, before)).fetchall()
    assert [(r[0], r[1], r[2]) for r in rows] == [("request.denied", "denied", manager["id"])], rows
    assert rows[0][3] == {"route": "POST /tenants/{org_id}/keys", "code": "policy_not_grantable"}
    assert db.execute("SELECT count(*) FROM api_keys").fetchone()[0] == keys


def test_plt_7_a_subject_token_is_refused_on_every_management_route(org: Org, client: Any) -> None:
    key = org.make_key(["knowledge", "memory", "threads", "management"])
    token = bearer(org.subject_token(key["secret"], "anna"))
    keys = f"/tenants/{org.org_id}/keys"
    for method, path, body in (("GET", keys, None), ("POST", keys, {"name": "x", "capabilities": ["knowledge"]}),
                               ("GET", f"{keys}/audit", None), ("GET", f"{keys}/{key['id']}", None),
                               ("PATCH", f"{keys}/{key['id']}", {"name": "y"}),
                               ("POST", f"{keys}/{key['id']}/revoke", None), ("DELETE", f"{keys}/{key['id']}", None),
                               ("POST", f"{keys}/{key['id']}/subject-tokens", {"subject": {"id": "bob"}}),
                               ("GET", "/tenants", None), ("GET", f"/tenants/{org.org_id}", None),
                               ("PATCH", f"/tenants/{org.org_id}", {"name": "z"}),
                               ("GET", f"/tenants/{org.org_id}/vocabulary", None),
                               ("PUT", f"/tenants/{org.org_id}/vocabulary", {}),
                               ("GET", "/key", None), ("PUT", "/key/policy", default_policy()),
                               ("POST", "/subject-tokens", {"subject": {"id": "bob"}}),
                               ("GET", "/audit", None), ("GET", "/audit/verify", None), ("GET", "/usage", None),
                               ("DELETE", "/subjects/bob", None)):
        response = client.request(method, path, headers=token, json=body)
        assert response.status_code == 403, f"PLT-7: a subject token on {method} {path}: {response.text[:200]}"
    assert client.get(f"{keys}/{key['id']}", headers=org.admin).json()["name"] == key["name"]
