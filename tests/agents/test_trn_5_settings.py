"""TRN-5 with INJ-2 and TRN-6: an agent's memory_injection, working_state_schema and compaction are checked where
they are saved; a key's memory.compaction likewise."""

from __future__ import annotations

import pytest

from backend.access.policy import default_policy
from tests.agents.conftest import BASIC, make_agent, make_index
from tests.helpers import assert_error, bearer

DEFAULT_COMPACTION = {"mode": "segments", "keep_recent_turns": 5, "segment_turns": 3}


def test_inj_2_memory_injection_is_stored_whole_with_its_defaults(org, client):
    index_id = make_index(client, org)
    agent = make_agent(client, org.admin, memory_injection={"index_id": index_id, "types": ["fact"], "limit": 5})
    assert agent["memory_injection"] == {"index_id": index_id, "enabled": True, "types": ["fact"], "metadata": {},
                                         "min_confidence": None, "limit": 5, "budget_tokens": 1500}
    same = client.patch(f"/agents/{agent['id']}", headers=org.admin,
                        json={"memory_injection": {"index_id": index_id, "limit": 5, "types": ["fact"]}})
    assert same.json() == agent  # the same block, defaults and all: no new version
    off = make_agent(client, org.admin, name="quiet", memory_injection={"index_id": index_id, "enabled": False})
    assert off["memory_injection"]["enabled"] is False
    # switching injection off needs no store; switching it on does
    bare = make_agent(client, org.admin, name="bare", memory_injection={"enabled": False})
    assert (bare["memory_injection"]["enabled"], bare["memory_injection"]["index_id"]) == (False, None)
    key = client.post(f"/tenants/{org.org_id}/keys", headers=org.admin, json={
        "name": "quiet", "capabilities": ["knowledge", "memory"], "memory": {"injection": {"enabled": False}}})
    assert key.status_code == 201 and key.json()["memory"]["injection"]["index_id"] is None, key.text
    assert_error(client.post(f"/tenants/{org.org_id}/keys", headers=org.admin, json={
        "name": "loud", "capabilities": ["knowledge", "memory"], "memory": {"injection": {"limit": 3}}}),
        422, param="memory.injection.index_id")


def test_inj_2_an_index_that_is_not_the_organisations_is_422_on_memory_injection_index_id(org, other_org, client):
    theirs = make_index(client, other_org, "theirs")
    for index_id in (theirs, "idx_01m8xc4fkbdhyv746et0hdet91"):
        body = {**BASIC, "memory_injection": {"index_id": index_id}}
        assert_error(client.post("/agents", headers=org.admin, json=body), 422, "index_not_reachable",
                     "memory_injection.index_id")
    assert client.get("/agents", headers=org.admin).json()["data"] == []


def test_inj_2_the_saving_keys_policy_must_name_the_store(org, client):
    a, b = make_index(client, org, "a"), make_index(client, org, "b")
    policy = default_policy()
    policy["indexes"] = [a]
    narrow = bearer(org.make_key(["knowledge", "memory", "management"], policy=policy)["secret"])
    refused = client.post("/agents", headers=narrow, json={**BASIC, "memory_injection": {"index_id": b}})
    assert_error(refused, 422, "index_not_reachable", "memory_injection.index_id")
    agent = make_agent(client, narrow, memory_injection={"index_id": a})
    assert_error(client.patch(f"/agents/{agent['id']}", headers=narrow, json={"memory_injection": {"index_id": b}}),
                 422, "index_not_reachable", "memory_injection.index_id")
    # An administrator reaches every store of the organisation.
    moved = client.patch(f"/agents/{agent['id']}", headers=org.admin, json={"memory_injection": {"index_id": b}})
    assert moved.json()["memory_injection"]["index_id"] == b and moved.json()["version"] == 2
    # A change to another field does not re-check the block that was already saved.
    renamed = client.patch(f"/agents/{agent['id']}", headers=narrow, json={"name": "renamed"}).json()
    assert renamed["version"] == 3 and renamed["memory_injection"]["index_id"] == b


@pytest.mark.parametrize(("block", "param"), [
    ({"index_id": "nope"}, "memory_injection.index_id"),
    ({"limit": 5}, "memory_injection.index_id"),
    ({"index_id": "idx_x", "limit": -1}, "memory_injection.limit"),
    ({"index_id": "idx_x", "min_confidence": 1.5}, "memory_injection.min_confidence"),
    ({"index_id": "idx_x", "types": ["Not A Type"]}, "memory_injection.types[0]"),
    ({"index_id": "idx_x", "merge": True}, "memory_injection.merge"),
])
def test_inj_2_a_malformed_block_is_422_at_its_field(org, client, block, param):
    assert_error(client.post("/agents", headers=org.admin, json={**BASIC, "memory_injection": block}), 422,
                 "validation_failed", param)


def test_trn_5_working_state_schema_is_kept_when_valid(org, client):
    schema = {"type": "object", "properties": {"step": {"$ref": "#/$defs/step"}, "tags": {"$ref": "#tagged"}},
              "$defs": {"step": {"type": "integer", "minimum": 0},
                        "tags": {"$anchor": "tagged", "type": "array", "items": {"type": "string"}}},
              "required": ["step"], "default": {"$ref": "https://example.com/is-data-here"}}
    agent = make_agent(client, org.admin, working_state_schema=schema)
    assert agent["working_state_schema"] == schema
    older = {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
             "properties": {"a": {"type": "string"}}}
    assert make_agent(client, org.admin, name="draft 7", working_state_schema=older)["working_state_schema"] == older


