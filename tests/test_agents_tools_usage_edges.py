"""Agents, tools, usage, activity and erasure at the edges of their input and reach (TRN-5, THR-11, MEM-19, MEM-20..22,
PLT-14, PLT-18)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.helpers import Org, assert_error, bearer

DRAFT3 = "http://json-schema.org/draft-03/schema#"


def _index(org: Org, name: str = "probe") -> str:
    response = org.client.post("/indexes", json={"name": name}, headers=org.admin)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def _writer(org: Org) -> str:
    from backend.access.policy import writer_policy

    return str(org.make_key(policy=writer_policy(), memory={"retrieval_tool": True, "write_tool": True})["secret"])


# ---------------------------------------------------------------- 1: organisation zones PostgreSQL does not know

ZONES = ["America/Coyhaique", "posix/Europe/Amsterdam", "localtime"]


@pytest.mark.parametrize("zone", ZONES)
def test_plt_14_usage_and_activity_answer_for_every_zone_the_organisation_may_hold(org: Org, client: Any,
                                                                                  zone: str) -> None:
    """PLT-1/PLT-14: an organisation's `timezone` is accepted by Python's zoneinfo (system tzdata), while GET /usage
    and GET /activity/* hand it to PostgreSQL's `timezone()`, whose own tz database may lack it. Either the zone is
    refused where it is set (422 on `timezone`) or every per-day route answers; never a 500."""
    idx = _index(org)
    assert client.post("/memory", headers=org.full, json={"index_id": idx, "type": "fact", "text": "t"}).status_code \
        == 201
    assert client.post("/threads", headers=org.full, json={"items": [
        {"type": "message", "role": "user", "content": "Hello"}]}).status_code == 201
    changed = client.patch(f"/tenants/{org.org_id}", json={"timezone": zone}, headers=org.admin)
    if changed.status_code == 422:
        return
    assert changed.status_code == 200, changed.text
    answers = {path: client.get(path, headers=org.admin).status_code
               for path in ("/usage", "/activity/records", "/activity/messages", "/activity/audit")}
    assert set(answers.values()) == {200}, (
        f"PLT-14: the organisation's zone {zone!r} was accepted by PATCH /tenants (Python's zoneinfo knows it), "
        f"then the per-day routes answered {answers} (PostgreSQL: time zone not recognized)")


# ---------------------------------------------------------------- 2: draft-03 schemas and the saved-schema bounds

def _offer(org: Org) -> None:
    response = org.client.post("/admin/models", headers=org.admin,
                               json={"id": "chat-small", "provider": "replay", "model": "demo"})
    assert response.status_code in (201, 409), response.text


def test_trn_5_a_draft_3_extends_loop_is_refused_where_the_schema_is_saved(org: Org, client: Any,
                                                                          scripted: Any) -> None:
    """THR-11/TRN-5 (decisions): a schema whose references and same-value applicators loop back is 422
    `invalid_schema` where it is saved. Draft 3's `extends` applies its schemas to the same value, like `allOf`,
    but the loop check does not know it: `{"extends": {"$ref": "#"}}` is saved, and then every state of the agent's
    threads, even `{}`, is refused as `working_state_too_deep`."""
    from tests.agents.conftest import agent_thread_state

    schema = {"$schema": DRAFT3, "type": "object", "extends": {"$ref": "#"}}
    created = client.post("/agents", headers=org.admin, json={"name": "loop", "model": "scripted", "instructions": "x",
                                                              "working_state_schema": schema})
    if created.status_code == 201:
        client.delete(f"/agents/{created.json()['id']}", headers=org.admin)
        anna, state = agent_thread_state(client, org, "loop again", schema)
        put = client.put(state, headers=anna, json={"state": {}})
        pytest.fail(f"TRN-5/THR-11: a draft-03 schema looping through `extends` was saved (201); a state write of "
                    f"{{}} on its thread then answered {put.status_code} {put.text[:200]}")
    assert_error(created, 422, "invalid_schema")


def _wide(keyword: str, levels: int) -> dict[str, Any]:
    """A draft-03 schema whose definitions each apply the next one twice to the same value through `keyword`."""
    last = {"type": "string"} if keyword == "type" else {"type": "object"}  # `type` stops at its first match
    definitions: dict[str, Any] = {f"d{i}": {keyword: [{"$ref": f"#/definitions/d{i + 1}"}] * 2}
                                   for i in range(levels)}
    definitions[f"d{levels}"] = last
    return {"$schema": DRAFT3, "definitions": definitions, "extends": {"$ref": "#/definitions/d0"}}


@pytest.mark.parametrize("keyword", ["extends", "type"])
def test_trn_5_draft_3_applicators_cannot_get_past_the_applied_schemas_bound(org: Org, client: Any,
                                                                             keyword: str) -> None:
    """TRN-5 (decisions, MAX_APPLIED): a schema applying more than 1,000 schemas to one value is 422
    `invalid_schema` where it is saved. Draft 3's `extends` and `type` (holding schemas) apply schemas to the same
    value like `allOf`/`anyOf`, but escape the count: definitions each naming the next one twice apply 2^n schemas;
    such a schema is saved, and a state check against it holds the event loop for as long as it likes (measured
    with `threads.state.validate_against_schema`: 16 levels, 1.5 KB, 1.6 s through `extends` and 6 s through
    `type`, four times longer per two more levels; 24 levels, under 2 KB, is minutes to hours per state write)."""
    _offer(org)
    created = client.post("/agents", headers=org.admin, json={
        "name": f"wide {keyword}", "model": "chat-small", "instructions": "x",
        "working_state_schema": _wide(keyword, 24)})
    assert created.status_code == 422, (
        f"TRN-5: a draft-03 schema applying 2^24 schemas to one value through `{keyword}` was saved "
        f"({created.status_code}); checking any state against it never ends in practice")
    assert created.json()["code"] == "invalid_schema", created.text


# ---------------------------------------------------------------- 4: a request for one person and the usage report

def test_plt_7_usage_for_a_named_person_shows_no_one_elses_turns(org: Org, client: Any, scripted: Any) -> None:
    """PLT-7/PLT-18 and decisions (PLT-7: the organisation's management routes either refuse a key naming a person
    with 403 `subject_named` — extraction, proposals, previewer, erasure — or narrow to what she may read —
    activity, thread stats, export). GET /usage does neither: a management key asking for Anna gets Bob's turns
    counted in the tokens and calls of the report."""
    bob = client.post("/responses", headers=bearer(org.key, "bob"), json={"model": "scripted", "input": "Hi"})
    assert bob.status_code == 201, bob.text
    assert client.get("/usage", headers=org.admin).json()["totals"]["calls"] == 1
    for_anna = client.get("/usage", headers=bearer(org.key, "anna"))
    if for_anna.status_code == 403:
        assert for_anna.json()["code"] == "subject_named", for_anna.text
        return
    assert for_anna.status_code == 200, for_anna.text
    assert for_anna.json()["totals"]["calls"] == 0, (
        "PLT-7: GET /usage naming Anna (X-Core-Subject) counts Bob's turn: "
        f"{for_anna.json()['totals']}; expected 403 subject_named or her own usage only")


# ---------------------------------------------------------------- 5: a sweep of odd inputs (PLT-14)

def _cursor(value: Any) -> str:
    import base64
    import json

    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")


def test_plt_14_an_infinite_version_in_a_changes_cursor_is_400_not_500(org: Org, client: Any) -> None:
    """PLT-14/PLT-14a: a cursor that is not one the API handed out is 400 `invalid_cursor`. JSON's `Infinity` (and
    `1e400`) decode to a float infinity in a `GET /activity/changes` cursor; `int()` of it raises OverflowError,
    which `activity.service._change_cursor` does not catch: a 500."""
    for raw in ('["2026-01-01T00:00:00Z", "mem_a", Infinity]', '["2026-01-01T00:00:00Z", "mem_a", 1e400]',
                '["2026-01-01T00:00:00Z", "mem_a", -Infinity]'):
        import base64

        cursor = base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")
        answer = client.get("/activity/changes", params={"cursor": cursor}, headers=org.admin)
        assert answer.status_code == 400, (f"PLT-14: GET /activity/changes with the cursor {raw} answered "
                                           f"{answer.status_code}: {answer.text[:200]}")
        assert_error(answer, 400, "invalid_cursor", "cursor")


def test_plt_14_odd_inputs_on_agents_tools_usage_activity_and_erasure_are_4xx_with_the_error_body(
        org: Org, other_org: Org, client: Any) -> None:
    """Kept (passes): odd names, sizes, types, cursors and ids on the routes of this area answer a PLT-14 body
    (or a 2xx where the input is valid after all), never a 500."""
    _offer(org)
    idx = _index(org)
    other_idx = _index(other_org)
    writer = bearer(_writer(org), "anna")
    agent = client.post("/agents", headers=org.admin, json={"name": "a", "model": "chat-small", "instructions": "i"})
    assert agent.status_code == 201, agent.text
    agt = agent.json()["id"]
    long = "x" * 20_000
    requests: list[tuple[str, str, dict[str, Any]]] = [
        # agents
        ("POST", "/agents", {"json": {"name": "n" * 201, "model": "chat-small", "instructions": "i"}}),
        ("POST", "/agents", {"json": {"name": "big", "model": "chat-small", "instructions": "i" * 100_001}}),
        ("POST", "/agents", {"json": {"name": "\U0001F600" * 200, "model": "chat-small", "instructions": "i"}}),
        ("POST", "/agents", {"json": {"name": "t", "model": "chat-small", "instructions": "i", "tools": []}}),
        ("POST", "/agents", {"json": {"name": "c", "model": "chat-small", "instructions": "i",
                                      "compaction": {"keep_recent_turns": 2**63}}}),
        ("POST", "/agents", {"json": {"name": "c2", "model": "chat-small", "instructions": "i",
                                      "compaction": {"mode": None}}}),
        ("POST", "/agents", {"json": {"name": "m", "model": "chat-small", "instructions": "i",
                                      "memory_injection": {"index_id": other_idx}}}),
        ("POST", "/agents", {"json": {"name": "m2", "model": "chat-small", "instructions": "i",
                                      "memory_injection": {"index_id": "idx_" + "z" * 5000}}}),
        ("POST", "/agents", {"json": {"name": "m3", "model": "chat-small", "instructions": "i",
                                      "memory_injection": {"index_id": idx, "metadata": {"a": [1]}}}}),
        ("POST", "/agents", {"json": {"name": "s", "model": "chat-small", "instructions": "i",
                                      "working_state_schema": {"$schema": 5}}}),
        ("POST", "/agents", {"json": {"name": "s2", "model": "chat-small", "instructions": "i",
                                      "working_state_schema": {"$schema": "http://example.com/x"}}}),
        ("POST", "/agents", {"json": {"name": "s3", "model": "chat-small", "instructions": "i",
                                      "working_state_schema": {"$ref": "#/" + "/".join(["a"] * 3000)}}}),
        ("POST", "/agents", {"json": {"name": "s4", "model": "chat-small", "instructions": "i",
                                      "working_state_schema": {"$ref": "#/%ZZ"}}}),
        ("POST", "/agents", {"json": {"name": "s5", "model": "chat-small", "instructions": "i",
                                      "working_state_schema": {"type": ["object", "object"]}}}),
        ("POST", "/agents", {"json": {"name": "s6", "model": "chat-small", "instructions": "i",
                                      "working_state_schema": {"$schema": "http://json-schema.org/draft-03/schema#",
                                                               "type": [{"type": "object"}]}}}),
        ("POST", "/agents", {"json": {"name": "s7", "model": "chat-small", "instructions": "i",
                                      "working_state_schema": {"$schema": "http://json-schema.org/draft-04/schema#",
                                                               "id": "#foo", "$ref": "#foo"}}}),
        ("POST", "/agents", {"json": {"name": "s8", "model": "chat-small", "instructions": "i",
                                      "working_state_schema": {"$dynamicAnchor": 5, "$dynamicRef": "#x"}}}),
        ("POST", "/agents", {"content": b"[]", "headers": {"content-type": "application/json"}}),
        ("POST", "/agents", {"content": b"{", "headers": {"content-type": "application/json"}}),
        ("GET", f"/agents/{long}", {}),
        ("GET", "/agents/%F0%9F%98%80", {}),
        ("GET", "/agents/%00", {}),
        ("GET", "/agents", {"params": {"cursor": _cursor(5)}}),
        ("GET", "/agents", {"params": {"cursor": _cursor(["\u0000"])}}),
        ("GET", "/agents", {"params": {"cursor": "%%%"}}),
        ("GET", "/agents", {"params": {"limit": "0"}}),
        ("GET", "/agents", {"params": {"limit": "100000000000000000000"}}),
        ("GET", f"/agents/{agt}/versions", {"params": {"cursor": _cursor("5")}}),
        ("GET", f"/agents/{agt}/versions", {"params": {"cursor": _cursor(1.5)}}),
        ("GET", f"/agents/{agt}/versions/99999999999999999999999", {}),
        ("GET", f"/agents/{agt}/versions/-1", {}),
        ("PATCH", f"/agents/{agt}", {"json": {"name": None}}),
        ("PATCH", f"/agents/{agt}", {"json": {"instructions": None}}),
        ("PATCH", f"/agents/{agt}", {"json": {"memory_injection": {"enabled": True}}}),
        ("PATCH", f"/agents/{agt}", {"json": []}),
        ("DELETE", f"/agents/{long}", {}),
        # tools
        ("POST", f"/tools/memory__{other_idx}__search/call", {"json": {"arguments": {"query": "x"}}}),
        ("POST", "/tools/memory____search/call", {"json": {"arguments": {"query": "x"}}}),
        ("POST", f"/tools/memory__{idx}__delete/call", {"json": {"arguments": {}}}),
        ("POST", f"/tools/{long}/call", {"json": {"arguments": {}}}),
        ("POST", "/tools/memory__%F0%9F%98%80__search/call", {"json": {"arguments": {"query": "x"}}}),
        ("POST", "/tools/builtin__update_working_state/call", {"json": {"arguments": {"patch": {}}}}),
        ("POST", "/tools/threads__search/call", {"json": {"arguments": {"q": "x"}}}),
        ("POST", f"/tools/memory__{idx}__search/call", {"json": {"arguments": []}}),
        ("POST", f"/tools/memory__{idx}__search/call", {"json": {"arguments": None}}),
        ("POST", f"/tools/memory__{idx}__search/call", {"json": {"arguments": {"query": 5}}}),
        ("POST", f"/tools/memory__{idx}__search/call", {"json": {"arguments": {"query": "x" * 1_000_001}}}),
        ("POST", f"/tools/memory__{idx}__search/call", {"json": {"arguments": {"query": "x", "limit": 1e308}}}),
        ("POST", f"/tools/memory__{idx}__search/call", {"json": {"arguments": {"query": "x", "limit": 2**70}}}),
        ("POST", f"/tools/memory__{idx}__search/call", {"json": {"arguments": {"query": "x", "limit": True}}}),
        ("POST", f"/tools/memory__{idx}__search/call", {"json": {"arguments": {"query": "x", "types": "fact"}}}),
        ("POST", f"/tools/memory__{idx}__search/call", {"json": {"arguments": {"query": "x", "after": 5}}}),
        ("POST", f"/tools/memory__{idx}__search/call", {"json": {"arguments": {"query": "x", "after": [1]}}}),
        ("POST", f"/tools/memory__{idx}__search/call", {"json": {"arguments": {
            "query": "x", "after": "0001-01-01T00:00:00+14:00"}}}),
        ("POST", f"/tools/memory__{idx}__search/call", {"json": {"arguments": {"query": "x"}, "timezone": ""}}),
        ("POST", f"/tools/memory__{idx}__search/call", {"json": {"arguments": {"query": "x"},
                                                                 "timezone": "../../etc/passwd"}}),
        ("POST", f"/tools/memory__{idx}__search/call", {"json": {"arguments": {"query": "x"}, "timezone": 5}}),
        ("POST", f"/tools/memory__{idx}__write/call", {"json": {"arguments": {"type": 5, "text": "x"}}}),
        ("POST", f"/tools/memory__{idx}__write/call", {"json": {"arguments": {"type": "fact", "text": "x",
                                                                              "confidence": "high"}}}),
        ("POST", f"/tools/memory__{idx}__write/call", {"json": {"arguments": {"type": "fact", "text": "x",
                                                                              "metadata": "m"}}}),
        ("POST", f"/tools/memory__{idx}__write/call", {"json": {"arguments": {"type": "fact", "text": "x",
                                                                              "replaces": "mem_" + "0" * 26}}}),
        ("POST", f"/tools/memory__{idx}__write/call", {"json": {"arguments": {"type": "commitment", "text": "x",
                                                                              "promised_to": 5}}}),
        ("POST", f"/tools/memory__{idx}__write/call", {"json": {"arguments": {"type": "fact", "text": "x" * 8001}}}),
        ("POST", f"/tools/memory__{idx}__write/call", {"json": {"arguments": {"type": "fact", "text": "a\u0000"}}}),
        ("GET", "/tools", {"params": {"source": "knowledge"}}),
        ("GET", "/tools", {"params": {"timezone": "Mars/Olympus"}}),
        ("GET", "/tools", {"params": {"timezone": "x" * 5000}}),
        ("GET", "/tools", {"params": {"cursor": "abc"}}),
        # usage
        ("GET", "/usage", {"params": {"from": "0001-01-01"}}),
        ("GET", "/usage", {"params": {"from": "9999-12-30", "to": "9999-12-30"}}),
        ("GET", "/usage", {"params": {"to": "9999-12-31"}}),
        ("GET", "/usage", {"params": {"from": "2026-02-30"}}),
        ("GET", "/usage", {"params": {"from": "2026-01-01T00:00:00Z"}}),
        ("GET", "/usage", {"params": {"from": "2026-01-02", "to": "2026-01-01"}}),
        ("GET", "/usage", {"params": {"from": "2000-01-01", "to": "2026-01-01"}}),
        ("GET", "/usage", {"params": {"group_by": "subject"}}),
        ("GET", "/usage", {"params": {"cursor": "x"}}),
        ("GET", "/usage", {"params": {"key_id": long}}),
        ("GET", "/usage", {"params": {"key_id": "\U0001F600"}}),
        ("GET", "/usage", {"params": [("from", "2026-01-01"), ("from", "2026-01-02")]}),
        # activity
        ("GET", "/activity/records", {"params": {"days": "0"}}),
        ("GET", "/activity/records", {"params": {"days": "367"}}),
        ("GET", "/activity/messages", {"params": {"days": "1e3"}}),
        ("GET", "/activity/audit", {"params": {"days": "99999999999999999999999"}}),
        ("GET", "/activity/records", {"params": {"days": "-1"}}),
        ("GET", "/activity/changes", {"params": {"actor_type": "robot"}}),
        ("GET", "/activity/changes", {"params": {"index_id": "\U0001F600" * 1000, "actor_id": long}}),
        ("GET", "/activity/changes", {"params": {"cursor": _cursor(["0001-01-01T00:00:00+14:00", "mem_a", 1])}}),
        ("GET", "/activity/changes", {"params": {"cursor": _cursor(["9999-12-31T23:59:59-14:00", "mem_a", 1])}}),
        ("GET", "/activity/changes", {"params": {"cursor": _cursor(["2026-01-01", "mem_a", 1])}}),
        ("GET", "/activity/changes", {"params": {"cursor": _cursor(["2026-01-01T00:00:00Z", "\u0000", 1])}}),
        ("GET", "/activity/changes", {"params": {"cursor": _cursor(["2026-01-01T00:00:00Z", {"a": 1}, 1])}}),
        ("GET", "/activity/changes", {"params": {"cursor": _cursor(["2026-01-01T00:00:00Z", "m", 2**31])}}),
        ("GET", "/activity/changes", {"params": {"cursor": _cursor(["2026-01-01T00:00:00Z", "m", True])}}),
        ("GET", "/activity/changes", {"params": {"cursor": _cursor(["2026-01-01T00:00:00Z", "m", 1.5])}}),
        ("GET", "/activity/changes", {"params": {"cursor": _cursor(["2026-01-01T00:00:00Z", "m", "1"])}}),
        ("GET", "/activity/changes", {"params": {"cursor": _cursor(["2026-01-01T00:00:00Z", "m", 1, 2])}}),
        ("GET", "/activity/changes", {"params": {"cursor": _cursor([])}}),
        ("GET", "/activity/changes", {"params": {"cursor": _cursor(["2026-01-01T00:00:00Z", "m", float("nan")])}}),
        ("GET", "/activity/changes", {"params": {"cursor": _cursor(["2026-01-01T00:00:00Z", "m", 1e300])}}),
        ("GET", "/activity/changes", {"params": {"cursor": _cursor(["+002026-01-01T00:00:00Z", "m", 1])}}),
        # erasure
        ("DELETE", "/subjects/" + "a" * 257, {}),
        ("DELETE", "/subjects/%00", {}),
        ("DELETE", "/subjects/%E2%80%8B", {}),
        ("DELETE", "/subjects/a%2Fb", {}),
        ("DELETE", "/subjects/%0A", {}),
    ]
    problems = []
    for method, path, kwargs in requests:
        headers = writer if path.startswith("/tools/memory__") and "write" in path else org.admin
        if path.startswith("/tools") and method == "POST" and "search" in path:
            headers = writer
        answer = client.request(method, path, headers={**headers, **kwargs.pop("headers", {})}, **kwargs)
        status = answer.status_code
        if status >= 500:
            problems.append(f"{method} {path[:80]} {str(kwargs)[:160]} -> {status} {answer.text[:200]}")
        elif status >= 400:
            body = answer.json()
            if set(body) - {"status", "code", "message", "param", "reason_code", "error_id"} or \
                    not {"status", "code", "message", "param"} <= set(body) or body["status"] != status:
                problems.append(f"{method} {path[:80]} {str(kwargs)[:160]} -> body {str(body)[:200]}")
        else:
            problems.append(f"OK {method} {path[:80]} {str(kwargs)[:160]} -> {status} {answer.text[:120]}")
    assert not [p for p in problems if not p.startswith("OK")], "\n".join(problems)


# ---------------------------------------------------------------- 6: base URIs inside a working-state schema

def _agent_or_refusal(client: Any, org: Org, name: str, schema: dict[str, Any]) -> Any:
    return client.post("/agents", headers=org.admin, json={"name": name, "model": "scripted", "instructions": "Plan.",
                                                           "working_state_schema": schema})


def _state_write_on_agent_thread(client: Any, org: Org, agent_id: str, state: dict[str, Any]) -> Any:
    anna = bearer(org.key, subject="anna")
    answered = client.post("/responses", headers=anna, json={"agent_id": agent_id, "input": "Plan."})
    assert answered.status_code == 201, answered.text
    return client.put(f"/threads/{answered.json()['thread_id']}/state", headers=anna, json={"state": state})


@pytest.mark.parametrize("schema", [
    {"type": "object", "properties": {"a": {"$id": "http://example.com/x", "$ref": "#/$defs/b"}},
     "$defs": {"b": {"type": "integer"}}},
    {"type": "object", "$anchor": "top", "properties": {"a": {"$id": "http://example.com/y", "$ref": "#top"}}},
    {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
     "properties": {"a": {"$id": "http://example.com/z", "allOf": [{"$ref": "#/definitions/b"}]}},
     "definitions": {"b": {"type": "integer"}}},
], ids=["2020-12-pointer", "2020-12-anchor", "draft-07-pointer"])
def test_thr_11_a_reference_under_a_changed_base_uri_is_refused_or_checks_states(org: Org, client: Any,
                                                                                 scripted: Any,
                                                                                 schema: dict[str, Any]) -> None:
    """TRN-5 (decisions): `$ref` must point inside the schema, checked where it is saved against the schema's root.
    A subschema's `$id` changes the base a `#…` reference is resolved against, so the reference the save check
    found at the root points into the subschema when a state is checked, where nothing answers it: the state
    write is a 500 (jsonschema's unresolvable reference), where it must be a 422 at save or a checked state."""
    created = _agent_or_refusal(client, org, "base", schema)
    if created.status_code == 422:
        assert created.json()["code"] == "invalid_schema", created.text
        return
    assert created.status_code == 201, created.text
    written = _state_write_on_agent_thread(client, org, created.json()["id"], {"a": 1})
    assert written.status_code in (200, 422), (
        f"THR-11/PLT-14: a saved working_state_schema made PUT /threads/{{id}}/state answer {written.status_code}: "
        f"{written.text[:300]}")


def test_thr_11_checking_a_state_fetches_nothing(org: Org, client: Any, scripted: Any) -> None:
    """TRN-5 (decisions: "checking a state fetches nothing"): a draft-03 subschema inside `type` carrying an `id`
    moves the base of its `#…` reference to any URL; the save check reads the reference at the root, and the state
    check (jsonschema's default registry) retrieves the URL with urllib while the request waits."""
    import http.server
    import threading

    hits: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            hits.append(self.path)
            body = b'{"definitions": {"b": {}}}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/schema.json"
    try:
        schema = {"$schema": DRAFT3, "type": "object", "definitions": {"b": {}},
                  "properties": {"a": {"type": [{"id": url, "extends": {"$ref": "#/definitions/b"}}]}}}
        created = _agent_or_refusal(client, org, "remote", schema)
        if created.status_code == 422:
            return
        assert created.status_code == 201, created.text
        written = _state_write_on_agent_thread(client, org, created.json()["id"], {"a": 1})
        assert hits == [], (f"TRN-5/THR-11: checking a working state fetched {url} ({len(hits)} request(s)); the "
                            f"state write answered {written.status_code}")
    finally:
        server.shutdown()


def test_thr_11_thr_12_a_copied_state_must_fit_the_agents_schema(org: Org, client: Any, scripted: Any) -> None:
    """THR-11/THR-12: when the thread's agent has a `working_state_schema`, a state that does not conform is 422
    with the failing path. A turn on such an agent that starts its thread with `working_state_from` copies a state
    that breaks the schema without a check: the agent's new thread holds a state its own writes could never make."""
    created = _agent_or_refusal(client, org, "planner", {"type": "object", "properties": {"plan": {"type": "string"}},
                                                         "additionalProperties": False})
    assert created.status_code == 201, created.text
    anna = bearer(org.key, subject="anna")
    source = client.post("/threads", headers=anna, json={"items": [
        {"type": "message", "role": "user", "content": "Hello"}]})
    assert source.status_code == 201, source.text
    put = client.put(f"/threads/{source.json()['id']}/state", headers=anna, json={"state": {"plan": 5, "x": 1}})
    assert put.status_code == 200, put.text
    turn = client.post("/responses", headers=anna, json={"agent_id": created.json()["id"], "input": "Plan.",
                                                         "working_state_from": source.json()["id"]})
    if turn.status_code == 201:
        copied = client.get(f"/threads/{turn.json()['thread_id']}/state", headers=anna).json()["state"]
        pytest.fail(f"THR-11: the agent's new thread started with {copied}, which its working_state_schema refuses "
                    "(a PUT of it answers 422 working_state_invalid); expected a 422 on the turn")
    assert_error(turn, 422)


def test_mem_20_another_organisations_tool_answers_as_an_unknown_index_does(org: Org, other_org: Org,
                                                                            client: Any) -> None:
    """MEM-20/PLT-9 (kept: no other test calls another organisation's or an unnamed store's tool over REST): the
    tool of an index the credential does not reach — another organisation's, or one its policy does not name —
    answers exactly as a tool of an index that does not exist (the message names the id asked for)."""
    theirs = _index(other_org, "theirs")
    unnamed = _index(org, "unnamed")
    ghost = "idx_" + "0" * (len(theirs) - 4)
    named_only = org.make_key(["knowledge", "memory"], policy={"indexes": [_index(org, "named")], "rules": [
        {"id": "all", "effect": "permit", "kind": "memory_record"}]})["secret"]

    def body(index_id: str, headers: dict[str, str]) -> dict[str, Any]:
        answer = assert_error(client.post(f"/tools/memory__{index_id}__search/call", headers=headers,
                                          json={"arguments": {"query": "x"}}), 404)
        return {**answer, "message": answer["message"].replace(index_id, "IDX")}

    assert body(theirs, org.full) == body(ghost, org.full)
    assert body(unnamed, bearer(named_only)) == body(ghost, bearer(named_only))
    listed = client.get("/tools", headers=bearer(named_only, "anna")).json()["data"]
    assert unnamed not in {tool["index_id"] for tool in listed} and theirs not in {t["index_id"] for t in listed}
