"""Threads at the edges: working-state versions and schema references that are no plain numbers (THR-11, PLT-14:
refused, never a 500), a participant removed from a group thread meeting a missing thread's 404 on every route
(THR-9), a refused thread creation keeping no thread and no copied state (THR-12), and malformed input on the
thread routes answered with a PLT-14 body."""

from __future__ import annotations

import base64
import json
import random
import string

import pytest

from tests.helpers import assert_error, bearer
from tests.threads.util import append, group_policy, msg, new_thread


def _cursor(value: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")


@pytest.fixture
def group_on(client, settings):
    client.app.state.settings = settings.with_overrides(threads_group_reach_by_rule=True)


# ---------------------------------------------------------------- numbers that are no plain numbers

@pytest.mark.parametrize("version", ["9" * 5000, "0" * 4400 + "1"])
def test_plt_14_thr_11_an_if_match_of_thousands_of_digits_is_refused_not_a_500(client, org, version):
    anna = bearer(org.key, "anna")
    thread = new_thread(client, anna)
    url = f"/threads/{thread['id']}/state"
    for response in (client.put(url, json={"state": {"a": 1}}, headers={**anna, "If-Match": version}),
                     client.patch(url, json={"a": 1}, headers={**anna, "If-Match": version})):
        assert response.status_code != 500, (
            "PLT-14/THR-11: an If-Match of more than 4300 digits makes int() raise in "
            f"threads.state.parse_if_match, answered 500: {response.text}")
        assert response.status_code in (400, 409), response.text
        assert_error(response, response.status_code, param="If-Match")
    assert client.get(url, headers=anna).json()["version"] == 0  # nothing written


@pytest.mark.parametrize("ref", ["#/allOf/\u00b2", "#/allOf/%C2%B2", "#/allOf/" + "9" * 5000])
def test_plt_14_thr_11_a_schema_ref_index_that_is_no_decimal_number_is_422_not_a_500(client, org, ref):
    assert client.post("/admin/models", headers=org.admin,
                       json={"id": "chat-small", "provider": "replay", "model": "demo"}).status_code == 201
    schema = {"type": "object", "allOf": [{"type": "object"}], "properties": {"a": {"$ref": ref}}}
    agent = {"name": "planner", "model": "chat-small", "instructions": "Plan."}
    created = client.post("/agents", headers=org.admin, json={**agent, "working_state_schema": schema})
    assert created.status_code != 500, (
        "PLT-14/THR-11: a working_state_schema `$ref` whose array index is a digit str.isdigit() accepts but int() "
        "refuses (superscript two) or has more than 4300 digits crashes agents.rules._resolves with a 500: "
        f"{created.text}")
    assert_error(created, 422, "invalid_schema", "working_state_schema.properties.a.$ref")
    plain = client.post("/agents", headers=org.admin, json=agent)
    assert plain.status_code == 201, plain.text
    patched = client.patch(f"/agents/{plain.json()['id']}", headers=org.admin, json={"working_state_schema": schema})
    assert_error(patched, 422, "invalid_schema", "working_state_schema.properties.a.$ref")


# ---------------------------------------------------------------- reach and partial writes

def test_thr_9_a_removed_participant_meets_a_missing_thread_s_404_on_every_route(client, org, group_on, db):
    """THR-9/PLT-9: once Bob is out of `participants`, every thread route answers him exactly as for an id that
    does not exist (token and key naming him), and search by words or by his own notes finds nothing there."""
    key = org.make_key(name="group", policy=group_policy())
    anna, bob = (bearer(org.subject_token(key["secret"], who)) for who in ("anna", "bob"))
    bob_key = bearer(key["secret"], "bob")
    thread = new_thread(client, anna, labels={"participants": ["anna", "bob"]},
                        items=[msg("user", "geheime verhuizing")])
    tid, iid = thread["id"], thread["items"][0]["id"]
    bobs = append(client, bob, tid, msg("user", "busje huren"))
    assert client.put(f"/threads/{tid}/items/{iid}/metadata", json={"metadata": {"score": "x"}},
                      headers=bob).status_code == 200
    client.put(f"/threads/{tid}/state", json={"state": {"a": 1}}, headers=anna)
    db.execute("INSERT INTO thread_summaries (org_id, id, thread_id, from_position, to_position, level, model, text)"
               " VALUES (%s, 'sum_000000000000000000000000001', %s, 1, 2, 1, 'm', 'samenvatting')", (org.org_id, tid))
    assert client.patch(f"/threads/{tid}", json={"labels": {"participants": ["anna"]}}, headers=anna).status_code == 200
    missing = "thr_01zzzzzzzzzzzzzzzzzzzzzzzz"

    def routes(t: str) -> list[tuple[str, str, object]]:
        return [("GET", f"/threads/{t}", None), ("PATCH", f"/threads/{t}", {"metadata": {}}),
                ("DELETE", f"/threads/{t}", None), ("GET", f"/threads/{t}/items", None),
                ("POST", f"/threads/{t}/items", {"items": [msg("user", "x")]}),
                ("GET", f"/threads/{t}/items/{iid}", None), ("GET", f"/threads/{t}/items/{bobs[0]['id']}", None),
                ("GET", f"/threads/{t}/items/{iid}/metadata", None),
                ("PUT", f"/threads/{t}/items/{iid}/metadata", {"metadata": {"k": 1}}),
                ("DELETE", f"/threads/{t}/items/{iid}/metadata", None),
                ("GET", f"/threads/{t}/state", None), ("PUT", f"/threads/{t}/state", {"state": {}}),
                ("PATCH", f"/threads/{t}/state", {"a": 2}), ("GET", f"/threads/{t}/summaries", None),
                ("GET", f"/thread-items?q=verhuizing&thread_id={t}", None),
                ("POST", "/threads", {"working_state_from": t})]

    for who in (bob, bob_key):
        for (method, url, body), (_, murl, mbody) in zip(routes(tid), routes(missing), strict=True):
            got = client.request(method, url, json=body, headers=who)
            ref = client.request(method, murl, json=mbody, headers=who)
            assert got.status_code == ref.status_code == 404, (method, url, got.text, ref.text)
            assert got.json() == json.loads(ref.text.replace(missing, tid)), (method, url, got.text, ref.text)
        for query in ("q=verhuizing", "q=busje", "metadata=score:x&metadata_by=bob", "metadata_by=bob"):
            found = client.get(f"/thread-items?{query}", headers=who)
            assert found.status_code == 200 and found.json()["data"] == [], (query, found.text)
        assert client.get("/threads", headers=who).json()["data"] == []


def test_thr_12_a_refused_thread_creation_keeps_no_thread_and_no_copied_state(client, org, db):
    """One request, one transaction: opening a thread with a state copy and items, refused at its last item
    (413, past the full-text limit), leaves neither the thread row nor the copied working state."""
    rnd = random.Random(1)
    text = " ".join("".join(rnd.choice(string.ascii_lowercase) for _ in range(12)) for _ in range(70000))
    anna = bearer(org.key, "anna")
    source = new_thread(client, anna)
    client.put(f"/threads/{source['id']}/state", json={"state": {"a": 1}}, headers=anna)
    count = "SELECT (SELECT count(*) FROM threads), (SELECT count(*) FROM thread_states)"
    before = db.execute(count).fetchone()
    refused = client.post("/threads", headers=anna, json={"working_state_from": source["id"], "metadata": {"k": "v"},
                                                          "items": [msg("user", "ok"), msg("user", text)]})
    assert_error(refused, 413, "payload_too_large")
    assert db.execute(count).fetchone() == before


def test_plt_14_malformed_input_on_thread_routes_is_a_plt_14_body(client, org):
    """Wrong types, bad shapes, forged cursors and odd offsets on the thread routes: never a 500, always the PLT-14
    body (status, code, message, param) for a refusal."""
    anna = bearer(org.key, "anna")
    thread = new_thread(client, anna, items=[msg("user", "hallo wereld"),
                                             {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"}])
    tid, iid = thread["id"], thread["items"][0]["id"]
    raw = {**anna, "Content-Type": "application/json"}
    bodies = [
        ("POST", "/threads", "[]"), ("POST", "/threads", "null"), ("POST", "/threads", '{"labels": {"a": [1]}}'),
        ("POST", "/threads", '{"metadata": {"a": 1}}'), ("POST", "/threads", '{"working_state_from": 5}'),
        ("POST", "/threads", '{"items": [{"type": "message", "role": "user", "content": 5}]}'),
        ("POST", "/threads", '{"items": [{"type": "message", "role": "user", "content": "x", "subject": "bob"}]}'),
        ("POST", "/threads", '{"items": [null]}'), ("POST", "/threads", '{"metadata": {"k": 1e400}}'),
        ("POST", f"/threads/{tid}/items", '{"items": [{"type": "function_call_output", "call_id": "c", '
                                          '"artifacts": [{"x": 1e400}]}]}'),
        ("PATCH", f"/threads/{tid}", '{"labels": {"subject": "bob"}}'), ("PATCH", f"/threads/{tid}", "[]"),
        ("PUT", f"/threads/{tid}/items/{iid}/metadata", '{"metadata": {"k": 1e400}}'),
        ("PUT", f"/threads/{tid}/items/{iid}/metadata", '{"metadata": {"k": {"n": 1}}}'),
        ("PUT", f"/threads/{tid}/state", '{"state": []}'), ("PATCH", f"/threads/{tid}/state", "[1, 2]"),
        ("PATCH", f"/threads/{tid}/state", '{"k": 1e400}'), ("PATCH", f"/threads/{tid}/state", "{bad"),
    ]
    search = "/thread-items?q=hallo&cursor="
    gets = [
        "/threads?limit=0", "/threads?limit=abc", "/threads?order=up", "/threads?cursor=%%%",
        "/threads?cursor=" + _cursor(5), "/threads?cursor=" + _cursor("\u0000"), "/threads?metadata=:v",
        f"/threads/{tid}/items?cursor=" + _cursor(2 ** 70), f"/threads/{tid}/items?cursor=" + _cursor(True),
        f"/threads/{tid}/summaries?cursor=" + _cursor(["x"]), "/thread-items?q=a&role=robot",
        "/thread-items?q=a&from=1700000000", "/thread-items?q=a&from=2024-01-01T00:00:00+20:00",
        search + _cursor({"u": 5}), search + _cursor({"u": "2024-01-01T00:00:00+20:00"}),
        search + _cursor({"u": "2030-01-01T00:00:00+00:00", "i": ["a"]}),
        search + _cursor({"u": "0001-01-01T00:00:00+14:00"}), search + _cursor({"u": "9999-12-31T23:59:59-14:00"}),
        search + _cursor({"u": "2030-01-01T00:00:00+00:00", "l": 5}),
        search + _cursor({"u": "2024-01-01T00:00:00Z", "i": "\u0000"}),
        f"/threads/{tid}/items/{thread['items'][1]['id']}/metadata",
    ]
    answers = [(f"{m} {u} {b[:60]}", client.request(m, u, content=b, headers=raw)) for m, u, b in bodies]
    answers += [(f"GET {u}", client.get(u, headers=anna)) for u in gets]
    for name, response in answers:
        assert response.status_code < 500, (name, response.text)
        if response.status_code >= 400:
            assert_error(response, response.status_code)
