"""TRN-5: agents over HTTP: versions, who may manage and read them, the audit trail, soft deletion."""

from __future__ import annotations

import pytest

from tests.agents.conftest import BASIC, make_agent
from tests.helpers import assert_error, bearer


def test_trn_5_create_makes_version_one_and_get_list_versions_show_it(org, client):
    agent = make_agent(client, org.admin)
    assert agent["id"].startswith("agt_") and agent["version"] == 1
    assert {k: agent[k] for k in BASIC} == BASIC
    assert (agent["memory_injection"], agent["working_state_schema"], agent["compaction"]) == (None, None, None)
    assert agent["updated_at"] == agent["created_at"]
    assert client.get(f"/agents/{agent['id']}", headers=org.admin).json() == agent
    assert client.get("/agents", headers=org.full).json() == {"data": [agent], "next_cursor": None}
    versions = client.get(f"/agents/{agent['id']}/versions", headers=org.admin).json()
    assert versions["next_cursor"] is None and len(versions["data"]) == 1
    first = versions["data"][0]
    assert first["agent_id"] == agent["id"] and first["version"] == 1 and first["instructions"] == "Answer briefly."
    assert first["created_by"]["type"] == "admin"


def test_trn_5_every_change_is_a_new_immutable_version(org, client, db):
    agent = make_agent(client, org.admin)
    path = f"/agents/{agent['id']}"
    second = client.patch(path, headers=org.admin, json={"instructions": "Answer in Dutch."}).json()
    assert second["version"] == 2 and second["instructions"] == "Answer in Dutch." and second["model"] == "chat-small"
    third = client.patch(path, headers=org.full, json={"model": "chat-large", "compaction": {"mode": "window"}}).json()
    assert third["version"] == 3 and third["instructions"] == "Answer in Dutch."
    assert third["compaction"] == {"mode": "window", "keep_recent_turns": 5, "segment_turns": 3}
    # Nothing changed, nothing new: an empty PATCH and one repeating the current values keep version 3.
    assert client.patch(path, headers=org.admin, json={}).json() == third
    assert client.patch(path, headers=org.admin, json={"model": "chat-large"}).json()["version"] == 3
    # null removes an optional field, as a new version.
    fourth = client.patch(path, headers=org.admin, json={"compaction": None}).json()
    assert fourth["version"] == 4 and fourth["compaction"] is None
    assert client.get(path, headers=org.admin).json() == fourth
    versions = client.get(f"{path}/versions", headers=org.admin).json()["data"]
    assert [v["version"] for v in versions] == [4, 3, 2, 1]
    assert [v["instructions"] for v in versions] == ["Answer in Dutch."] * 3 + ["Answer briefly."]
    assert versions[1]["created_by"] == {"type": "key", "id": org.key_id}
    one = client.get(f"{path}/versions/1", headers=org.full).json()
    assert one == versions[3] and one["model"] == "chat-small"
    assert_error(client.get(f"{path}/versions/9", headers=org.admin), 404, "agent_version_not_found", "version")
    assert db.execute("SELECT count(*) FROM agent_versions WHERE agent_id = %s", (agent["id"],)).fetchone()[0] == 4


def test_trn_5_lists_are_paged(org, client):
    agents = [make_agent(client, org.admin, name=f"agent {i}") for i in range(3)]
    first = client.get("/agents?limit=2", headers=org.admin).json()
    assert [a["id"] for a in first["data"]] == [a["id"] for a in agents[:2]] and first["next_cursor"]
    rest = client.get(f"/agents?limit=2&cursor={first['next_cursor']}", headers=org.admin).json()
    assert [a["id"] for a in rest["data"]] == [agents[2]["id"]] and rest["next_cursor"] is None
    path = f"/agents/{agents[0]['id']}"
    for n in range(4):
        client.patch(path, headers=org.admin, json={"instructions": f"Take {n}."})
    seen, cursor = [], None
    while True:
        page = client.get(f"{path}/versions", headers=org.admin,
                          params={"limit": 2, **({"cursor": cursor} if cursor else {})}).json()
        seen.append([v["version"] for v in page["data"]])
        cursor = page["next_cursor"]
        if not cursor:
            break
    assert seen == [[5, 4], [3, 2], [1]]
    assert_error(client.get(f"{path}/versions?cursor=bm9wZQ", headers=org.admin), 400, "invalid_cursor", "cursor")