@pytest.mark.parametrize(("schema", "param"), [
    ({"type": "objekt"}, "working_state_schema.type"),
    ({"type": "object", "properties": {"a": {"type": 5}}}, "working_state_schema.properties.a.type"),
    ({"properties": {"a": {"minimum": "zero"}}}, "working_state_schema.properties.a.minimum"),
    ({"required": "step"}, "working_state_schema.required"),
    ({"$schema": "https://example.com/my-draft"}, "working_state_schema.$schema"),
    ({"$schema": 7}, "working_state_schema.$schema"),
    ({"type": "array"}, "working_state_schema.type"),
    ({"type": "object", "properties": {"a": {"$ref": "https://example.com/a.json"}}},
     "working_state_schema.properties.a.$ref"),
    ({"properties": {"a": {"$ref": "#/$defs/missing"}}}, "working_state_schema.properties.a.$ref"),
    ({"anyOf": [{"$ref": "#nowhere"}]}, "working_state_schema.anyOf[0].$ref"),
])
def test_trn_5_an_invalid_working_state_schema_is_422_naming_the_path(org, client, schema, param):
    body = assert_error(client.post("/agents", headers=org.admin, json={**BASIC, "working_state_schema": schema}),
                        422, "invalid_schema", param)
    assert "schema" in body["message"].lower()
    agent = make_agent(client, org.admin, name="patched")
    assert_error(client.patch(f"/agents/{agent['id']}", headers=org.admin, json={"working_state_schema": schema}),
                 422, "invalid_schema", param)
    assert client.get(f"/agents/{agent['id']}", headers=org.admin).json()["version"] == 1


def test_trn_6_agent_compaction_is_stored_with_its_defaults(org, client):
    agent = make_agent(client, org.admin, compaction={})
    assert agent["compaction"] == DEFAULT_COMPACTION
    tiered = make_agent(client, org.admin, name="tiered",
                        compaction={"mode": "tiered", "keep_recent_turns": 2, "segment_turns": 4})
    assert tiered["compaction"] == {"mode": "tiered", "keep_recent_turns": 2, "segment_turns": 4}


@pytest.mark.parametrize(("old", "new"), [("keep_recent", "keep_recent_turns"), ("segment_items", "segment_turns")])
def test_trn_6_old_compaction_settings_are_422_saying_what_replaced_them(org, client, old, new):
    body = assert_error(client.post("/agents", headers=org.admin, json={**BASIC, "compaction": {old: 4}}), 422,
                        "validation_failed", f"compaction.{old}")
    assert f"`{old}`" in body["message"] and f"`{new}`" in body["message"]
    created = client.post(f"/tenants/{org.org_id}/keys", headers=org.admin, json={
        "name": "k", "capabilities": ["compaction"], "memory": {"compaction": {"mode": "window", old: 4}}})
    body = assert_error(created, 422, "validation_failed", f"memory.compaction.{old}")
    assert f"`{new}`" in body["message"]
    patched = client.patch(f"/tenants/{org.org_id}/keys/{org.key_id}", headers=org.admin,
                           json={"memory": {"compaction": {old: 4}}})
    assert f"`{new}`" in assert_error(patched, 422, "validation_failed", f"memory.compaction.{old}")["message"]
    # Outside a compaction block the same name is a plain unknown field.
    plain = assert_error(client.post("/agents", headers=org.admin, json={**BASIC, old: 4}), 422, param=old)
    assert f"`{new}`" not in plain["message"]


@pytest.mark.parametrize(("compaction", "param"), [
    ({"mode": "summary"}, "compaction.mode"),
    ({"keep_recent_turns": 0}, "compaction.keep_recent_turns"),
    ({"segment_turns": 0}, "compaction.segment_turns"),
    ({"keep_recent_turns": 1001}, "compaction.keep_recent_turns"),
])
def test_trn_6_bad_compaction_values_are_422(org, client, compaction, param):
    assert_error(client.post("/agents", headers=org.admin, json={**BASIC, "compaction": compaction}), 422,
                 "validation_failed", param)
    key = client.post(f"/tenants/{org.org_id}/keys", headers=org.admin, json={
        "name": "k", "capabilities": ["compaction"], "memory": {"compaction": compaction}})
    assert_error(key, 422, "validation_failed", f"memory.{param}")


def test_trn_6_a_keys_compaction_is_shown_in_its_document(org, client):
    key = org.make_key(["threads", "compaction"], memory={"compaction": {"mode": "window"}})
    assert key["memory"]["compaction"] == {**DEFAULT_COMPACTION, "mode": "window"}
    assert client.get("/key", headers=bearer(key["secret"])).json()["memory"]["compaction"]["mode"] == "window"
    path = f"/tenants/{org.org_id}/keys/{key['id']}"
    changed = client.patch(path, headers=org.admin, json={"memory": {"compaction": {"keep_recent_turns": 8}}})
    assert changed.json()["memory"]["compaction"] == {**DEFAULT_COMPACTION, "keep_recent_turns": 8}
    assert client.get(path, headers=org.admin).json()["memory"]["compaction"]["keep_recent_turns"] == 8
    assert org.make_key(["threads"])["memory"]["compaction"] is None
