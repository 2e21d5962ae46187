"""EXT-1/PLT-14: a model is offered only to an organisation that exists, over HTTP and on the command line."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

from tests.helpers import Org, assert_error, operator_headers


def _models(db: Any) -> list[tuple[str, str]]:
    return [tuple(r) for r in db.execute("SELECT org_id, id FROM models ORDER BY org_id, id").fetchall()]


def _phantom_events(db: Any) -> list[Any]:
    return db.execute("SELECT org_id, action FROM audit_events WHERE org_id NOT IN (SELECT id FROM orgs)").fetchall()


def test_ext_1_an_operator_cannot_offer_a_model_to_an_organisation_that_does_not_exist(
        org: Org, client: Any, database_url: str, db: Any) -> None:
    operator = operator_headers(client, database_url)
    before = _models(db)
    for org_id in ("org_nonexistent", "x" * 3000, ""):
        body = {"id": "llama", "provider": "openai_compatible", "base_url": "http://x/v1", "org_id": org_id}
        refused = assert_error(client.post("/admin/models", headers=operator, json=body), 404, "not_found",
                               param="org_id")
        assert refused["message"] == "No such organisation."  # what an unknown X-Core-Org answers
    assert _models(db) == before
    assert _phantom_events(db) == []
    assert_error(client.delete("/admin/models/llama", headers=operator, params={"org_id": "org_nonexistent"}),
                 404, "not_found", param="org_id")
    # An organisation that exists, and every organisation, are offered to as before.
    body = {"id": "llama", "provider": "openai_compatible", "base_url": "http://x/v1", "org_id": org.org_id}
    assert client.post("/admin/models", headers=operator, json=body).status_code == 201
    everyone = {"id": "shared", "provider": "replay", "model": "demo"}
    assert client.post("/admin/models", headers=operator, json=everyone).status_code == 201
    assert [m["id"] for m in client.get("/models", headers=org.full).json()["data"]] == ["llama", "shared"]
    assert client.delete("/admin/models/llama", headers=operator, params={"org_id": org.org_id}).status_code == 204


def _cli(database_url: str, secret: str, *args: str) -> subprocess.CompletedProcess[str]:
    from sqlalchemy.engine import make_url

    plain = make_url(database_url).set(drivername="postgresql").render_as_string(hide_password=False)
    env = {**os.environ, "CORE_DATABASE_URL": plain, "CORE_SECRET": secret}
    return subprocess.run([sys.executable, "-m", "backend.cli", *args], env=env, capture_output=True, text=True,
                          timeout=120)


def test_ext_1_cli_refuses_to_offer_a_model_to_an_organisation_that_does_not_exist(
        org: Org, database_url: str, settings: Any, db: Any) -> None:
    before = _models(db)
    added = _cli(database_url, settings.secret, "models", "add", "llama", "--provider", "openai_compatible",
                 "--base-url", "http://x/v1", "--org", "org_nonexistent")
    assert added.returncode == 1, added.stdout
    assert "--org" in added.stderr and "org_nonexistent" in added.stderr, added.stderr
    assert "Traceback" not in added.stderr
    assert _models(db) == before
    assert _phantom_events(db) == []
    removed = _cli(database_url, settings.secret, "models", "remove", "llama", "--org", "org_nonexistent")
    assert removed.returncode == 1 and "--org" in removed.stderr, removed.stderr
