"""THR-11/TRN-5: a working-state schema whose references come back to themselves without going into a part of the
state (`{"$ref": "#"}`) is valid by its meta-schema, but checking any state against it never ends; it is refused
where it is saved, naming the reference that closes the loop. A schema that recurses into parts of the state (a
tree) stays allowed and checks states as before."""

from __future__ import annotations

from typing import Any

import pytest

from tests.agents.conftest import BASIC, agent_thread_state, make_agent
from tests.helpers import Org, assert_error, bearer

LOOPS = [
    ({"$ref": "#"}, "working_state_schema.$ref"),
    ({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}, None),
    ({"$anchor": "top", "properties": {"x": {"$ref": "#top"}}, "$ref": "#top"}, "working_state_schema.$ref"),
    ({"allOf": [{"$ref": "#"}]}, "working_state_schema.allOf[0].$ref"),
    ({"type": "object", "properties": {"a": {"$ref": "#/$defs/x"}},
      "$defs": {"x": {"not": {"$ref": "#/$defs/x"}}}}, "working_state_schema.$defs.x.not.$ref"),
]


@pytest.mark.parametrize(("schema", "param"), LOOPS)
def test_trn_5_a_schema_whose_references_loop_in_place_is_refused(org: Org, client: Any, schema: dict[str, Any],
                                                                 param: str | None) -> None:
    body = assert_error(client.post("/agents", headers=org.admin, json={**BASIC, "working_state_schema": schema}),
                        422, "invalid_schema")
    if param is None:  # a two-step loop: either of its references closes it
        assert body["param"] in ("working_state_schema.$defs.a.$ref", "working_state_schema.$defs.b.$ref"), body
    else:
        assert body["param"] == param, body
    assert "never end" in body["message"]
    agent = make_agent(client, org.admin)
    assert_error(client.patch(f"/agents/{agent['id']}", headers=org.admin, json={"working_state_schema": schema}),
                 422, "invalid_schema")
    assert client.get(f"/agents/{agent['id']}", headers=org.admin).json()["version"] == 1


TREE = {"type": "object", "properties": {"name": {"type": "string"},
                                         "children": {"type": "array", "items": {"$ref": "#"}}}}


def test_trn_5_a_schema_recursing_into_the_state_is_kept_and_checks_states(org: Org, client: Any,
                                                                          scripted: Any) -> None:
    anna, state_url = agent_thread_state(client, org, "tree", TREE)
    good = {"name": "a", "children": [{"name": "b", "children": [{"name": "c"}]}]}
    written = client.put(state_url, headers=anna, json={"state": good})
    assert written.status_code == 200, written.text
    bad = {"name": "a", "children": [{"name": "b", "children": [{"name": 3}]}]}
    assert_error(client.put(state_url, headers=anna, json={"state": bad}), 422,
                 "working_state_invalid", "state.children[0].children[0].name")


def _chain(links: int) -> dict[str, Any]:
    """A schema whose top refers to a definition that refers to the next, `links` references in all, all applied to
    the state itself; the last definition asks for an object with a `goal`."""
    definitions: dict[str, Any] = {f"d{i}": {"$ref": f"#/$defs/d{i + 1}"} for i in range(1, links)}
    definitions[f"d{links}"] = {"type": "object", "required": ["goal"]}
    return {"$defs": definitions, "$ref": "#/$defs/d1"}


def test_trn_5_a_chain_of_references_past_the_limit_is_refused_and_one_within_it_checks_states(
        org: Org, client: Any, scripted: Any) -> None:
    """Checking a state follows each reference a few interpreter frames deeper: a chain of 800 (no loop) made every
    state write a 500 (RecursionError). A chain longer than 50 is refused where it is saved, at the reference
    that starts it; one of 50 is kept and checks states."""
    body = assert_error(client.post("/agents", headers=org.admin, json={**BASIC, "working_state_schema": _chain(800)}),
                        422, "invalid_schema")
    assert body["param"].startswith("working_state_schema.$defs.d") and body["param"].endswith(".$ref"), body
    assert "more than 50" in body["message"], body
    anna, state_url = agent_thread_state(client, org, "chained", _chain(50))
    assert_error(client.put(state_url, headers=anna, json={"state": {"plan": 1}}), 422,
                 "working_state_invalid", "state")
    written = client.put(state_url, headers=anna, json={"state": {"goal": "Move"}})
    assert written.status_code == 200, written.text


def test_trn_5_a_state_too_deep_to_check_against_a_recursive_schema_is_refused_not_a_500(
        org: Org, client: Any, scripted: Any) -> None:
    created = client.post("/agents", headers=org.admin, json={"name": "tree", "model": "scripted",
                                                              "instructions": "Plan.", "working_state_schema": TREE})
    assert created.status_code == 201, created.text
    anna = bearer(org.key, subject="anna")
    answered = client.post("/responses", headers=anna, json={"agent_id": created.json()["id"], "input": "Plan."})
    thread_id = answered.json()["thread_id"]
    deep: dict[str, Any] = {"name": "leaf"}
    for level in range(300):
        deep = {"name": f"n{level}", "children": [deep]}
    body = assert_error(client.put(f"/threads/{thread_id}/state", headers=anna, json={"state": deep}), 422,
                        "working_state_too_deep", "state")
    assert "working_state_schema" in body["message"]
    assert client.get(f"/threads/{thread_id}/state", headers=anna).json()["version"] == 0
