"""MCP over streamable HTTP (`/mcp`), driven by the `mcp` SDK's own client against the API under uvicorn: the
memory tools as `GET /tools` offers them (MEM-20 … MEM-22), the same people and refusals as REST (PLT-7, PLT-8),
and the same audit trail and record history (PLT-12)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from backend.access.policy import writer_policy
from backend.errors import THREADS_MISSING_MESSAGE
from tests.helpers import assert_error, bearer
from tests.mcp.conftest import Setup, answer, text_of, tool_error, writer_key
from tests.threads.util import msg, new_thread

ALLOWED = "fact, preference, commitment, behaviour"
THREAD_TOOLS = {"threads__search", "threads__read", "threads__note", "working_state__get", "working_state__patch"}


def rest_tools(setup: Setup, headers: dict[str, str]) -> dict[str, dict[str, Any]]:
    response = setup.api.get("/tools", params={"source": "memory"}, headers=headers)
    assert response.status_code == 200, response.text
    return {t["name"]: t for t in response.json()["data"]}


def mcp_tools(setup: Setup, headers: dict[str, str], mode: str = "auto") -> dict[str, Any]:
    async def work(client: Any) -> Any:
        return (await client.list_tools()).tools

    return {t.name: t for t in setup.http(headers, work, mode)}


def data_lines(text: str) -> list[dict[str, Any]]:
    """The JSON lines of a search answer, without the trust envelope's (random) delimiters."""
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_mem_20_tool_list_follows_the_keys_configuration_as_get_tools_does(setup: Setup, mode: str) -> None:
    listed = mcp_tools(setup, setup.anna(), mode)
    offered = {name: t for name, t in rest_tools(setup, setup.anna()).items() if t["offered"]}
    assert setup.tool("search") in offered and setup.tool("write") in offered
    assert set(listed) == set(offered) | THREAD_TOOLS
    for name, tool in offered.items():
        assert listed[name].description == tool["description"]
        assert listed[name].input_schema == tool["parameters"]
    assert listed[setup.tool("search")].annotations.read_only_hint is True
    assert listed[setup.tool("write")].annotations.read_only_hint is False

    # A key offered search only, without `threads`: exactly the search tools GET /tools marks offered.
    search_only = bearer(writer_key(setup.org, ["knowledge", "memory"], write_tool=False), "anna")
    rest = rest_tools(setup, search_only)
    assert rest[setup.tool("write")]["offered"] is False
    listed = mcp_tools(setup, search_only, mode)
    assert set(listed) == {name for name, t in rest.items() if t["offered"]}
    assert setup.tool("search") in listed and setup.tool("write") not in listed

    async def write(client: Any) -> Any:
        return await client.call_tool(setup.tool("write"), {"type": "fact", "text": "Not offered."})

    refused = tool_error(setup.http(search_only, write, mode))
    rest_refusal = setup.api.post(f"/tools/{setup.tool('write')}/call", headers=search_only,
                                  json={"arguments": {"type": "fact", "text": "Not offered."}})
    assert refused == assert_error(rest_refusal, 400, "tool_not_offered", "name")

    # A key with `threads` and without `memory`: the thread tools only (GET /tools refuses it outright).
    threads_only = bearer(writer_key(setup.org, ["threads"]), "anna")
    assert_error(setup.api.get("/tools", headers=threads_only), 403)
    assert set(mcp_tools(setup, threads_only, mode)) == THREAD_TOOLS


def test_mem_20_write_as_anna_is_found_by_anna_and_not_by_bob(setup: Setup) -> None:
    async def anna(client: Any) -> Any:
        written = answer(await client.call_tool(setup.tool("write"), {"type": "fact", "text": "Anna keeps bees."}))
        found = await client.call_tool(setup.tool("search"), {"query": "bees"})
        return written, text_of(found)

    written, found = setup.http(setup.anna(), anna)
    assert written["action"] == "created" and written["type"] == "fact"
    assert [line["id"] for line in data_lines(found)] == [written["memory_id"]]
    # The same answer the REST call gives (MEM-22: one JSON line per record, confidence as a percentage).
    rest = setup.api.post(f"/tools/{setup.tool('search')}/call", headers=setup.anna(),
                          json={"arguments": {"query": "bees"}})
    assert data_lines(found) == data_lines(rest.json()["output"])
    assert data_lines(found)[0]["confidence"] == "70%"

    unknown = "mem_" + "0" * 26

    async def bob(client: Any) -> Any:
        found = await client.call_tool(setup.tool("search"), {"query": "bees"})
        foreign = await client.call_tool(setup.tool("write"), {"type": "fact", "text": "Bob keeps wasps.",
                                                               "replaces": written["memory_id"]})
        absent = await client.call_tool(setup.tool("write"), {"type": "fact", "text": "Bob keeps wasps.",
                                                              "replaces": unknown})
        return text_of(found), tool_error(foreign), tool_error(absent)

    found, foreign, absent = setup.http(setup.bob(), bob)
    assert data_lines(found) == []
    # Anna's record and a record that does not exist are refused alike: nothing tells Bob hers exists.
    assert foreign["status"] == 404 and foreign["param"] == "arguments.replaces"
    assert {**foreign, "message": foreign["message"].replace(written["memory_id"], unknown)} == absent
    assert setup.api.get(f"/memory/{written['memory_id']}", headers=setup.org.admin).json()["status"] == "active"


