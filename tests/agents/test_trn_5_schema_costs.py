"""THR-11/TRN-5: no working-state schema makes a state check take seconds. Each state write is checked on the event
loop, so a schema an administrator saved once could stall every request each time a state was written:
- definitions that each refer to the next ones twice apply 2^levels schemas to one value (16 levels: 2.5 s for `{}`);
- `uniqueItems` compared every pair of objects (5,000 `{}` in a 16 KiB state: about 12 million comparisons);
- `enum` compared each item with every allowed value and every failure quoted all of them (3,000 values: 1.7 s);
- the meta-schema check itself takes about 30 µs per node (1 MiB: 32 s), and every key of an object was matched
  against every pattern (70,000 patterns: minutes).
Schemas are now bounded where they are saved (size, patterns, schemas applied per value), and `uniqueItems`, `enum`
and `const` are checked by hashing, with the same answers as jsonschema's."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from backend.domains.agents.state_validator import validator_for
from backend.domains.threads.state import validate_against_schema
from backend.errors import ValidationFailed
from tests.agents.conftest import BASIC, agent_thread_state
from tests.helpers import Org, assert_error


def _fan_out(fan: int, levels: int) -> dict[str, Any]:
    """Definition i refers `fan` times to definition i + 1: fan^levels paths from the top to the last one."""
    definitions: dict[str, Any] = {f"d{i}": {"allOf": [{"$ref": f"#/$defs/d{i + 1}"}] * fan} for i in range(levels)}
    definitions[f"d{levels}"] = {"type": "object"}
    return {"type": "object", "$defs": definitions, "allOf": [{"$ref": "#/$defs/d0"}]}


@pytest.mark.parametrize(("schema", "param", "words"), [
    # each reference and each schema it reaches counts: 1 + fan × (1 + the next definition's count)
    (_fan_out(2, 10), "working_state_schema.$defs.d2", "applies 1,021 schemas"),
    (_fan_out(4, 8), "working_state_schema.$defs.d3", "applies 2,729 schemas"),
    ({"type": "object", "properties": {f"p{i}": {"type": "string", "pattern": f"^x{i}$"} for i in range(129)}},
     "working_state_schema.properties.p128.pattern", "at most 128 regular expressions"),
    ({"type": "object", "properties": {"a": {"enum": [f"value {i:05d}" for i in range(3000)]}}},
     "working_state_schema", "at most 32768 are kept"),
])
def test_trn_5_a_schema_whose_checks_would_cost_too_much_is_refused_where_it_is_saved(
        org: Org, client: Any, schema: dict[str, Any], param: str, words: str) -> None:
    body = assert_error(client.post("/agents", headers=org.admin, json={**BASIC, "working_state_schema": schema}),
                        422, "invalid_schema", param)
    assert words in body["message"], body


def test_trn_5_a_schema_within_the_bounds_is_kept_and_checks_states(org: Org, client: Any, scripted: Any) -> None:
    schema = _fan_out(2, 7)  # 511 schemas applied to the state
    schema["properties"] = {"tags": {"type": "array", "uniqueItems": True},
                            "step": {"enum": [f"step {i}" for i in range(1000)]}}
    anna, state_url = agent_thread_state(client, org, "bounded", schema)
    good = {"tags": [{"a": 1}, {"a": 1.5}, [1], [True]], "step": "step 999"}
    assert client.put(state_url, headers=anna, json={"state": good}).status_code == 200
    twice = assert_error(client.put(state_url, headers=anna, json={"state": {"tags": [{"a": 1}, {"a": 1.0}]}}), 422,
                         "working_state_invalid", "state.tags")
    assert "non-unique" in twice["message"]
    wrong = assert_error(client.put(state_url, headers=anna, json={"state": {"step": "step 1000"}}), 422,
                         "working_state_invalid", "state.step")
    assert "'step 1000' is not one of ['step 0', 'step 1'," in wrong["message"] and len(wrong["message"]) < 400


JSON = st.recursive(st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from([0.0, 1.0, 2.5]) |
                    st.sampled_from(["", "a", "1"]),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from("ab"), inner,
                                                                                max_size=2),
                    max_leaves=6)


@settings(max_examples=500, deadline=None)
@given(st.lists(JSON, max_size=6), JSON)
def test_trn_5_unique_items_enum_and_const_answer_as_jsonschema_does(items: list[Any], value: Any) -> None:
    for schema, instance in (({"uniqueItems": True}, items), ({"enum": items or [None]}, value),
                             ({"const": items}, value), ({"const": value}, items[0] if items else None)):
        expected = jsonschema.Draft202012Validator(schema).is_valid(instance)
        assert validator_for(schema)(schema).is_valid(instance) == expected, (schema, instance)


def test_trn_5_unique_items_and_enum_never_compare_items_pair_by_pair(monkeypatch: pytest.MonkeyPatch) -> None:
    """jsonschema's own keywords call `equal` for each pair of objects (uniqueItems) and for each allowed value
    (enum): about 2 million and 600,000 calls here. Counted, not timed."""
    from jsonschema import _keywords, _utils

    calls = 0
    original = _utils.equal

    def counted(one: Any, two: Any) -> bool:
        nonlocal calls
        calls += 1
        return bool(original(one, two))

    monkeypatch.setattr(_utils, "equal", counted)
    monkeypatch.setattr(_keywords, "equal", counted)
    schema = {"type": "object", "properties": {"objects": {"type": "array", "uniqueItems": True},
                                               "steps": {"items": {"enum": [f"s{i}" for i in range(300)]}}}}
    state = {"objects": [{"n": i} for i in range(2000)], "steps": [f"s{i % 300}" for i in range(2000)]}
    validate_against_schema(state, schema)
    with pytest.raises(ValidationFailed):
        validate_against_schema({**state, "objects": [*state["objects"], {"n": 5}]}, schema)
    assert calls <= 10, calls

