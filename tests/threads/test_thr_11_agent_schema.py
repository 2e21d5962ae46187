"""THR-11: `PUT` and `PATCH /threads/{id}/state` (and the `working_state__patch` tool) check the resulting state
against the `working_state_schema` of the thread's agent: the agent the thread's latest turn that named an agent
named, at its current version. A deleted agent, or a thread no agent answered, has no schema."""

from __future__ import annotations

import json
from typing import Any

from tests.helpers import Org, assert_error, bearer
from tests.threads.util import new_thread
from tests.turns.conftest import anna, turn

SCHEMA = {"type": "object", "required": ["goal"],
          "properties": {"goal": {"type": "string"},
                         "plan": {"type": "object",
                                  "properties": {"todo": {"type": "array", "items": {"type": "string"}}}}}}


def _agent(client: Any, org: Org, name: str, schema: dict[str, Any] | None) -> str:
    body: dict[str, Any] = {"name": name, "model": "scripted", "instructions": "You plan moves."}
    if schema is not None:
        body["working_state_schema"] = schema
    created = client.post("/agents", headers=org.admin, json=body)
    assert created.status_code == 201, created.text
    return str(created.json()["id"])


def _answer(client: Any, org: Org, thread_id: str | None = None, agent_id: str | None = None) -> str:
    """A turn (the scripted model's default answer) on the thread, or on a new one, by the agent or by none."""
    where: dict[str, Any] = {"thread_id": thread_id} if thread_id else {}
    if agent_id is not None:
        where.update(agent_id=agent_id, model=None)
    answer = turn(client, anna(org), input="Plan the move.", **where)
    assert answer["status"] == "completed", answer
    return str(answer["thread_id"])


def _state(client: Any, org: Org, thread_id: str) -> dict[str, Any]:
    read = client.get(f"/threads/{thread_id}/state", headers=anna(org))
    assert read.status_code == 200, read.text
    return dict(read.json())


def _put(client: Any, org: Org, thread_id: str, state: Any) -> Any:
    return client.put(f"/threads/{thread_id}/state", json={"state": state}, headers=anna(org))


def _patch(client: Any, org: Org, thread_id: str, patch: Any, **headers: str) -> Any:
    return client.patch(f"/threads/{thread_id}/state", content=json.dumps(patch),
                        headers=anna(org) | {"Content-Type": "application/merge-patch+json", **headers})


def _refused(response: Any, param: str) -> None:
    body = assert_error(response, 422, code="working_state_invalid", param=param)
    assert "working_state_schema" in body["message"]


def test_thr_11_put_and_patch_are_checked_against_the_thread_agents_schema(client: Any, org: Org,
                                                                          scripted: Any) -> None:
    thread_id = _answer(client, org, agent_id=_agent(client, org, "planner", SCHEMA))
    # Refused before any write: nothing is written, not even the empty row the write locks.
    _refused(_put(client, org, thread_id, {"goal": 1}), "state.goal")
    _refused(_patch(client, org, thread_id, {"goal": "Move", "plan": {"todo": [1]}}), "state.plan.todo[0]")
    assert _state(client, org, thread_id) == {"state": {}, "version": 0, "size": 2, "updated_at": None}

    written = _put(client, org, thread_id, {"goal": "Move", "plan": {"todo": ["van"]}})
    assert written.status_code == 200, written.text
    before = written.json()
    assert before["version"] == 1
    _refused(_put(client, org, thread_id, {"goal": "Move", "plan": {"todo": ["van", "boxes", 3]}}),
             "state.plan.todo[2]")
    # PATCH checks the state the merge patch makes: each patch is fine alone, the result is not.
    _refused(_patch(client, org, thread_id, {"goal": None}, **{"If-Match": '"1"'}), "state")
    _refused(_patch(client, org, thread_id, {"plan": {"todo": ["van", {"n": 2}]}}), "state.plan.todo[1]")
    assert _state(client, org, thread_id) == before

    patched = _patch(client, org, thread_id, {"plan": {"todo": ["van", "boxes"]}, "note": "extra keys are fine"},
                     **{"If-Match": '"1"'})
    assert patched.status_code == 200, patched.text
    assert patched.json()["state"] == {"goal": "Move", "plan": {"todo": ["van", "boxes"]},
                                       "note": "extra keys are fine"}
    assert patched.json()["version"] == 2


