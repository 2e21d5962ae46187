"""PLT-14/PLT-14a/PLT-15/MEM-10: bad input is the client's error with its PLT-14 body, never a 500 or a 503 that
invites the same request again: text past a database limit, instants outside the calendar once in UTC, crafted
integer cursors and versions, renamed query parameters, unreadable bodies, unknown and repeated parameters."""

from __future__ import annotations

import base64
import json
import random
import re
import string
from typing import Any

import pytest

from tests.helpers import Org, assert_error, bearer

MCP = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
       "MCP-Protocol-Version": "2025-06-18"}


def _index(client: Any, org: Org, name: str = "notes") -> str:
    response = client.post("/indexes", headers=org.full, json={"name": name, "embedding": None})
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def _thread(client: Any, org: Org) -> str:
    response = client.post("/threads", headers=org.full,
                           json={"items": [{"type": "message", "role": "user", "content": "hello"}]})
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def _tool(client: Any, org: Org, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """An MCP tool call's refusal: the PLT-14 body its error result carries."""
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
    response = client.post("/mcp", headers={**org.full, **MCP}, content=json.dumps(message))
    assert response.status_code == 200, response.text
    result = response.json()["result"]
    assert result["isError"] is True, result
    return dict(json.loads(result["content"][0]["text"])["error"])


# ---------------------------------------------------------------- 1: a database limit is 413, not 503

def test_plt_14_text_past_the_full_text_limit_is_413_and_keeps_nothing(org: Org, client: Any, scripted: Any,
                                                                      db: Any) -> None:
    rnd = random.Random(1)
    # ~910 KB of distinct words: under the 1 MiB body limit, over PostgreSQL's 1 MiB tsvector.
    text = " ".join("".join(rnd.choice(string.ascii_lowercase) for _ in range(12)) for _ in range(70000))
    item = {"type": "message", "role": "user", "content": text}
    empty = client.post("/threads", headers=org.full, json={}).json()["id"]
    before = db.execute("SELECT count(*) FROM thread_items").fetchone()[0]
    for response in (client.post("/threads", headers=org.full, json={"items": [item]}),
                     client.post(f"/threads/{empty}/items", headers=org.full, json={"items": [item]}),
                     client.post("/responses", headers=org.full, json={"model": "scripted", "input": text})):
        body = assert_error(response, 413, "payload_too_large")
        assert "tsvector" in body["message"] and "Retry-After" not in response.headers
    assert db.execute("SELECT count(*) FROM thread_items").fetchone()[0] == before
    assert db.execute("SELECT count(*) FROM responses").fetchone()[0] == 0


# ---------------------------------------------------------------- 2: instants outside the calendar in UTC

HI, LO = "9999-12-31T23:59:59-23:59", "0001-01-01T00:00:00+14:00"


@pytest.mark.parametrize("instant", [HI, LO])
def test_plt_15_an_instant_outside_years_1_to_9999_in_utc_is_422_naming_the_field(org: Org, client: Any, db: Any,
                                                                                 instant: str) -> None:
    idx = _index(client, org)
    record = {"index_id": idx, "type": "fact", "text": "kept"}
    kept = client.post("/memory", headers=org.full, json={**record, "key": "k1"})
    assert kept.status_code == 201, kept.text
    refused = [
        (client.post("/memory", headers=org.full, json={**record, "text": "a", "expires_at": instant}), "expires_at"),
        (client.post("/memory", headers=org.full, json={**record, "type": "commitment", "text": "c",
                                                        "commitment": {"status": "open", "due_at": instant}}),
         "commitment.due_at"),
        (client.post("/memory", headers=org.full, json={**record, "key": "k1", "expires_at": instant}), "expires_at"),
        (client.patch(f"/memory/{kept.json()['id']}", headers=org.full, json={"expires_at": instant}), "expires_at"),
        (client.post(f"/tenants/{org.org_id}/keys", headers=org.admin,
                     json={"name": "k", "capabilities": ["knowledge"], "expires_at": instant}), "expires_at"),
        (client.patch(f"/tenants/{org.org_id}/keys/{org.key_id}", headers=org.admin, json={"expires_at": instant}),
         "expires_at"),
        (client.get("/thread-items", headers=org.full, params={"q": "hello", "from": instant}), "from"),
        (client.get("/thread-items", headers=org.full, params={"q": "hello", "to": instant}), "to"),
    ]
    for size in (1, 60):  # 60 records take the COPY path
        records = [{**record, "text": f"b{size}-{i}", "expires_at": instant} for i in range(size)]
        refused.append((client.post("/memory/batch", headers=org.full, json={"records": records}),
                        "records[0].expires_at"))
    for response, param in refused:
        body = assert_error(response, 422, "validation_failed", param)
        assert "years 1–9999" in body["message"], body
    assert db.execute("SELECT count(*), count(expires_at) FROM memory_records").fetchone() == (1, 0)
    assert db.execute("SELECT expires_at FROM api_keys WHERE id = %s", (org.key_id,)).fetchone()[0] is None
    listed = client.get("/memory", headers=org.full, params={"index_id": idx})
    assert listed.status_code == 200 and [r["text"] for r in listed.json()["data"]] == ["kept"]
    error = _tool(client, org, "threads__search", {"q": "hello", "from": instant})
    assert (error["status"], error["code"]) == (422, "validation_failed") and "years 1–9999" in error["message"]
    # The search tool makes its query itself: still 422, not 500.
    assert_error(client.post(f"/tools/memory__{idx}__search/call", headers=org.full,
                             json={"arguments": {"query": "kept", "after": instant}}), 422, "validation_failed")


def test_plt_15_an_offset_near_the_calendars_ends_is_still_an_instant(org: Org, client: Any) -> None:
    idx = _index(client, org)
    far = {"index_id": idx, "type": "fact", "text": "far", "expires_at": "9999-12-31T23:59:59+23:59"}
    response = client.post("/memory", headers=org.full, json=far)
    assert response.status_code == 201, response.text
    assert response.json()["expires_at"] == "9999-12-31T00:00:59Z"


# ---------------------------------------------------------------- 3: integer cursors and versions

def _cursor(value: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")


def test_plt_14a_an_integer_cursor_the_column_cannot_hold_is_400(org: Org, client: Any, scripted: Any) -> None:
    agent = client.post("/agents", headers=org.full, json={"name": "a", "model": "scripted", "instructions": "i"})
    assert agent.status_code == 201, agent.text
    thread = _thread(client, org)
    routes = [(f"/agents/{agent.json()['id']}/versions", org.full), ("/audit", org.admin),
              (f"/threads/{thread}/items", org.full)]
    for value in (True, False, 2**63, -(2**63) - 1, 10**40):
        for path, headers in routes:
            assert_error(client.get(path, headers=headers, params={"cursor": _cursor(value)}), 400,
                         "invalid_cursor", "cursor")
    # Agent versions are an integer column, audit and item positions bigint.
    assert_error(client.get(routes[0][0], headers=org.full, params={"cursor": _cursor(2**31)}), 400,
                 "invalid_cursor", "cursor")
    for path, headers in routes[1:]:
        assert client.get(path, headers=headers, params={"cursor": _cursor(2**63 - 1)}).status_code == 200
    assert client.get(routes[0][0], headers=org.full, params={"cursor": _cursor(2**31 - 1)}).status_code == 200
    error = _tool(client, org, "threads__read", {"thread_id": thread, "cursor": _cursor(10**40)})
    assert (error["status"], error["code"]) == (400, "invalid_cursor")


def test_trn_5_a_version_past_the_integer_range_is_the_usual_404(org: Org, client: Any, scripted: Any) -> None:
    agent = client.post("/agents", headers=org.full, json={"name": "a", "model": "scripted", "instructions": "i"})
    agent_id = agent.json()["id"]
    for version in ("2147483648", "99999999999999999999999", "-2147483649"):
        body = assert_error(client.get(f"/agents/{agent_id}/versions/{version}", headers=org.full), 404,
                            "agent_version_not_found", "version")
        assert version in body["message"]
    assert client.get(f"/agents/{agent_id}/versions/1", headers=org.full).status_code == 200
    assert_error(client.get("/agents/agt_00000000000000000000000000/versions/2147483648", headers=org.full), 404,
                 "agent_not_found")


# ---------------------------------------------------------------- 4: `param` is the name the client sent

def test_plt_14_a_bad_query_value_names_the_parameter_as_sent(org: Org, client: Any) -> None:
    idx = _index(client, org)
    assert_error(client.get("/usage", headers=org.admin, params={"from": "abc"}), 422, "validation_failed", "from")
    assert_error(client.get("/thread-items", headers=org.full, params={"q": "x", "from": "2025-13-45T00:00:00+00:00"}),
                 422, "validation_failed", "from")
    assert_error(client.get(f"/memory/stores/{idx}/extraction/windows", headers=org.admin, params={"state": "bogus"}),
                 422, "validation_failed", "state")


# ---------------------------------------------------------------- 5: bodies the JSON decoder refuses

def test_plt_14_an_unreadable_body_is_400_malformed_body_saying_what_is_wrong(org: Org, client: Any, db: Any) -> None:
    idx = _index(client, org)
    headers = {**org.full, "Content-Type": "application/json"}
    start = f'{{"index_id": "{idx}", "type": "fact", '.encode()
    body = assert_error(client.post("/memory", headers=headers, content=start + b'"text": "\xff\xfe"}'), 400,
                        "malformed_body")
    assert body["param"] is None and "UTF-8" in body["message"]
    for number in (b"1e999", b"-1e999"):
        body = assert_error(client.post("/memory", headers=headers, content=start + b'"text": "n", "confidence": '
                                        + number + b"}"), 400, "malformed_body")
        assert "number too large" in body["message"]
    for method, path in (("POST", "/memory"), ("POST", "/threads"), ("POST", f"/tenants/{org.org_id}/keys")):
        body = assert_error(client.request(method, path, headers={**headers, **org.admin} if "tenants" in path
                                           else headers, content=b""), 400, "malformed_body")
        assert body["message"].startswith("A JSON body is required") and body["param"] is None
    assert db.execute("SELECT count(*) FROM memory_records").fetchone()[0] == 0


# ---------------------------------------------------------------- 6: parameters a route would ignore

def test_mem_10_an_unknown_or_repeated_query_parameter_is_422(org: Org, client: Any) -> None:
    a, b = _index(client, org, "a"), _index(client, org, "b")
    for idx, text in ((a, "in a"), (b, "in b")):
        assert client.post("/memory", headers=org.full, json={"index_id": idx, "type": "fact", "text": text}
                           ).status_code == 201
    body = assert_error(client.get("/memory", headers=org.full, params=[("index_id", a), ("index_id", b)]), 422,
                        "repeated_parameter", "index_id")
    assert "one value" in body["message"]
    body = assert_error(client.get("/memory", headers=org.full, params={"indexid": a}), 422, "unknown_parameter",
                        "indexid")
    assert "`index_id`" in body["message"] and "`cursor`" in body["message"]
    assert_error(client.get("/memory", headers=org.full, params=[("limit", "1"), ("limit", "5")]), 422,
                 "repeated_parameter", "limit")
    assert_error(client.get("/audit", headers=org.admin, params=[("cursor", "x"), ("cursor", "y")]), 422,
                 "repeated_parameter", "cursor")
    assert_error(client.get("/health", params={"verbose": "1"}), 422, "unknown_parameter", "verbose")
    # A list-valued parameter takes each value sent.
    both = client.get("/memory", headers=org.full, params=[("type", "fact"), ("type", "note"), ("index_id", a)])
    assert both.status_code == 200 and [r["text"] for r in both.json()["data"]] == ["in a"]


def test_mem_10_every_documented_query_parameter_is_taken(org: Org, client: Any) -> None:
    """Each query parameter the OpenAPI document names reaches its route (a bad value may be refused, but never
    as unknown or repeated), so the strict check cannot refuse what a client was told to send. The check runs
    before the route, so any path value that matches the route will do."""
    spec = client.get("/schema/openapi.json").json()
    seen = 0
    for path, operations in spec["paths"].items():
        real = re.sub(r"\{[^}]+\}", "1", path)
        for method, operation in operations.items():
            for parameter in operation.get("parameters", []) if isinstance(operation, dict) else []:
                if parameter["in"] != "query":
                    continue
                schema = parameter.get("schema", {})
                many = "array" in [schema.get("type"), *(option.get("type") for option in schema.get("oneOf", []))]
                values = [(parameter["name"], "x")] * (2 if many else 1)
                response = client.request(method.upper(), real, headers=org.admin, params=values)
                if response.status_code >= 400:
                    assert response.json()["code"] not in ("unknown_parameter", "repeated_parameter"), \
                        (method, path, parameter["name"], response.text)
                seen += 1
    assert seen > 50


def test_plt_14_a_percent_escape_that_is_not_utf8_is_400_and_erases_nobody(org: Org, client: Any, db: Any) -> None:
    """`%FF` or `%ED%A0%80` (a surrogate's bytes) in a path or query value was decoded to U+FFFD: `DELETE
    /subjects/%FF` erased the person whose id is that character, `?label=%FF` filtered by it. Now 400
    `invalid_encoding` naming the parameter, and the person's record stays."""
    index_id = client.post("/indexes", headers=org.full, json={"name": "support"}).json()["id"]
    replaced = bearer(org.key, subject="\ufffd")
    made = client.post("/memory", headers=replaced, json={"index_id": index_id, "type": "fact", "text": "Stays."})
    assert made.status_code == 201, made.text
    for path in ("/subjects/%FF", "/subjects/%ED%A0%80"):
        assert_error(client.delete(path, headers=org.admin), 400, "invalid_encoding", "subject_id")
    assert db.execute("SELECT count(*) FROM memory_records WHERE subject = %s", ("\ufffd",)).fetchone()[0] == 1
    assert_error(client.get("/memory?label=%FF", headers=org.full), 400, "invalid_encoding", "label")
    assert_error(client.get("/memory/search?q=tea%ED%A0%80", headers=org.full), 400, "invalid_encoding", "q")
    assert_error(client.get("/threads/thr_%C3", headers=org.full), 400, "invalid_encoding", "thread_id")
    # Escaped UTF-8, U+FFFD itself included, is still taken as written.
    assert client.get("/memory/search?q=%C3%A9t%C3%A9", headers=org.full).status_code == 200
    assert client.get("/memory?label=team:a%EF%BF%BD", headers=org.full).status_code == 200


@pytest.mark.parametrize(("route", "body", "param"), [
    ("/indexes", {"name": "x", "embedding": {"provider": "hashing", "model": "h", "dimensions": "256"}},
     "embedding.dimensions"),
    ("/keys", {"name": "k", "capabilities": ["knowledge"], "expires_at": 4102444800}, "expires_at"),
    ("/keys", {"name": "k", "capabilities": ["knowledge"], "privacy": {"pseudonymize": "true"}},
     "privacy.pseudonymize"),
    ("/subject-tokens", {"subject": {"id": "anna"}, "ttl_seconds": "600"}, "ttl_seconds"),
    ("/memory", {"type": "fact", "text": "Likes tea.", "confidence": "0.9"}, "confidence"),
    ("/memory/batch", {"records": [{"type": "fact", "text": "Likes tea."},
                                   {"type": "fact", "text": "Likes tea.", "priority": "high", "confidence": "1"}]},
     "records[1].confidence"),
])
def test_plt_14_a_body_field_of_the_wrong_json_type_is_422_not_coerced(org: Org, client: Any, db: Any, route: str,
                                                                        body: dict[str, Any], param: str) -> None:
    """Litestar converts arguments with msgspec's lax rules: `"256"` was taken as 256, `"true"` as true, a number
    as an instant, against the OpenAPI document (PLT-16). Now 422 naming the field, and nothing is written."""
    path = f"/tenants/{org.org_id}/keys" if route == "/keys" else route
    headers = org.admin if route == "/keys" else org.full
    if route.startswith("/memory"):
        index_id = client.post("/indexes", headers=org.full, json={"name": "m"}).json()["id"]
        body = {**body, "index_id": index_id} if route == "/memory" else {
            "records": [{**r, "index_id": index_id} for r in body["records"]]}
    before = db.execute("SELECT (SELECT count(*) FROM indexes) + (SELECT count(*) FROM api_keys)"
                        " + (SELECT count(*) FROM memory_records)").fetchone()[0]
    assert_error(client.post(path, headers=headers, json=body), 422, "validation_failed", param)
    after = db.execute("SELECT (SELECT count(*) FROM indexes) + (SELECT count(*) FROM api_keys)"
                       " + (SELECT count(*) FROM memory_records)").fetchone()[0]
    assert after == before
