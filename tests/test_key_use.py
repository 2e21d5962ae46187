"""A key's last use (PLT-4, shown on the dashboard's Keys page): written at most once a minute per key, by the key
itself or a subject token bound to it."""

from __future__ import annotations

from typing import Any

from tests.helpers import Org, bearer


def _listed(org: Org, key_id: str) -> dict[str, Any]:
    response = org.client.get(f"/tenants/{org.org_id}/keys/{key_id}", headers=org.admin)
    assert response.status_code == 200, response.text
    return dict(response.json())


def test_plt_4_last_use_is_noted_to_the_minute(org: Org, db: Any) -> None:
    key = org.make_key(["knowledge"], name="reader")
    assert key["last_used_at"] is None and _listed(org, key["id"])["last_used_at"] is None
    assert org.client.get("/indexes", headers=bearer(key["secret"])).status_code == 200
    first = _listed(org, key["id"])["last_used_at"]
    assert first is not None
    # Within the minute another use writes nothing.
    assert org.client.get("/indexes", headers=bearer(key["secret"])).status_code == 200
    assert _listed(org, key["id"])["last_used_at"] == first
    # A minute later the next use moves it; so does a subject token of the key.
    db.execute("UPDATE api_keys SET last_used_at = now() - interval '2 minutes' WHERE id = %s", (key["id"],))
    stale = _listed(org, key["id"])["last_used_at"]
    token = org.subject_token(key["secret"], "anna")
    db.execute("UPDATE api_keys SET last_used_at = now() - interval '2 minutes' WHERE id = %s", (key["id"],))
    assert org.client.get("/indexes", headers=bearer(token)).status_code == 200
    assert _listed(org, key["id"])["last_used_at"] > stale
    # A refused credential notes nothing: a revoked key is not used.
    assert org.client.post(f"/tenants/{org.org_id}/keys/{key['id']}/revoke", headers=org.admin).status_code == 200
    db.execute("UPDATE api_keys SET last_used_at = NULL WHERE id = %s", (key["id"],))
    assert org.client.get("/indexes", headers=bearer(key["secret"])).status_code == 401
    assert _listed(org, key["id"])["last_used_at"] is None
