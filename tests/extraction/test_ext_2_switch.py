"""EXT-2 … EXT-6: the extraction switch over HTTP: defaults, refusals, author, state and its fixes, re-queueing."""

from __future__ import annotations

from backend.access.policy import writer_policy
from tests.extraction.util import get_switch, new_store, set_switch, switch_on
from tests.helpers import assert_error, bearer


def test_ext_2_defaults_and_author(client, org, scripted):
    index_id = new_store(org)
    body = switch_on(org, index_id)
    assert body["types"] == ["fact", "preference", "commitment", "behaviour"]
    assert (body["schedule_minutes"], body["quiet_minutes"], body["threads"]) == (60, 0, "with_person")
    assert (body["episodes"], body["lessons"], body["filters"]) == (False, False, {"key_ids": [], "agent_ids": []})
    assert body["author_key_id"] == org.key_id and body["state"] == "active"
    assert body["windows"] == {"ready": 0, "failed": 0, "queued": 0, "parked": 0} and body["error_code"] is None
    assert body["last_run"] is None
    # A PUT that leaves `threads` out sets with_person again.
    switch_on(org, index_id, threads="all")
    assert switch_on(org, index_id)["threads"] == "with_person"
    events = client.get("/audit", params={"action": "extraction.switch_set"}, headers=org.admin).json()["data"]
    assert len(events) == 3 and events[0]["object_id"] == index_id


def test_ext_2_refusals(client, org, scripted):
    index_id = new_store(org)
    assert_error(set_switch(org, index_id, model="nope"), 422, "model_not_offered", "model")
    assert_error(set_switch(org, index_id, lessons=True), 422, param="lessons")
    assert_error(set_switch(org, index_id, filters={"agent_ids": ["agt_unknown"]}), 422, "agent_not_found",
                 "filters.agent_ids[0]")
    assert_error(set_switch(org, index_id, filters={"key_ids": ["key_never"]}), 422, "key_not_found",
                 "filters.key_ids[0]")
    assert_error(set_switch(org, index_id, types=["episode"]), 422, param="types[0]")
    no_threads = org.make_key(["knowledge", "memory"])["secret"]
    assert_error(set_switch(org, index_id, headers=bearer(no_threads), enabled=False), 403)
    reader = org.make_key(["knowledge", "memory", "threads"], policy={"indexes": ["*"], "rules": []})["secret"]
    assert_error(set_switch(org, index_id, headers=bearer(reader)), 403, "policy_denied")
    assert_error(set_switch(org, "idx_missing"), 404)


def test_ext_2_a_revoked_key_is_accepted_and_a_filtered_agent_cannot_be_deleted(client, org, scripted):
    index_id = new_store(org)
    old = org.make_key(["threads"])
    assert client.post(f"/tenants/{org.org_id}/keys/{old['id']}/revoke", headers=org.admin).status_code in (200, 204)
    agent = client.post("/agents", headers=org.full,
                        json={"name": "helper", "model": "scripted", "instructions": "Help."})
    assert agent.status_code == 201, agent.text
    agent_id = agent.json()["id"]
    body = switch_on(org, index_id, filters={"key_ids": [old["id"]], "agent_ids": [agent_id]})
    assert body["filters"] == {"key_ids": [old["id"]], "agent_ids": [agent_id]}
    assert_error(client.delete(f"/agents/{agent_id}", headers=org.full), 409, "agent_in_use")
    switch_on(org, index_id)  # filters removed: now it may go
    assert client.delete(f"/agents/{agent_id}", headers=org.full).status_code == 204


def test_ext_5_each_state_and_its_fix(client, org, scripted):
    index_id = new_store(org)
    assert switch_on(org, index_id, enabled=False)["state"] == "off"
    author = org.make_key(policy=writer_policy())
    assert set_switch(org, index_id, headers=bearer(author["secret"])).json()["author_key_id"] == author["id"]
    assert client.post(f"/tenants/{org.org_id}/keys/{author['id']}/revoke", headers=org.admin).status_code in (200,
                                                                                                                204)
    assert get_switch(org, index_id)["state"] == "author_unavailable"
    assert switch_on(org, index_id)["state"] == "active"  # sent again: its sender is the author now
    assert client.delete("/admin/models/scripted", headers=org.admin,
                         params={"org_id": org.org_id}).status_code in (200, 204)
    assert get_switch(org, index_id)["state"] == "model_unavailable"
    assert_error(set_switch(org, index_id), 422, "model_not_offered", "model")  # the same model is refused
    assert client.post("/admin/models", headers=org.admin, json={
        "id": "other", "provider": "openai_compatible", "base_url": scripted.url}).status_code == 201
    assert switch_on(org, index_id, model="other")["state"] == "active"
    assert client.delete(f"/indexes/{index_id}", headers=org.full).status_code == 204
    assert get_switch(org, index_id)["state"] == "objects_missing"


def test_ext_4_run_now_needs_management_and_subject_tokens_are_refused(client, org, scripted):
    index_id = new_store(org)
    switch_on(org, index_id)
    plain = org.make_key(["knowledge", "memory", "threads"])["secret"]
    assert_error(client.post(f"/memory/stores/{index_id}/extraction/run", headers=bearer(plain)), 403)
    assert client.post(f"/memory/stores/{index_id}/extraction/run", headers=org.admin).status_code == 202
    token = org.subject_token(org.key, "anna")
    assert_error(client.get(f"/memory/stores/{index_id}/extraction", headers=bearer(token)), 403)
    assert_error(client.get(f"/memory/stores/{new_store(org, 'other')}/extraction", headers=org.full), 404,
                 "switch_not_found")
