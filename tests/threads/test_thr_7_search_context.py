"""THR-7 with house rule 2: a search's statement is compiled once per policy shape and reused, but the
organisation's policy and time zone are read with the credential on every request, so a change applies to the
very next search."""

from __future__ import annotations

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from tests.helpers import bearer
from tests.threads.test_thr_7_search import search
from tests.threads.util import msg, new_thread

HIDE_THREADS = {"rules": [{"id": "hide-threads", "effect": "deny", "kind": "thread"}]}


def _patch_org(client, org, body) -> None:
    response = client.patch(f"/tenants/{org.org_id}", headers=org.admin, json=body)
    assert response.status_code == 200, response.text


def test_thr_7_a_changed_org_policy_applies_to_the_next_search(client, org):
    key = bearer(org.key)
    anna = bearer(org.key, "anna")
    new_thread(client, anna, items=[msg("user", "beleidswoord van anna")])
    new_thread(client, key, items=[msg("user", "gedeeld beleidswoord")])
    assert len(search(client, key, "beleidswoord")["data"]) == 2
    assert len(search(client, anna, "beleidswoord")["data"]) == 2

    _patch_org(client, org, {"policy": HIDE_THREADS})
    assert search(client, key, "beleidswoord")["data"] == []
    assert search(client, anna, "beleidswoord")["data"] == []
    assert client.get("/threads", headers=anna).json()["data"] == []  # as GET /threads shows her

    _patch_org(client, org, {"policy": {"rules": []}})
    assert len(search(client, anna, "beleidswoord")["data"]) == 2


def test_thr_7_a_changed_time_zone_applies_to_the_next_search(client, org):
    key = bearer(org.key)
    created = new_thread(client, key, items=[msg("user", "tijdzonewoord")])["items"][0]["created_at"]
    at = datetime.fromisoformat(created.replace("Z", "+00:00"))
    for zone in ("Pacific/Kiritimati", "Pacific/Pago_Pago", "Pacific/Kiritimati"):  # UTC+14, UTC-11
        _patch_org(client, org, {"timezone": zone})
        page = search(client, key, "tijdzonewoord")
        assert page["searched_to"] == str(at.astimezone(ZoneInfo(zone)).date() - timedelta(days=6))
