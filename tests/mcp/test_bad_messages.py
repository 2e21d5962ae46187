"""The MCP server under bad messages (`/mcp` over streamable HTTP, `coremem mcp --stdio`): bad input must get a PLT-14
body or a JSON-RPC error naming what to fix (never a 500, a silent drop or silently changed data), and another
person's threads must answer exactly like unknown ones. Raw httpx requests, so the SDK client's own checks do not
hide what the server answers."""

from __future__ import annotations

import json
import queue
import subprocess
import threading
from typing import Any

import httpx

from backend.access.policy import writer_policy
from tests.helpers import bearer, in_transaction
from tests.mcp.conftest import COREMEM, Setup
from tests.threads.util import msg, new_thread

HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                         "clientInfo": {"name": "audit", "version": "1"}}}


def _call(name: str, arguments: Any, message_id: Any = 2) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": message_id, "method": "tools/call",
            "params": {"name": name, "arguments": arguments}}


def _raw_call(name: str, arguments_json: str) -> bytes:
    """A tools/call message with its arguments spelled as given (JSON-like text the SDK's parser accepts)."""
    return ('{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":' + json.dumps(name)
            + ',"arguments":' + arguments_json + "}}").encode()


def _tool_result(response: httpx.Response) -> tuple[bool, dict[str, Any]]:
    """(is_error, the JSON the caller reads) of a tools/call answered over HTTP."""
    assert response.status_code == 200, response.text
    result = response.json()["result"]
    return bool(result.get("isError")), json.loads(result["content"][0]["text"])


# ---------------------------------------------------------------- refusals the SDK alone gets wrong

def test_plt_14_non_finite_numbers_in_tool_arguments_are_refused_not_500_nor_stored_as_null(setup: Setup) -> None:
    """The SDK's JSON parser takes `NaN`, `Infinity` and `1e999` (REST answers 400 `malformed_body` for them); the
    tools then either fail with a 500 or store the number as JSON null."""
    api, anna = setup.api, {**HEADERS, **setup.anna()}
    thread = new_thread(api, setup.anna(), items=[msg("user", "How warm should the hive be?")])
    tid, item = thread["id"], thread["items"][0]["id"]
    problems: list[str] = []

    note = api.post("/mcp", headers=anna, content=_raw_call(
        "threads__note", f'{{"thread_id":"{tid}","item_id":"{item}","metadata":{{"n":NaN}}}}'))
    is_error, body = _tool_result(note)
    status = body.get("error", {}).get("status") if is_error else 200
    if status not in (400, 422):
        problems.append(f"threads__note with metadata {{n: NaN}} answered {status} {body} (expected 400/422 naming "
                        "arguments.metadata.n)")
    notes = api.get(f"/threads/{tid}/items/{item}/metadata", headers=setup.anna()).json()["data"]
    if notes:
        problems.append(f"a refused note was kept: {notes}")

    patch = api.post("/mcp", headers=anna, content=_raw_call(
        "working_state__patch", f'{{"thread_id":"{tid}","patch":{{"n":Infinity}}}}'))
    is_error, body = _tool_result(patch)
    if not is_error:
        problems.append(f"working_state__patch with {{n: Infinity}} was accepted and stored as {body['state']} "
                        f"(version {body['version']}); a merge patch can never store null")

    write = api.post("/mcp", headers=anna, content=_raw_call(
        setup.tool("write"), '{"type":"fact","text":"The hive is kept at 35 degrees.","metadata":{"t":1e999}}'))
    is_error, body = _tool_result(write)
    if not is_error:
        record = api.get(f"/memory/{body['memory_id']}", headers=setup.anna()).json()
        problems.append(f"the memory write tool with metadata {{t: 1e999}} created {body['memory_id']} with "
                        f"metadata {record['metadata']}")

    assert not problems, "PLT-14 (bad input is 400/422, never a 500; REST refuses these numbers): " + \
        "; ".join(problems)