def test_mem_21_a_refused_type_is_a_tool_error_naming_the_allowed_types(setup: Setup) -> None:
    async def work(client: Any) -> Any:
        return tool_error(await client.call_tool(setup.tool("write"), {"type": "episode", "text": "A session."}))

    refused = setup.http(setup.anna(), work)
    assert refused["code"] == "type_not_allowed" and refused["param"] == "arguments.type"
    assert ALLOWED in refused["message"]
    rest = setup.api.post(f"/tools/{setup.tool('write')}/call", headers=setup.anna(),
                          json={"arguments": {"type": "episode", "text": "A session."}})
    assert refused == assert_error(rest, 422, "type_not_allowed", "arguments.type")

    async def bad_arguments(client: Any) -> Any:
        return [tool_error(await client.call_tool(setup.tool("write"), arguments)) for arguments in
                ({"type": "fact"}, {"type": "fact", "text": "x", "colour": "red"}, {"type": "fact", "text": "a\x00b"})]

    assert [e["param"] for e in setup.http(setup.anna(), bad_arguments)] == [
        "arguments.text", "arguments.colour", "arguments.text"]

    async def unknown_tools(client: Any) -> Any:
        return [tool_error(await client.call_tool(name, {"query": "x"}))
                for name in ("memory__idx_nope__search", "memory__idx_\x00__search")]

    assert [(e["status"], e["param"]) for e in setup.http(setup.anna(), unknown_tools)] == [(404, "name"),
                                                                                            (422, "name")]


def test_plt_7_credentials_are_the_rest_ones_and_a_subject_token_acts_for_her_alone(setup: Setup) -> None:
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                  "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                             "clientInfo": {"name": "t", "version": "1"}}}
    accept = {"Accept": "application/json, text/event-stream"}
    assert_error(setup.api.post("/mcp", json=initialize, headers=accept), 401, "missing_credential")
    assert_error(setup.api.post("/mcp", json=initialize, headers={**accept, **bearer("ck_nope")}), 401,
                 "bad_credential")
    token = setup.org.subject_token(setup.key, "anna")
    # Her token cannot name Bob: the request is refused before any tool runs.
    assert_error(setup.api.post("/mcp", json=initialize, headers={**accept, **bearer(token, "bob")}), 400,
                 "conflicting_subjects")
    assert setup.api.post("/mcp", json=initialize, headers={**accept, **bearer(token)}).status_code == 200
    # Stateless: no event stream to open (it would idle), so GET is refused at once.
    assert assert_error(setup.api.get("/mcp", headers={**accept, **bearer(token)}), 405, "method_not_allowed")

    bobs = setup.api.post("/memory", headers=setup.bob(),
                          json={"index_id": setup.index_id, "type": "fact", "text": "Bob keeps wasps."}).json()

    async def as_anna(client: Any) -> Any:
        written = answer(await client.call_tool(setup.tool("write"), {"type": "fact", "text": "Anna keeps bees."}))
        found = text_of(await client.call_tool(setup.tool("search"), {"query": "keeps"}))
        return written, data_lines(found)

    written, found = setup.http(bearer(token), as_anna)
    assert [line["id"] for line in found] == [written["memory_id"]]
    assert bobs["id"] not in {line["id"] for line in found}
    record = setup.api.get(f"/memory/{written['memory_id']}", headers=setup.org.admin).json()
    assert record["subject"] == "anna" and record["source"] == "model"


