"""INJ-3: store settings sections, defaults, section-replace, the budget ceiling, promotion's 403s, audit."""

from __future__ import annotations

from backend.access.policy import default_policy
from tests.helpers import assert_error, bearer


def _index(client, org, name="support"):
    return client.post("/indexes", headers=org.full, json={"name": name}).json()["id"]


def test_inj_3_defaults_for_a_store_nobody_configured(org, client):
    index_id = _index(client, org)
    body = client.get(f"/memory/stores/{index_id}", headers=org.full).json()
    assert body["injection"] == {"budget_tokens": 8000, "section_budgets": {}, "rank": "confidence",
                                 "episodes_limit": 0}
    assert body["commitments"] == {"inject_limit": 5}
    assert body["lessons"] == {"enabled": False, "min_episodes": 3}
    assert body["promotion"] == {"enabled": False, "labels": {}}
    assert body["maintenance"] == {"enabled": True}
    assert body["customised"] == [] and body["max_budget_tokens"] == 8000


def test_inj_3_a_section_sent_replaces_that_section_whole_and_others_stay(org, client):
    index_id = _index(client, org)
    first = client.patch(f"/memory/stores/{index_id}", headers=org.full,
                         json={"injection": {"rank": "blend", "episodes_limit": 3}, "commitments": {"inject_limit": 2}})
    assert first.status_code == 200, first.text
    second = client.patch(f"/memory/stores/{index_id}", headers=org.full, json={"injection": {"budget_tokens": 900}})
    body = second.json()
    assert body["injection"] == {"budget_tokens": 900, "section_budgets": {}, "rank": "confidence",
                                 "episodes_limit": 0}
    assert body["commitments"] == {"inject_limit": 2}
    assert body["customised"] == ["commitments", "injection"]
    assert client.get(f"/memory/stores/{index_id}", headers=org.full).json() == body


def test_inj_3_budget_above_the_operator_ceiling_is_capped(org, client):
    index_id = _index(client, org)
    body = client.patch(f"/memory/stores/{index_id}", headers=org.full,
                        json={"injection": {"budget_tokens": 50_000}}).json()
    assert body["injection"]["budget_tokens"] == 8000


def test_inj_3_changes_are_audited_with_before_and_after(org, client):
    index_id = _index(client, org)
    client.patch(f"/memory/stores/{index_id}", headers=org.full, json={"maintenance": {"enabled": False}})
    events = client.get(f"/audit?action=store.settings_changed&object_id={index_id}", headers=org.admin).json()["data"]
    assert len(events) == 1
    assert events[0]["detail"]["before"] == {"maintenance": {"enabled": True}}
    assert events[0]["detail"]["after"] == {"maintenance": {"enabled": False}}


def test_inj_3_promotion_needs_management_and_the_improvements_capability(org, client):
    index_id = _index(client, org)
    memory_only = org.make_key(["knowledge", "memory"])
    refused = client.patch(f"/memory/stores/{index_id}", headers=bearer(memory_only["secret"]),
                           json={"promotion": {"enabled": True}})
    assert_error(refused, 403, "capability_missing", "promotion")
    no_improvements = client.patch(f"/memory/stores/{index_id}", headers=org.full,
                                   json={"promotion": {"enabled": True}})
    assert_error(no_improvements, 403, "improvements_missing", "promotion")
    client.patch(f"/tenants/{org.org_id}", headers=org.admin, json={"capabilities": ["improvements"]})
    ok = client.patch(f"/memory/stores/{index_id}", headers=org.full,
                      json={"promotion": {"enabled": True, "labels": {"audience": "everyone"}}})
    assert ok.status_code == 200, ok.text
    assert ok.json()["promotion"] == {"enabled": True, "labels": {"audience": "everyone"}}
    # The other sections need `memory` alone.
    fine = client.patch(f"/memory/stores/{index_id}", headers=bearer(memory_only["secret"]),
                        json={"lessons": {"enabled": True}})
    assert fine.status_code == 200, fine.text


def test_inj_3_promotion_labels_are_checked_against_the_vocabulary(org, client):
    index_id = _index(client, org)
    client.patch(f"/tenants/{org.org_id}", headers=org.admin, json={"capabilities": ["improvements"]})
    client.put(f"/tenants/{org.org_id}/vocabulary", headers=org.admin, json={"memory_record": {"audience": {}}})
    response = client.patch(f"/memory/stores/{index_id}", headers=org.full,
                            json={"promotion": {"enabled": True, "labels": {"department": "payroll"}}})
    assert_error(response, 422, "label_not_in_vocabulary", "promotion.labels.department")


def test_inj_3_access_capability_subject_token_unreachable_index(org, other_org, client):
    index_id = _index(client, org)
    threads_only = org.make_key(["threads"])
    assert_error(client.get(f"/memory/stores/{index_id}", headers=bearer(threads_only["secret"])), 403,
                 "capability_missing")
    token = org.subject_token(org.key, "anna")
    assert client.get(f"/memory/stores/{index_id}", headers=bearer(token)).status_code == 200
    assert_error(client.patch(f"/memory/stores/{index_id}", headers=bearer(token), json={}), 403,
                 "subject_token_forbidden")
    other_index = _index(client, org, "other")
    policy = default_policy()
    policy["indexes"] = [other_index]
    narrow = org.make_key(["knowledge", "memory"], policy=policy)
    assert_error(client.get(f"/memory/stores/{index_id}", headers=bearer(narrow["secret"])), 404)
    assert_error(client.get(f"/memory/stores/{index_id}", headers=other_org.full), 404)


def test_inj_3_bad_values_are_422_naming_the_field(org, client, db):
    index_id = _index(client, org)
    cases = [({"injection": {"rank": "random"}}, "injection.rank"),
             ({"injection": {"section_budgets": {"gossip": 10}}}, "injection.section_budgets"),
             ({"commitments": {"inject_limit": -1}}, "commitments.inject_limit"),
             ({"maintenance": {"enabled": True, "extra": 1}}, "maintenance.extra"),
             ({"colour": {}}, "colour")]
    for body, param in cases:
        response = client.patch(f"/memory/stores/{index_id}", headers=org.full, json=body)
        assert_error(response, 422, param=param)
    assert db.execute("SELECT count(*) FROM store_settings").fetchone()[0] == 0


def test_inj_3_deleting_the_index_deletes_its_settings(org, client, db):
    index_id = _index(client, org)
    client.patch(f"/memory/stores/{index_id}", headers=org.full, json={"lessons": {"enabled": True}})
    client.delete(f"/indexes/{index_id}", headers=org.full)
    assert db.execute("SELECT count(*) FROM store_settings").fetchone()[0] == 0