def test_thr_11_only_a_thread_an_agent_answered_is_checked(client: Any, org: Org, scripted: Any) -> None:
    agent_id = _agent(client, org, "planner", SCHEMA)
    plain = new_thread(client, anna(org))["id"]
    modelled = _answer(client, org)  # a turn that named no agent
    for thread_id in (plain, modelled):
        accepted = _put(client, org, thread_id, {"goal": 1})
        assert accepted.status_code == 200, accepted.text
    answered = _answer(client, org, agent_id=agent_id)
    _refused(_put(client, org, answered, {"goal": 1}), "state.goal")
    # A turn without an agent after the agent's leaves the agent the thread's.
    _answer(client, org, thread_id=answered)
    _refused(_patch(client, org, answered, {"goal": 1}), "state.goal")
    # Once an agent answers a thread that had none, its schema applies there.
    _answer(client, org, thread_id=modelled, agent_id=agent_id)
    _refused(_patch(client, org, modelled, {"plan": {"todo": [2]}}), "state.goal")
    assert _state(client, org, modelled)["state"] == {"goal": 1}


def test_thr_11_the_latest_agent_counts_and_a_deleted_one_checks_nothing(client: Any, org: Org,
                                                                        scripted: Any) -> None:
    strict = _agent(client, org, "planner", SCHEMA)
    lax = _agent(client, org, "chatter", {"type": "object", "properties": {"goal": {"type": "string"}}})
    thread_id = _answer(client, org, agent_id=strict)
    _refused(_put(client, org, thread_id, {}), "state")
    _answer(client, org, thread_id=thread_id, agent_id=lax)  # the thread's agent is now one that needs no goal
    assert _put(client, org, thread_id, {}).status_code == 200
    _refused(_put(client, org, thread_id, {"goal": 1}), "state.goal")
    _answer(client, org, thread_id=thread_id, agent_id=strict)
    _refused(_put(client, org, thread_id, {"plan": {}}), "state")
    assert client.delete(f"/agents/{strict}", headers=org.admin).status_code == 204
    # A deleted agent has no schema; the agent before it (`lax`, which refuses this) does not take its place.
    kept = _put(client, org, thread_id, {"goal": 1})
    assert kept.status_code == 200, kept.text
    assert _state(client, org, thread_id)["state"] == {"goal": 1}


def test_thr_11_a_changed_agent_schema_applies_to_its_threads_at_once(client: Any, org: Org, scripted: Any) -> None:
    agent_id = _agent(client, org, "planner", SCHEMA)
    thread_id = _answer(client, org, agent_id=agent_id)
    assert _put(client, org, thread_id, {"goal": "Move"}).status_code == 200
    counted = {"type": "object", "properties": {"goal": {"type": "integer"}}}
    changed = client.patch(f"/agents/{agent_id}", headers=org.admin, json={"working_state_schema": counted})
    assert changed.status_code == 200 and changed.json()["version"] == 2, changed.text
    _refused(_put(client, org, thread_id, {"goal": "Move"}), "state.goal")
    _refused(_patch(client, org, thread_id, {"goal": "Move house"}), "state.goal")
    accepted = _put(client, org, thread_id, {"goal": 3})  # the first version would refuse it
    assert accepted.status_code == 200, accepted.text
    assert client.patch(f"/agents/{agent_id}", headers=org.admin,
                        json={"working_state_schema": None}).status_code == 200
    assert _patch(client, org, thread_id, {"goal": [3]}).status_code == 200
    assert _state(client, org, thread_id)["state"] == {"goal": [3]}


def test_thr_11_the_working_state_patch_tool_is_checked_like_the_route(client: Any, org: Org,
                                                                      scripted: Any) -> None:
    thread_id = _answer(client, org, agent_id=_agent(client, org, "planner", SCHEMA))
    assert _put(client, org, thread_id, {"goal": "Move"}).status_code == 200
    headers = bearer(org.key, "anna") | {"Accept": "application/json, text/event-stream",
                                         "Content-Type": "application/json"}

    def call(patch: dict[str, Any]) -> dict[str, Any]:
        request = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                   "params": {"name": "working_state__patch", "arguments": {"thread_id": thread_id, "patch": patch}}}
        response = client.post("/mcp", content=json.dumps(request), headers=headers)
        assert response.status_code == 200, response.text
        return dict(response.json()["result"])

    refused = call({"plan": {"todo": ["van", 2]}})
    assert refused["isError"], refused
    error = json.loads(refused["content"][0]["text"])["error"]
    assert (error["status"], error["code"], error["param"]) == (422, "working_state_invalid",
                                                                "arguments.patch.plan.todo[1]")
    assert _state(client, org, thread_id)["version"] == 1
    accepted = call({"plan": {"todo": ["van"]}})
    assert not accepted.get("isError"), accepted
    assert json.loads(accepted["content"][0]["text"])["version"] == 2