def test_plt_14_transport_refusals_of_mcp_are_json_bodies(setup: Setup) -> None:
    """An oversized body and a wrong or missing Content-Type are answered by the SDK's transport middleware in
    plain text (`Request body too large`, `Invalid Content-Type header`), neither a PLT-14 body nor JSON-RPC."""
    api, anna = setup.api, {**HEADERS, **setup.anna()}
    oversized = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping",
                            "params": {"pad": "x" * (setup.settings.max_body_bytes + 1)}})
    cases = {
        "oversized body": (api.post("/mcp", content=oversized, headers=anna), 413, "payload_too_large"),
        "Content-Type text/plain": (api.post("/mcp", content=json.dumps(INITIALIZE),
                                             headers={**anna, "Content-Type": "text/plain"}), None, None),
        "no Content-Type": (api.post("/mcp", content=json.dumps(INITIALIZE),
                                     headers={k: v for k, v in anna.items() if k != "Content-Type"}), None, None),
    }
    problems = []
    for label, (response, status, code) in cases.items():
        try:
            body = response.json()
        except ValueError:
            problems.append(f"{label}: {response.status_code} {response.headers.get('content-type')} "
                            f"{response.text!r}")
            continue
        error = body.get("error", body)  # a JSON-RPC error or a PLT-14 body
        text = json.dumps(body)
        if status is not None and (response.status_code != status or body.get("code") != code):
            problems.append(f"{label}: {response.status_code} {body} (expected {status} {code})")
        elif status is None and "Content-Type" not in text:
            problems.append(f"{label}: {response.status_code} {error} does not name Content-Type")
    assert not problems, "PLT-14 (errors are JSON {status, code, message, param}; 413 payload_too_large): " + \
        "; ".join(problems)


def test_plt_14_thread_tools_name_a_header_as_the_header_not_as_an_argument(setup: Setup) -> None:
    """ThreadTool._argument prefixes every route `param` with `arguments.`, headers included: a refusal about
    X-Core-Subject or X-Core-Org tells the caller to fix an argument the tool does not even accept."""
    policy = {**writer_policy(), "settings": {"subjects_required": True}}
    nobody = bearer(setup.org.make_key(policy=policy, memory={"retrieval_tool": True})["secret"])
    rest = setup.api.get("/thread-items", params={"q": "hive"}, headers=nobody).json()
    assert rest["param"] == "X-Core-Subject", rest

    _, body = _tool_result(setup.api.post("/mcp", json=_call("threads__search", {"q": "hive"}),
                                                 headers={**HEADERS, **nobody}))
    refused_subject = body["error"]

    from backend.domains.orgs.service import create_operator

    _, password = in_transaction(setup.database_url, lambda db: create_operator(db, "ops-mcp@example.test"))
    login = setup.api.post("/admin/login", json={"email": "ops-mcp@example.test", "password": password})
    operator = {**HEADERS, **bearer(login.json()["token"])}
    _, body = _tool_result(setup.api.post("/mcp", json=_call("working_state__get",
                                                                    {"thread_id": "thr_" + "0" * 26}),
                                                 headers=operator))
    refused_org = body["error"]
    got = [(refused_subject["code"], refused_subject["param"]), (refused_org["code"], refused_org["param"])]
    assert got == [("subject_required", "X-Core-Subject"), ("org_required", "X-Core-Org")], (
        f"PLT-14 (`param` names what to fix; docs/mcp.md: the REST refusal body): thread tools answered {got}, "
        "REST and the memory tools answer param X-Core-Subject / X-Core-Org")


def test_plt_14_a_request_with_an_invalid_id_is_answered_with_an_error_not_dropped(setup: Setup) -> None:
    """A tools/call whose `id` is an object or a boolean (JSON-RPC/MCP: a string or a number) is taken for a
    notification: 202 with no body, the tool is not run, and the caller is never told why."""
    anna = {**HEADERS, **setup.anna()}
    problems = []
    for message_id in ({"n": 1}, True):
        response = setup.api.post("/mcp", json=_call(setup.tool("write"), {"type": "fact", "text": "Bees dance."},
                                                     message_id), headers=anna)
        try:
            error = response.json().get("error") or {}
        except ValueError:
            error = {}
        if error.get("code") != -32600:
            problems.append(f"id {message_id!r}: {response.status_code} {response.text!r}")
    assert not problems, ("JSON-RPC 2.0 (an invalid Request object is answered -32600 Invalid Request) / PLT-14 "
                          "(malformed input is refused, never dropped): " + "; ".join(problems))