def test_trn_5_administrators_and_management_keys_manage_any_key_reads(org, client):
    manager = org.make_key(["knowledge", "management"])
    made = make_agent(client, bearer(manager["secret"]), name="made by a key")
    plain = org.make_key(["threads"])
    reader = bearer(plain["secret"])
    assert client.get(f"/agents/{made['id']}", headers=reader).json() == made
    assert [a["id"] for a in client.get("/agents", headers=reader).json()["data"]] == [made["id"]]
    assert client.get(f"/agents/{made['id']}/versions", headers=reader).status_code == 200
    assert_error(client.post("/agents", headers=reader, json=BASIC), 403, "capability_missing")
    assert_error(client.patch(f"/agents/{made['id']}", headers=reader, json={"name": "x"}), 403,
                 "capability_missing")
    assert_error(client.delete(f"/agents/{made['id']}", headers=reader), 403, "capability_missing")
    token = bearer(org.subject_token(org.key, "anna"))
    assert_error(client.get("/agents", headers=token), 403, "subject_token_forbidden")
    assert_error(client.get(f"/agents/{made['id']}", headers=token), 403, "subject_token_forbidden")
    assert_error(client.post("/agents", headers=token, json=BASIC), 403, "subject_token_forbidden")
    assert client.get(f"/agents/{made['id']}", headers=org.admin).json()["version"] == 1


def test_trn_5_another_organisation_never_reaches_an_agent(org, other_org, client):
    agent = make_agent(client, org.admin)
    path = f"/agents/{agent['id']}"
    for headers in (other_org.admin, other_org.full):
        assert client.get("/agents", headers=headers).json()["data"] == []
        assert_error(client.get(path, headers=headers), 404, "agent_not_found", "agent_id")
        assert_error(client.get(f"{path}/versions", headers=headers), 404, "agent_not_found")
        assert_error(client.patch(path, headers=headers, json={"name": "mine"}), 404, "agent_not_found")
        assert_error(client.delete(path, headers=headers), 404, "agent_not_found")
    assert client.get(path, headers=org.admin).json() == agent


def test_trn_5_every_change_is_audited(org, client):
    manager = org.make_key(["management"])
    agent = make_agent(client, org.admin)
    client.patch(f"/agents/{agent['id']}", headers=bearer(manager["secret"]),
                 json={"instructions": "Be kind.", "model": "chat-large"})
    client.patch(f"/agents/{agent['id']}", headers=org.admin, json={})  # no change, no event
    assert client.delete(f"/agents/{agent['id']}", headers=org.admin).status_code == 204
    events = client.get(f"/audit?object_id={agent['id']}", headers=org.admin).json()["data"]
    by_action = {e["action"]: e for e in events}
    assert [e["action"] for e in reversed(events)] == ["agent.created", "agent.changed", "agent.deleted"]
    assert by_action["agent.created"]["detail"] == {"name": "helpdesk", "version": 1, "model": "chat-small"}
    assert by_action["agent.created"]["actor"]["type"] == "admin"
    changed = by_action["agent.changed"]
    assert changed["actor"] == {"type": "key", "id": manager["id"]} and changed["object_type"] == "agent"
    assert changed["detail"] == {"name": "helpdesk", "version": 2, "changed": ["model", "instructions"]}
    assert by_action["agent.deleted"]["detail"] == {"name": "helpdesk", "version": 2}


def test_trn_5_deleting_is_soft_and_frees_the_name(org, client, db):
    agent = make_agent(client, org.admin)
    path = f"/agents/{agent['id']}"
    client.patch(path, headers=org.admin, json={"instructions": "Later."})
    assert client.delete(path, headers=org.admin).status_code == 204
    assert_error(client.get(path, headers=org.admin), 404, "agent_not_found", "agent_id")
    assert_error(client.get(f"{path}/versions", headers=org.admin), 404, "agent_not_found")
    assert_error(client.get(f"{path}/versions/1", headers=org.admin), 404, "agent_not_found")
    assert_error(client.patch(path, headers=org.admin, json={"name": "again"}), 404, "agent_not_found")
    assert_error(client.delete(path, headers=org.admin), 404, "agent_not_found")
    assert client.get("/agents", headers=org.admin).json()["data"] == []
    # The rows stay for what named the agent (responses, the audit trail); its name is free again.
    assert db.execute("SELECT count(*) FROM agent_versions WHERE agent_id = %s", (agent["id"],)).fetchone()[0] == 2
    again = make_agent(client, org.admin)
    assert again["id"] != agent["id"] and again["version"] == 1