def test_plt_12_mcp_calls_leave_the_trail_and_history_the_rest_calls_leave(setup: Setup) -> None:
    admin = setup.org.admin

    async def write(client: Any) -> Any:
        return answer(await client.call_tool(setup.tool("write"), {"type": "fact", "text": "Anna keeps bees."}))

    over_mcp = setup.http(setup.anna(), write)["memory_id"]
    over_rest = json.loads(setup.api.post(f"/tools/{setup.tool('write')}/call", headers=setup.anna(), json={
        "arguments": {"type": "preference", "text": "Anna prefers tea."}}).json()["output"])["memory_id"]

    def history(record_id: str) -> list[tuple[Any, ...]]:
        versions = setup.api.get(f"/memory/{record_id}/history", headers=admin).json()["versions"]
        return [(v["version"], v["action"], v["actor"]["type"], v["actor"]["id"]) for v in versions]

    assert history(over_mcp) == history(over_rest) and len(history(over_mcp)) == 1

    def events(**params: Any) -> list[dict[str, Any]]:
        response = setup.api.get("/audit", params=params, headers=admin)
        assert response.status_code == 200, response.text
        return list(response.json()["data"])

    # An administrator's reads over MCP are audited as her REST reads are.
    thread = new_thread(setup.api, setup.anna(), items=[msg("user", "Where do the bees winter?")])

    async def admin_reads(client: Any) -> Any:
        found = answer(await client.call_tool("threads__search", {"q": "bees"}))
        searched = text_of(await client.call_tool(setup.tool("search"), {"query": "bees"}))
        return found, searched

    before = {e["id"] for e in events(action=["thread.read", "memory.read"])}
    found, searched = setup.http(admin, admin_reads)
    assert thread["id"] in {hit["thread_id"] for hit in found["data"]}
    assert over_mcp in {line["id"] for line in data_lines(searched)}
    new = [e for e in events(action=["thread.read", "memory.read"]) if e["id"] not in before]
    by_action = {e["action"]: e for e in new}
    assert set(by_action) == {"thread.read", "memory.read"} and len(new) == 2
    assert by_action["thread.read"]["detail"]["route"] == "GET /thread-items"
    assert by_action["memory.read"]["detail"]["route"] == "POST /tools/{name}/call"
    rest_read = setup.api.get("/thread-items", params={"q": "bees"}, headers=admin)
    assert rest_read.status_code == 200
    rest_event = next(e for e in events(action=["thread.read"]) if e["id"] not in before | {e["id"] for e in new})
    assert rest_event["detail"] == by_action["thread.read"]["detail"]

    # A policy refusal rolls the call back and keeps its `denied` event, as over REST.
    shared = new_thread(setup.api, bearer(setup.key), items=[msg("user", "Shared notes.")])

    async def patch_shared(client: Any) -> Any:
        return tool_error(await client.call_tool("working_state__patch",
                                                 {"thread_id": shared["id"], "patch": {"step": 1}}))

    refused = setup.http(setup.anna(), patch_shared)
    assert (refused["status"], refused["code"]) == (403, "policy_denied")
    denied = events(outcome="denied", object_id=shared["id"])
    assert len(denied) == 1 and denied[0]["action"] == "thread.write"
    rest = setup.api.patch(f"/threads/{shared['id']}/state", json={"step": 1}, headers=setup.anna())
    assert assert_error(rest, 403, "policy_denied") == refused
    assert len(events(outcome="denied", object_id=shared["id"])) == 2
    assert setup.api.get(f"/threads/{shared['id']}/state", headers=admin).json()["version"] == 0


def test_plt_6_thread_tools_without_threads_answer_the_rest_404(setup: Setup) -> None:
    memory_only = bearer(writer_key(setup.org, ["knowledge", "memory"]), "anna")

    async def work(client: Any) -> Any:
        return tool_error(await client.call_tool("threads__search", {"q": "bees"}))

    refused = setup.http(memory_only, work)
    assert (refused["status"], refused["message"]) == (404, THREADS_MISSING_MESSAGE)


def test_plt_7_a_key_requiring_a_person_refuses_listings_that_name_nobody(setup: Setup) -> None:
    from mcp.shared.exceptions import MCPError

    policy = {**writer_policy(), "settings": {"subjects_required": True}}
    key = setup.org.make_key(policy=policy, memory={"retrieval_tool": True})["secret"]

    async def work(client: Any) -> Any:
        refusals = []
        for listing in (client.list_tools, client.list_resources):
            try:
                await listing()
            except MCPError as error:
                refusals.append((error.code, error.data))
        called = tool_error(await client.call_tool(setup.tool("search"), {"query": "bees"}))
        return refusals, called

    refusals, called = setup.http(bearer(key), work)
    rest = assert_error(setup.api.get("/tools", headers=bearer(key)), 400, "subject_required")
    assert refusals == [(-32602, rest), (-32602, rest)] and called == rest
    named = setup.http(bearer(key, "anna"), lambda client: client.list_tools()).tools
    assert setup.tool("search") in {t.name for t in named}
