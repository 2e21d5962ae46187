"""THR-11, THR-12: working state with versions, merge patch, size limit, schema, and copying it to a new thread."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from backend.domains.threads.state import check_state, merge_patch, validate_against_schema
from backend.errors import ValidationFailed
from tests.helpers import assert_error, bearer
from tests.threads.util import new_thread


def test_thr_11_get_put_patch_with_versions(client, org):
    headers = bearer(org.key, "anna")
    thread = new_thread(client, headers)
    url = f"/threads/{thread['id']}/state"
    empty = client.get(url, headers=headers)
    assert empty.json() == {"state": {}, "version": 0, "size": 2, "updated_at": None}
    put = client.put(url, json={"state": {"goal": "Verhuis het kantoor", "steps": ["a"]}}, headers=headers)
    assert put.status_code == 200, put.text
    assert put.json()["version"] == 1 and put.headers["etag"] == '"1"'
    assert put.json()["size"] == len(json.dumps({"goal": "Verhuis het kantoor", "steps": ["a"]},
                                                separators=(",", ":")).encode())
    patched = client.patch(url, content=json.dumps({"step": "Huur een busje", "steps": None}),
                           headers=headers | {"Content-Type": "application/merge-patch+json", "If-Match": '"1"'})
    assert patched.status_code == 200, patched.text
    assert patched.json()["state"] == {"goal": "Verhuis het kantoor", "step": "Huur een busje"}
    assert patched.json()["version"] == 2
    as_json = client.patch(url, json={"nested": {"a": 1}}, headers=headers | {"If-Match": "2"})
    assert as_json.json()["version"] == 3
    assert client.get(url, headers=headers).json()["state"]["nested"] == {"a": 1}

    stale = assert_error(client.put(url, json={"state": {}}, headers=headers | {"If-Match": "2"}), 409)
    assert stale["reason_code"] == "stale_version"
    stale = assert_error(client.patch(url, json={"x": 1}, headers=headers | {"If-Match": "1"}), 409)
    assert stale["reason_code"] == "stale_version"
    assert_error(client.patch(url, content="{}", headers=headers | {"Content-Type": "text/plain"}), 415)
    assert_error(client.put(url, json={"state": {}}, headers=headers | {"If-Match": "v3"}), 400, param="If-Match")
    assert_error(client.put(url, json={"state": [1]}, headers=headers), 422)
    assert client.get(url, headers=headers).json()["version"] == 3


def test_thr_11_size_limit_is_16_kib_never_truncated(client, org):
    headers = bearer(org.key)
    thread = new_thread(client, headers)
    url = f"/threads/{thread['id']}/state"
    overhead = len('{"k":""}')
    exact = {"k": "x" * (16 * 1024 - overhead)}
    ok = client.put(url, json={"state": exact}, headers=headers)
    assert ok.status_code == 200, ok.text
    assert ok.json()["size"] == 16 * 1024
    over = {"k": "x" * (16 * 1024 - overhead + 1)}
    assert_error(client.put(url, json={"state": over}, headers=headers), 422, code="working_state_too_large",
                 param="state")
    # Multi-byte characters count in UTF-8 bytes; a patch that grows past the limit is refused whole.
    assert_error(client.patch(url, json={"é": "é"}, headers=headers), 422, code="working_state_too_large")
    assert client.get(url, headers=headers).json()["state"] == exact


def test_thr_11_limit_is_configurable(client, org, settings):
    client.app.state.settings = settings.with_overrides(working_state_max_bytes=20)
    headers = bearer(org.key)
    thread = new_thread(client, headers)
    url = f"/threads/{thread['id']}/state"
    assert client.put(url, json={"state": {"k": "x" * 12}}, headers=headers).status_code == 200
    assert_error(client.put(url, json={"state": {"k": "x" * 13}}, headers=headers), 422)


def test_thr_11_twenty_concurrent_writers_one_winner_per_version_no_lost_update(live_api, org):
    headers = bearer(org.key)
    with httpx.Client(base_url=live_api, timeout=30) as http:
        thread = http.post("/threads", json={}, headers=headers).json()
        url = f"/threads/{thread['id']}/state"
        assert http.put(url, json={"state": {"n": 0}}, headers=headers).json()["version"] == 1

    def conditional(n: int) -> int:
        with httpx.Client(base_url=live_api, timeout=30) as http:
            return http.patch(url, json={f"w{n}": n}, headers=headers | {"If-Match": "1"}).status_code

    with ThreadPoolExecutor(20) as pool:
        codes = list(pool.map(conditional, range(20)))
    assert sorted(codes) == [200] + [409] * 19

    def unconditional(n: int) -> int:
        with httpx.Client(base_url=live_api, timeout=30) as http:
            return http.patch(url, json={f"u{n}": n}, headers=headers).status_code

    with ThreadPoolExecutor(20) as pool:
        assert list(pool.map(unconditional, range(20))) == [200] * 20
    with httpx.Client(base_url=live_api, timeout=30) as http:
        final = http.get(url, headers=headers).json()
    assert final["version"] == 22
    assert {f"u{n}" for n in range(20)} <= set(final["state"])  # every unconditional write kept
    assert len([k for k in final["state"] if k.startswith("w")]) == 1


def test_thr_11_merge_patch_follows_rfc_7386():
    assert merge_patch({"a": "b"}, {"a": "c"}) == {"a": "c"}
    assert merge_patch({"a": "b"}, {"b": "c"}) == {"a": "b", "b": "c"}
    assert merge_patch({"a": "b"}, {"a": None}) == {}
    assert merge_patch({"a": [{"b": "c"}]}, {"a": [1]}) == {"a": [1]}
    assert merge_patch({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}) == {"a": {"b": "d"}}
    assert merge_patch(["a"], {"a": "c"}) == {"a": "c"}
    assert merge_patch({}, {"a": {"bb": {"ccc": None}}}) == {"a": {"bb": {}}}


def test_thr_11_working_state_schema_names_the_failing_path():
    schema = {"type": "object", "properties": {"goal": {"type": "string"},
                                               "steps": {"type": "array", "items": {"type": "string"}}},
              "required": ["goal"], "additionalProperties": False}
    validate_against_schema({"goal": "x", "steps": ["a"]}, schema)
    with pytest.raises(ValidationFailed) as bad_item:
        check_state({"goal": "x", "steps": ["a", 2]}, 16384, schema)
    assert bad_item.value.param == "state.steps[1]" and bad_item.value.status == 422
    with pytest.raises(ValidationFailed) as missing:
        check_state({"steps": []}, 16384, schema)
    assert missing.value.param == "state" and "goal" in missing.value.message
    with pytest.raises(ValidationFailed) as extra:
        check_state({"goal": "x", "other": 1}, 16384, schema)
    assert extra.value.code == "working_state_invalid"


def test_thr_12_working_state_from_copies_her_own_thread(client, org):
    anna = bearer(org.key, "anna")
    source = new_thread(client, anna)
    client.put(f"/threads/{source['id']}/state", json={"state": {"goal": "plan"}}, headers=anna)
    copy = new_thread(client, anna, working_state_from=source["id"])
    state = client.get(f"/threads/{copy['id']}/state", headers=anna).json()
    assert state["state"] == {"goal": "plan"} and state["version"] == 1
    client.patch(f"/threads/{copy['id']}/state", json={"goal": "changed"}, headers=anna)
    assert client.get(f"/threads/{source['id']}/state", headers=anna).json()["state"] == {"goal": "plan"}

    # Naming nobody: 400 subject_required. Bob's thread, a shared thread, an unknown id: 404.
    assert_error(client.post("/threads", json={"working_state_from": source["id"]}, headers=bearer(org.key)), 400,
                 code="subject_required", param="working_state_from")
    bobs = new_thread(client, bearer(org.key, "bob"))
    shared = new_thread(client, bearer(org.key))
    for other in (bobs["id"], shared["id"], "thr_unknown"):
        assert_error(client.post("/threads", json={"working_state_from": other}, headers=anna), 404,
                     param="working_state_from")
    # A subject token names her too.
    key = org.make_key(name="app")
    token = org.subject_token(key["secret"], "anna")
    from_token = new_thread(client, bearer(token), working_state_from=source["id"])
    assert client.get(f"/threads/{from_token['id']}/state", headers=bearer(token)).json()["state"] == {"goal": "plan"}
