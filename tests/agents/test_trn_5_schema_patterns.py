"""THR-11/TRN-5: the regular expressions of a working-state schema cannot stall the server. jsonschema matched them
with Python's backtracking engine, so `^(a+)+$` made a state write of 30 characters take minutes while holding the
event loop. They run in RE2 now (linear time), and a pattern RE2 does not run (look-around, back-reference) is
refused where the schema is saved."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from tests.agents.conftest import BASIC, agent_thread_state
from tests.helpers import Org, assert_error

REFUSED = [
    ({"type": "object", "properties": {"code": {"type": "string", "pattern": "^(?=x)x+$"}}},
     "working_state_schema.properties.code.pattern"),
    ({"patternProperties": {"^(a)\\1$": {"type": "integer"}}}, "working_state_schema.patternProperties.^(a)\\1$"),
    ({"$defs": {"tag": {"pattern": "(?<!x)y"}}, "properties": {"tag": {"$ref": "#/$defs/tag"}}},
     "working_state_schema.$defs.tag.pattern"),
]


@pytest.mark.parametrize(("schema", "param"), REFUSED)
def test_trn_5_a_pattern_re2_does_not_run_is_refused_where_the_schema_is_saved(org: Org, client: Any,
                                                                              schema: dict[str, Any],
                                                                              param: str) -> None:
    body = assert_error(client.post("/agents", headers=org.admin, json={**BASIC, "working_state_schema": schema}),
                        422, "invalid_schema", param)
    assert "RE2" in body["message"] and "look-around" in body["message"], body


def test_trn_5_patterns_still_check_states(org: Org, client: Any, scripted: Any) -> None:
    schema = {"type": "object", "properties": {"code": {"type": "string", "pattern": "^[A-Z]{3}-\\d+$"}},
              "patternProperties": {"^x-": {"type": "integer"}}, "additionalProperties": False}
    anna, state_url = agent_thread_state(client, org, "coded", schema)
    written = client.put(state_url, headers=anna, json={"state": {"code": "ABC-12", "x-count": 3}})
    assert written.status_code == 200, written.text
    assert_error(client.put(state_url, headers=anna, json={"state": {"code": "abc-12"}}), 422,
                 "working_state_invalid", "state.code")
    assert_error(client.put(state_url, headers=anna, json={"state": {"x-count": "three"}}), 422,
                 "working_state_invalid", "state.x-count")
    assert_error(client.put(state_url, headers=anna, json={"state": {"other": 1}}), 422, "working_state_invalid")
    assert client.get(state_url, headers=anna).json()["state"] == {"code": "ABC-12", "x-count": 3}


EVIL = "^(a+)+$"  # Python's `re` takes 2^n steps to reject n a's followed by anything else
TEXT = "a" * 40 + "!"
# Every keyword through which jsonschema matches a pattern, with whether TEXT (as value or as name) passes.
CASES = [
    ({"properties": {"v": {"type": "string", "pattern": EVIL}}}, {"v": TEXT}, False),
    ({"patternProperties": {EVIL: {"type": "integer"}}}, {TEXT: "not checked: the name does not match"}, True),
    ({"patternProperties": {EVIL: {"type": "integer"}}, "additionalProperties": False}, {TEXT: 1}, False),
    ({"patternProperties": {EVIL: {"type": "integer"}}, "unevaluatedProperties": False}, {TEXT: 1}, False),
    ({"$schema": "http://json-schema.org/draft-07/schema#", "patternProperties": {EVIL: {"type": "integer"}},
      "additionalProperties": False}, {TEXT: 1}, False),
]

_CHECK = """
import json, sys
from backend.domains.threads.state import validate_against_schema
from backend.errors import ValidationFailed
outcomes = []
for schema, state in json.loads(sys.stdin.read()):
    try:
        validate_against_schema(state, schema)
        outcomes.append(True)
    except ValidationFailed:
        outcomes.append(False)
print(json.dumps(outcomes))
"""


def test_trn_5_a_backtracking_pattern_is_checked_in_linear_time_through_every_keyword() -> None:
    """In a child process, so that the backtracking engine, if it ever came back, fails this test by its timeout
    instead of spinning in the test process: each case took 2^40 steps before (far past the timeout)."""
    cases = json.dumps([[schema, state] for schema, state, _ in CASES])
    done = subprocess.run([sys.executable, "-c", _CHECK], input=cases, capture_output=True, text=True, timeout=120,
                          check=True)
    assert json.loads(done.stdout) == [passes for _, _, passes in CASES]