def test_plt_14_stdio_answers_a_line_that_is_not_json_with_a_parse_error(setup: Setup) -> None:
    """Over HTTP unreadable JSON is answered -32700; `coremem mcp --stdio` drops the line silently (the SDK's
    stdio transport logs it), so a client is never told its message was lost."""
    params = setup.stdio_params(setup.key, "anna")
    proc = subprocess.Popen([COREMEM, "mcp", "--stdio"], env={**(params.env or {}), "PATH": "/usr/bin:/bin"},
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdin is not None and proc.stdout is not None

    def send(line: str) -> None:
        assert proc.stdin is not None
        proc.stdin.write(line + "\n")
        proc.stdin.flush()

    # A reader thread, not select(): a buffered readline() may take two answers off the pipe at once, and select()
    # would then wait for the second in vain.
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout or []], daemon=True).start()

    def answer() -> dict[str, Any]:
        try:
            return dict(json.loads(lines.get(timeout=60)))
        except queue.Empty:
            raise AssertionError("no answer from coremem mcp --stdio within 60 s") from None

    try:
        send(json.dumps(INITIALIZE))
        assert answer()["id"] == 1
        send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        send('{"jsonrpc": "2.0", "id": 7, "method": tools/list}')
        send(json.dumps({"jsonrpc": "2.0", "id": 8, "method": "ping"}))
        first = answer()
        second = answer()
        send("[1, 2]")  # a batch, which MCP does not take
        send(json.dumps({"jsonrpc": "2.0", "id": 9, "method": "ping"}))
        later = [answer()]
        while later[-1].get("id") != 9 and len(later) < 3:
            later.append(answer())
    finally:
        proc.stdin.close()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
    assert first.get("id") is None and first.get("error", {}).get("code") == -32700, (
        f"JSON-RPC 2.0 / PLT-14: a line that is not JSON gets a -32700 Parse error (as over HTTP); the next "
        f"thing stdio answered was {first}")
    assert second.get("id") == 8 and "result" in second, second
    assert [(a.get("id"), a.get("error", {}).get("code")) for a in later] == [(None, -32600), (9, None)], \
        f"a batch is answered -32600, then the ping: {later}"


# ---------------------------------------------------------------- reach and the SDK's own refusals

def test_plt_7_state_tools_and_thread_filter_answer_her_thread_to_bob_as_an_unknown_one(setup: Setup) -> None:
    """working_state__get/patch and threads__search's `thread_id` on Anna's thread: the same 404 as an unknown
    id (existing tests compare foreign and absent for threads__read only), and nothing of hers changes."""
    thread = new_thread(setup.api, setup.anna(), items=[msg("user", "The okapi lives in the Ituri forest.")])
    unknown = "thr_" + "0" * 26
    bob = {**HEADERS, **setup.bob()}
    for name, arguments in (("working_state__get", {}), ("working_state__patch", {"patch": {"a": 1}}),
                            ("working_state__patch", {"patch": {"a": 1}, "version": 0}),
                            ("threads__search", {"q": "okapi"})):
        is_error, foreign = _tool_result(setup.api.post("/mcp", json=_call(name, {"thread_id": thread["id"],
                                                                                  **arguments}), headers=bob))
        assert is_error, (name, foreign)
        _, absent = _tool_result(setup.api.post("/mcp", json=_call(name, {"thread_id": unknown, **arguments}),
                                                headers=bob))
        foreign["error"]["message"] = foreign["error"]["message"].replace(thread["id"], unknown)
        assert foreign == absent and absent["error"]["status"] == 404, (name, foreign, absent)
    state = setup.api.get(f"/threads/{thread['id']}/state", headers=setup.anna()).json()
    assert (state["state"], state["version"]) == ({}, 0)


def test_plt_14_malformed_json_rpc_over_http_gets_json_rpc_errors_never_a_500(setup: Setup) -> None:
    """Unreadable JSON, a batch, an unknown method, badly typed call params and wrongly typed arguments: each a
    JSON-RPC error or a 422 tool result naming the argument, never a 500 nor an empty answer."""
    api, anna = setup.api, {**HEADERS, **setup.anna()}
    unreadable = api.post("/mcp", content=b"{not json", headers=anna)
    assert unreadable.status_code == 400 and unreadable.json()["error"]["code"] == -32700
    deep = api.post("/mcp", content=b'{"jsonrpc": "2.0", "id": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
                    headers=anna)  # nesting no JSON reader should recurse through
    assert deep.status_code == 400 and deep.json()["error"]["code"] in (-32700, -32600), deep.text[:300]
    batch = api.post("/mcp", json=[INITIALIZE, INITIALIZE], headers=anna)
    assert batch.status_code == 400 and batch.json()["error"]["code"] < 0
    unknown = api.post("/mcp", json={"jsonrpc": "2.0", "id": 3, "method": "tools/nope"}, headers=anna)
    assert unknown.json()["error"]["code"] == -32601
    for params in ({}, {"name": 5}, {"name": "threads__read", "arguments": [1]}):
        bad = api.post("/mcp", json={"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": params},
                       headers=anna)
        assert bad.status_code == 200 and bad.json()["error"]["code"] == -32602, (params, bad.text)
    for arguments, param in (({"thread_id": 5}, "arguments.thread_id"),
                             ({"thread_id": "thr_x", "limit": "5"}, "arguments.limit"),
                             ({"thread_id": "thr_x", "limit": 10**30}, "arguments.limit")):
        is_error, body = _tool_result(api.post("/mcp", json=_call("threads__read", arguments), headers=anna))
        assert is_error and (body["error"]["status"], body["error"]["param"]) == (422, param), body