def test_trn_5_names_are_unique_among_live_agents(org, client, db):
    first = make_agent(client, org.admin)
    other = make_agent(client, org.admin, name="sales")
    assert_error(client.post("/agents", headers=org.admin, json=BASIC), 409, "name_taken", "name")
    assert_error(client.patch(f"/agents/{other['id']}", headers=org.admin, json={"name": first["name"]}), 409,
                 "name_taken", "name")
    assert client.get(f"/agents/{other['id']}", headers=org.admin).json() == other
    assert db.execute("SELECT count(*) FROM agent_versions WHERE agent_id = %s", (other["id"],)).fetchone()[0] == 1
    renamed = client.patch(f"/agents/{other['id']}", headers=org.admin, json={"name": "sales and support"}).json()
    assert renamed["name"] == "sales and support" and renamed["version"] == 2


@pytest.mark.parametrize(("body", "param"), [
    ({**BASIC, "name": ""}, "name"),
    ({**BASIC, "model": ""}, "model"),
    ({**BASIC, "model": "m" * 201}, "model"),
    ({**BASIC, "model": "not-offered"}, "model"),
    ({"name": "x", "model": "m"}, "instructions"),
    ({**BASIC, "instructions": 5}, "instructions"),
    ({**BASIC, "temperature": 0.2}, "temperature"),
    ({**BASIC, "working_state_schema": []}, "working_state_schema"),
])
def test_trn_5_bad_fields_are_422_naming_them(org, client, body, param):
    code = "model_not_offered" if body.get("model") == "not-offered" else "validation_failed"
    assert_error(client.post("/agents", headers=org.admin, json=body), 422, code, param)


def test_trn_5_an_agent_names_a_model_the_organisation_is_offered(org, client):
    agent = make_agent(client, org.admin, model="chat-large")
    assert agent["model"] == "chat-large"
    assert client.delete("/admin/models/chat-large", headers=org.admin).status_code == 204
    changed = client.patch(f"/agents/{agent['id']}", headers=org.admin, json={"model": "chat-large"})
    assert_error(changed, 422, "model_not_offered", "model")


def test_trn_5_deleting_an_agent_named_by_an_extraction_switch_is_409_naming_the_store(org, client):
    """An agent named in a switch's filters cannot be deleted; the 409 names the store whose switch names it, and
    the agent stays (GET answers its current version)."""
    agent = make_agent(client, org.admin)
    index_id = client.post("/indexes", headers=org.full, json={"name": "support"}).json()["id"]
    switch = client.put(f"/memory/stores/{index_id}/extraction", headers=org.admin,
                        json={"enabled": True, "model": agent["model"], "filters": {"agent_ids": [agent["id"]]}})
    assert switch.status_code == 200, switch.text
    refused = assert_error(client.delete(f"/agents/{agent['id']}", headers=org.admin), 409)
    assert index_id in refused["message"]
    assert client.get(f"/agents/{agent['id']}", headers=org.admin).json() == agent


def test_trn_5_concurrent_changes_each_make_their_own_version(org, live_api):
    import threading

    import httpx

    agent = httpx.post(f"{live_api}/agents", headers=org.admin, json=BASIC).json()
    path = f"{live_api}/agents/{agent['id']}"
    answers: list[int] = []

    def writer(name: str) -> None:
        with httpx.Client(headers=org.admin, timeout=30) as http:
            answers.extend(http.patch(path, json={"instructions": f"{name} {n}"}).status_code for n in range(8))

    threads = [threading.Thread(target=writer, args=(name,)) for name in ("a", "b", "c")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert answers == [200] * 24
    versions = httpx.get(f"{path}/versions?limit=200", headers=org.admin).json()["data"]
    assert [v["version"] for v in versions] == list(range(25, 0, -1))
    assert httpx.get(path, headers=org.admin).json()["instructions"] == versions[0]["instructions"]


def test_trn_5_a_nul_character_is_422_not_500(org, client):
    assert_error(client.post("/agents", headers=org.admin, json={**BASIC, "instructions": "a\u0000b"}), 422,
                 "validation_failed")
    agent = make_agent(client, org.admin)
    assert_error(client.patch(f"/agents/{agent['id']}", headers=org.admin,
                              json={"working_state_schema": {"title": "x\u0000"}}), 422, "validation_failed")
    assert client.get(f"/agents/{agent['id']}", headers=org.admin).json() == agent
