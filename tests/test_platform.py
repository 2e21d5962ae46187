"""PLT-1/2/3, PLT-15 … PLT-17: administrators, organisations, ids, OpenAPI, health and readiness, the CLI."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from typing import Any

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from litestar.testing import TestClient
from sqlalchemy import create_engine

from backend.app import create_app
from backend.db.engine import normalise_url
from backend.db.schema import include_object, metadata
from backend.ids import new_id
from tests.helpers import assert_error, bearer


def test_plt_2_login_logout_and_wrong_password(org, client):
    bad = client.post("/admin/login", json={"email": org.admin_email, "password": "wrong"})
    assert_error(bad, 401, "bad_login")
    good = client.post("/admin/login", json={"email": org.admin_email, "password": org.admin_password})
    assert good.status_code == 200, good.text
    session = good.json()
    assert session["token"].startswith("cat_") and session["admin"]["org_id"] == org.org_id
    headers = bearer(session["token"])
    assert client.get(f"/tenants/{org.org_id}", headers=headers).json()["name"] == "Acme"
    assert client.post("/admin/logout", headers=headers).status_code == 204
    assert_error(client.get(f"/tenants/{org.org_id}", headers=headers), 401)


def test_plt_14_logout_with_a_key_is_403_admin_required_as_on_every_administrators_route(org, client):
    """A valid key is a credential (not 401): it lacks the right to log out, like on every administrator route."""
    refused = assert_error(client.post("/admin/logout", headers=org.full), 403, "admin_required")
    assert refused == assert_error(client.get("/audit", headers=org.full), 403, "admin_required")
    assert_error(client.post("/admin/logout", headers=bearer("ck_not_a_key")), 401)
    assert client.get("/key", headers=org.full).status_code == 200  # the key still works


def test_plt_2_password_is_stored_as_argon2(org, db):
    stored = db.execute("SELECT password_hash FROM admins WHERE email = %s", (org.admin_email,)).fetchone()[0]
    assert stored.startswith("$argon2id$") and org.admin_password not in stored


def test_plt_2_expired_admin_token_is_401(org, client, db):
    db.execute("UPDATE admin_tokens SET expires_at = now() - interval '1 second'")
    assert_error(client.get(f"/tenants/{org.org_id}", headers=org.admin), 401)


def test_plt_1_organisation_settings_patch_validates_and_audits(org, client):
    response = client.patch(f"/tenants/{org.org_id}", headers=org.admin, json={
        "timezone": "Europe/Amsterdam", "memory": {"decay": {"fact": {"half_life_days": 30}}},
        "improvements": {"enabled": True}, "helper_model": {"provider": "p", "model": "m"}})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["timezone"] == "Europe/Amsterdam" and body["memory"]["decay"]["fact"]["half_life_days"] == 30
    assert_error(client.patch(f"/tenants/{org.org_id}", headers=org.admin, json={"timezone": "Mars/Olympus"}), 422,
                 param="timezone")
    bad_policy = {"rules": [{"id": "x", "effect": "permit", "kind": "thread", "when": [{"atom": "nope"}]}]}
    assert_error(client.patch(f"/tenants/{org.org_id}", headers=org.admin, json={"policy": bad_policy}), 422,
                 param="policy.rules[0].when[0].atom")
    assert_error(client.patch(f"/tenants/{org.org_id}", headers=org.full, json={"timezone": "UTC"}), 403)
    events = client.get("/audit?action=org.updated", headers=org.admin).json()["data"]
    assert len(events) == 1 and events[0]["detail"]["changed"]["timezone"]["after"] == "Europe/Amsterdam"


def test_plt_15_ids_are_prefixed_and_time_ordered():
    first, second = new_id("mem", at_ms=1_700_000_000_000), new_id("mem", at_ms=1_700_000_000_001)
    assert re.fullmatch(r"mem_[0-9a-hjkmnp-tv-z]{26}", first)
    assert first < second
    assert len({new_id("key") for _ in range(1000)}) == 1000


def test_plt_16_openapi_describes_the_routes(client):
    document = client.get("/schema/openapi.json").json()
    paths = document["paths"]
    for path in ("/tenants/{org_id}/keys", "/key", "/key/policy", "/subject-tokens", "/indexes", "/audit",
                 "/admin/login", "/health", "/ready", "/mcp"):
        assert path in paths, path
    create = paths["/tenants/{org_id}/keys"]["post"]
    schema_ref = create["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    component = document["components"]["schemas"][schema_ref.rsplit("/", 1)[1]]
    assert set(component["required"]) == {"name", "capabilities"}
    assert component["additionalProperties"] is False


def test_plt_16_openapi_lists_the_failed_turn_and_the_wrong_media_type(client):
    paths = client.get("/schema/openapi.json").json()["paths"]
    error_body = {"$ref": "#/components/schemas/ErrorBody"}
    failed_turn = paths["/messages"]["post"]["responses"]["502"]
    assert failed_turn["content"]["application/json"]["schema"] == error_body
    wrong_media = paths["/threads/{thread_id}/state"]["patch"]["responses"]["415"]
    assert wrong_media["content"]["application/json"]["schema"] == error_body
    # Only where they are answered.
    assert "502" not in paths["/responses"]["post"]["responses"]
    assert "415" not in paths["/threads/{thread_id}/state"]["put"]["responses"]


def test_plt_17_ready_fails_while_migrations_are_behind(postgres, settings):
    postgres.execute('DROP DATABASE IF EXISTS "behind" WITH (FORCE)')
    postgres.execute('CREATE DATABASE "behind"')
    url = postgres.url_for("behind")
    with TestClient(create_app(settings, url)) as behind:
        assert behind.get("/health").status_code == 200
        body = assert_error(behind.get("/ready"), 503, "not_ready")
        assert "coremem migrate" in body["message"]
    postgres.execute('DROP DATABASE "behind" WITH (FORCE)')


def test_migrations_match_the_models(database_url):
    engine = create_engine(normalise_url(database_url))
    with engine.connect() as conn:
        # The job queue's tables are procrastinate's schema, not models of ours (backend/db/schema.include_object).
        context = MigrationContext.configure(conn, opts={"compare_server_default": True,
                                                         "include_object": include_object})
        diff = compare_metadata(context, metadata)
    engine.dispose()
    assert diff == [], diff


def _cli(database_url: str, *args: str, data_dir: Any = None) -> subprocess.CompletedProcess[str]:
    from sqlalchemy.engine import make_url

    plain = make_url(database_url).set(drivername="postgresql").render_as_string(hide_password=False)
    env = {**os.environ, "CORE_DATABASE_URL": plain, "CORE_SECRET": "cli-test-secret"}
    if data_dir is not None:
        env["CORE_DATA_DIR"] = str(data_dir)
    return subprocess.run([sys.executable, "-m", "backend.cli", *args], env=env, capture_output=True, text=True,
                          timeout=120)


def test_plt_3_coremem_bootstrap_prints_the_json_and_is_idempotent(database_url, db):
    first = _cli(database_url, "bootstrap", "--org", "Initech", "--admin", "boss@initech.test")
    assert first.returncode == 0, first.stderr
    out = json.loads(first.stdout)
    assert set(out) == {"org_id", "admin_email", "admin_password", "admin_token", "key_id", "key"}
    assert out["key"].startswith("ck_") and out["org_id"].startswith("org_")
    again = json.loads(_cli(database_url, "bootstrap", "--org", "Initech", "--admin", "boss@initech.test").stdout)
    assert again["org_id"] == out["org_id"]
    assert db.execute("SELECT count(*) FROM orgs WHERE name = 'Initech'").fetchone()[0] == 1
    assert db.execute("SELECT count(*) FROM admins WHERE email = 'boss@initech.test'").fetchone()[0] == 1
    rules = db.execute("SELECT policy FROM api_keys WHERE id = %s", (out["key_id"],)).fetchone()[0]["rules"]
    assert any(r["kind"] == "memory_write" and r["effect"] == "permit" for r in rules)


def test_plt_2_an_operator_names_the_organisation(org, other_org, client, database_url):
    from backend.domains.orgs.service import create_operator
    from tests.helpers import in_transaction

    _, password = in_transaction(database_url, lambda db: create_operator(db, "ops@example.test"))
    token = client.post("/admin/login", json={"email": "ops@example.test", "password": password}).json()["token"]
    headers = bearer(token)
    names = {o["name"] for o in client.get("/tenants", headers=headers).json()["data"]}
    assert names == {"Acme", "Globex"}
    assert_error(client.get("/indexes", headers=headers), 400, "org_required", "X-Core-Org")
    assert_error(client.get("/indexes", headers={**headers, "X-Core-Org": "org_nope"}), 404)
    client.post("/indexes", headers=other_org.full, json={"name": "globex-only"})
    seen = client.get("/indexes", headers={**headers, "X-Core-Org": other_org.org_id}).json()["data"]
    assert [i["name"] for i in seen] == ["globex-only"]
    assert client.get(f"/tenants/{org.org_id}/keys", headers=headers).status_code == 200
