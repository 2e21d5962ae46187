"""Platform fixes: key audit trail paging (PLT-5/PLT-14a) and its read audited (PLT-2), bootstrap never takes over
another organisation's administrator (PLT-3), a key's `privacy` is validated (PLT-4/TRN-10), `/mcp` in the
OpenAPI document (PLT-16)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

from jsonschema import Draft202012Validator

from backend.params import encode_cursor
from tests.helpers import assert_error, bearer


def _walk(client: Any, url: str, headers: dict[str, str]) -> tuple[list[dict[str, Any]], int]:
    """Every entry of a paged route, following `next_cursor`; (entries, pages)."""
    entries: list[dict[str, Any]] = []
    cursor: str | None = None
    pages = 0
    while True:
        response = client.get(url + (f"&cursor={cursor}" if cursor else ""), headers=headers)
        assert response.status_code == 200, response.text
        body = response.json()
        entries += body["data"]
        pages += 1
        cursor = body["next_cursor"]
        if cursor is None:
            return entries, pages
        assert pages < 50


def test_plt_5_key_audit_trail_pages_newest_first_every_entry_once(org, client, db):
    made = [org.make_key(["knowledge"], name=f"k{n}") for n in range(3)]
    client.patch(f"/tenants/{org.org_id}/keys/{made[0]['id']}", headers=org.admin, json={"name": "renamed"})
    client.post(f"/tenants/{org.org_id}/keys/{made[1]['id']}/revoke", headers=org.admin)
    stored = db.execute("SELECT id, at FROM key_audit WHERE org_id = %s ORDER BY at DESC, id DESC",
                        (org.org_id,)).fetchall()
    assert len(stored) == 6  # the bootstrap key, three made, one change, one revocation
    url = f"/tenants/{org.org_id}/keys/audit?limit=2"
    entries, pages = _walk(client, url, org.admin)
    assert pages == 3 and [e["id"] for e in entries] == [r[0] for r in stored]
    # Entries of one instant (one transaction writes several) keep one order and none is lost or repeated.
    db.execute("UPDATE key_audit SET at = '2030-01-01T00:00:00Z' WHERE org_id = %s", (org.org_id,))
    for limit in (1, 4):
        tied, _ = _walk(client, f"/tenants/{org.org_id}/keys/audit?limit={limit}", org.admin)
        assert [e["id"] for e in tied] == sorted((r[0] for r in stored), reverse=True)
    one_key, _ = _walk(client, f"/tenants/{org.org_id}/keys/audit?limit=1&key_id={made[1]['id']}", org.admin)
    assert [e["action"] for e in one_key] == ["revoked", "created"]
    for bad in ("not-a-cursor!", encode_cursor(5), encode_cursor(["yesterday", "evt_x"]),
                encode_cursor(["2030-01-01T00:00:00", "evt_x"]), encode_cursor(["2030-01-01T00:00:00Z", 7])):
        assert_error(client.get(f"/tenants/{org.org_id}/keys/audit?cursor={bad}", headers=org.admin), 400,
                     "invalid_cursor", "cursor")


def _audit_reads(db: Any, org_id: str) -> list[tuple[Any, ...]]:
    return db.execute("SELECT actor_type, object_type, detail FROM audit_events WHERE org_id = %s "
                      "AND action = 'audit.read' ORDER BY seq", (org_id,)).fetchall()


def test_plt_2_an_administrators_read_of_the_key_audit_trail_is_audited(org, client, db):
    made = org.make_key(["knowledge", "management"])
    assert client.get(f"/tenants/{org.org_id}/keys/audit?key_id={made['id']}", headers=org.admin).status_code == 200
    reads = _audit_reads(db, org.org_id)
    assert len(reads) == 1
    actor_type, object_type, detail = reads[0]
    assert (actor_type, object_type) == ("admin", "audit")
    assert detail == {"route": "GET /tenants/{org_id}/keys/audit", "filters": {"key_id": made["id"]}, "count": 1}
    # PLT-2 is about administrators: a management key's read is not an administrator read.
    assert client.get(f"/tenants/{org.org_id}/keys/audit", headers=bearer(made["secret"])).status_code == 200
    assert len(_audit_reads(db, org.org_id)) == 1


def _cli(database_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    from sqlalchemy.engine import make_url

    plain = make_url(database_url).set(drivername="postgresql").render_as_string(hide_password=False)
    env = {**os.environ, "CORE_DATABASE_URL": plain, "CORE_SECRET": "cli-test-secret"}
    return subprocess.run([sys.executable, "-m", "backend.cli", *args], env=env, capture_output=True, text=True,
                          timeout=120)


def test_plt_3_bootstrap_refuses_the_address_of_another_organisations_administrator(org, client, db, database_url):
    def counts() -> tuple[Any, ...]:
        return db.execute("SELECT (SELECT count(*) FROM orgs), (SELECT count(*) FROM admins), "
                          "(SELECT count(*) FROM api_keys), (SELECT count(*) FROM admin_tokens), "
                          "(SELECT password_hash FROM admins WHERE email = %s)", (org.admin_email,)).fetchone()

    before = counts()
    refused = _cli(database_url, "bootstrap", "--org", "Globex", "--admin", org.admin_email.upper())
    assert refused.returncode != 0 and refused.stdout == ""
    assert "belongs to an administrator of another organisation" in refused.stderr, refused.stderr
    assert "Traceback" not in refused.stderr
    assert counts() == before  # no organisation, no key, no token, and her password unchanged
    login = {"email": org.admin_email, "password": org.admin_password}
    assert client.post("/admin/login", json=login).status_code == 200
    # Her own organisation is still bootstrapped again as before.
    again = _cli(database_url, "bootstrap", "--org", "Acme", "--admin", org.admin_email)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["org_id"] == org.org_id


def test_plt_4_a_keys_privacy_takes_only_known_fields_of_their_type(org, client, db):
    url = f"/tenants/{org.org_id}/keys"
    for privacy, param in (({"pseudonymise": True}, "privacy.pseudonymise"),
                           ({"pseudonymize": "no"}, "privacy.pseudonymize"),
                           ({"pseudonymize": "yes"}, "privacy.pseudonymize"),
                           ({"pseudonymize": 2}, "privacy.pseudonymize"),
                           ({"pseudonymize": None}, "privacy.pseudonymize"),
                           ([True], "privacy"), ("pseudonymize", "privacy")):
        body = {"name": "p", "capabilities": ["knowledge"], "privacy": privacy}
        assert_error(client.post(url, headers=org.admin, json=body), 422, "validation_failed", param)
    assert db.execute("SELECT count(*) FROM api_keys WHERE org_id = %s", (org.org_id,)).fetchone()[0] == 1
    made = org.make_key(["knowledge"], privacy={"pseudonymize": True})
    assert made["privacy"] == {"pseudonymize": True}
    assert client.get("/key", headers=bearer(made["secret"])).json()["privacy"] == {"pseudonymize": True}
    key_url = f"{url}/{made['id']}"
    assert_error(client.patch(key_url, headers=org.admin, json={"privacy": {"pseudonymise": False}}), 422,
                 "validation_failed", "privacy.pseudonymise")
    assert_error(client.patch(key_url, headers=org.admin, json={"privacy": {"pseudonymize": "off"}}), 422,
                 "validation_failed", "privacy.pseudonymize")
    assert client.get(key_url, headers=org.admin).json()["privacy"] == {"pseudonymize": True}
    assert client.patch(key_url, headers=org.admin, json={"privacy": {}}).json()["privacy"] == {"pseudonymize": False}
    assert client.patch(key_url, headers=org.admin, json={"privacy": None}).json()["privacy"] is None
    assert org.make_key(["knowledge"])["privacy"] is None


def test_plt_16_openapi_describes_mcp(org, client):
    document = client.get("/schema/openapi.json").json()
    operations = document["paths"]["/mcp"]
    assert set(operations) == {"post"}  # GET (no event stream) and DELETE (no sessions) only ever answer 405
    post = operations["post"]
    assert "`Authorization: Bearer`" in post["description"] and "405" in post["description"]
    assert {"200", "202", "400", "401", "413", "429"} <= set(post["responses"])
    request_schema = post["requestBody"]["content"]["application/json"]["schema"]
    answer_schema = post["responses"]["200"]["content"]["application/json"]["schema"]
    error_schema = document["components"]["schemas"]["ErrorBody"]
    headers = {**org.full, "Accept": "application/json, text/event-stream"}
    for message in ({"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                    {"jsonrpc": "2.0", "id": "two", "method": "no/such/method"}):
        Draft202012Validator(request_schema).validate(message)
        answer = client.post("/mcp", json=message, headers=headers)
        assert answer.status_code == 200, answer.text
        Draft202012Validator(answer_schema).validate(answer.json())
    accepted = client.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
    assert accepted.status_code == 202 and "202" in post["responses"]
    refused = client.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert refused.status_code == 401
    Draft202012Validator(error_schema).validate(refused.json())
