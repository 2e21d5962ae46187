"""MEM-21: the write tool takes the store's types: the extraction switch's when the store has one."""

from __future__ import annotations

from tests.extraction.util import new_store, switch_on
from tests.helpers import assert_error


def _write_tool(org, index_id):
    tools = org.client.get("/tools", params={"source": "memory"}, headers=org.admin).json()["data"]
    return next(t for t in tools if t["name"] == f"memory__{index_id}__write")


def test_mem_21_the_write_tool_takes_the_switch_types(client, org, scripted):
    index_id = new_store(org)
    plain = new_store(org, "plain")
    enum = _write_tool(org, index_id)["parameters"]["properties"]["type"]
    assert enum.get("enum") == ["fact", "preference", "commitment", "behaviour"], enum
    switch_on(org, index_id, types=["fact", "skill"], episodes=True)
    assert _write_tool(org, index_id)["parameters"]["properties"]["type"]["enum"] == ["fact", "skill"]
    assert _write_tool(org, plain)["parameters"]["properties"]["type"]["enum"] == [
        "fact", "preference", "commitment", "behaviour"]
    path = f"/tools/memory__{index_id}__write/call"
    written = client.post(path, headers=org.admin, json={"arguments": {"type": "skill", "text": "Knows SQL."}})
    assert written.status_code == 200, written.text
    refused = assert_error(client.post(path, headers=org.admin,
                                       json={"arguments": {"type": "preference", "text": "Likes tea."}}),
                           422, "type_not_allowed", "arguments.type")
    assert "fact, skill" in refused["message"]
    # Never `episode`, even with the switch's `episodes` on.
    assert_error(client.post(path, headers=org.admin, json={"arguments": {"type": "episode", "text": "A session."}}),
                 422, "type_not_allowed", "arguments.type")
