"""The thread tools (THR-7, THR-8, THR-11) and the block resource (INJ-12's rules) over MCP: each answers what its
REST route answers the same credential, and what another person cannot reach is absent, not forbidden."""

from __future__ import annotations

import json
from typing import Any

from backend.access.policy import writer_policy
from backend.domains.threads.state import EMPTY_SIZE
from tests.helpers import bearer
from tests.mcp.conftest import Setup, answer, text_of, tool_error
from tests.threads.util import msg, new_thread


def test_thr_7_search_and_read_answer_the_rest_bodies_for_her_threads_only(setup: Setup) -> None:
    word = f"hive{setup.index_id[-8:]}"
    thread = new_thread(setup.api, setup.anna(), items=[msg("user", f"How many frames does a {word} hold?"),
                                                         msg("assistant", f"A {word} holds ten frames.")])

    async def anna(client: Any) -> Any:
        return (answer(await client.call_tool("threads__search", {"q": word, "limit": 1})),
                answer(await client.call_tool("threads__read", {"thread_id": thread["id"], "order": "desc"})))

    found, items = setup.http(setup.anna(), anna)
    rest_found = setup.api.get("/thread-items", params={"q": word, "limit": 1}, headers=setup.anna()).json()
    assert found == rest_found and len(found["data"]) == 1 and found["next_cursor"]
    rest_items = setup.api.get(f"/threads/{thread['id']}/items", params={"order": "desc"}, headers=setup.anna())
    assert items == rest_items.json() and [i["position"] for i in items["items"]] == [2, 1]

    async def next_page(client: Any) -> Any:
        return answer(await client.call_tool("threads__search", {"q": word, "limit": 1,
                                                                 "cursor": found["next_cursor"]}))

    second = setup.http(setup.anna(), next_page)
    assert {h["item_id"] for h in found["data"] + second["data"]} == {i["id"] for i in thread["items"]}

    unknown = "thr_" + "0" * 26

    async def bob(client: Any) -> Any:
        return (answer(await client.call_tool("threads__search", {"q": word})),
                tool_error(await client.call_tool("threads__read", {"thread_id": thread["id"]})),
                tool_error(await client.call_tool("threads__read", {"thread_id": unknown})))

    found, foreign, absent = setup.http(setup.bob(), bob)
    assert found["data"] == []
    assert (foreign["status"], foreign["param"]) == (404, "arguments.thread_id")
    assert {**foreign, "message": foreign["message"].replace(thread["id"], unknown)} == absent

    async def refusals(client: Any) -> Any:
        return [tool_error(await client.call_tool("threads__search", arguments)) for arguments in (
            {"q": word, "from": "2026-01-01T00:00:00"}, {}, {"q": word, "cursor": "nonsense"},
            {"q": word, "colour": "red"})]

    assert [(e["status"], e["param"]) for e in setup.http(setup.anna(), refusals)] == [
        (422, "arguments.from"), (400, "arguments.q"), (400, "arguments.cursor"), (422, "arguments.colour")]


def test_thr_8_a_note_is_her_own_as_over_rest(setup: Setup) -> None:
    thread = new_thread(setup.api, setup.anna(), items=[msg("user", "Too slow."), msg("assistant", "Sorry.")])
    item = thread["items"][1]["id"]

    async def note(client: Any) -> Any:
        return answer(await client.call_tool("threads__note", {"thread_id": thread["id"], "item_id": item,
                                                               "metadata": {"score": "negative", "stars": 2}}))

    written = setup.http(setup.anna(), note)
    assert (written["by"], written["metadata"], written["item_id"]) == ("anna", {"score": "negative", "stars": 2}, item)
    notes = setup.api.get(f"/threads/{thread['id']}/items/{item}/metadata", headers=setup.anna()).json()["data"]
    assert [(n["by"], n["metadata"]) for n in notes] == [("anna", {"score": "negative", "stars": 2})]

    async def refusals(client: Any) -> Any:
        return [tool_error(await client.call_tool("threads__note", {"thread_id": thread["id"], "item_id": i,
                                                                    "metadata": m}))
                for i, m in ((item, {"k": "x" * 513}), (item, {"k": {"nested": 1}}),
                             ("itm_" + "0" * 26, {"k": 1}))]

    assert [(e["status"], e["param"]) for e in setup.http(setup.anna(), refusals)] == [
        (422, "arguments.metadata.k"), (422, "arguments.metadata.k"), (404, "arguments.item_id")]

    async def bob(client: Any) -> Any:
        return tool_error(await client.call_tool("threads__note", {"thread_id": thread["id"], "item_id": item,
                                                                   "metadata": {"k": 1}}))

    assert setup.http(setup.bob(), bob)["status"] == 404


def test_thr_11_working_state_with_its_version(setup: Setup) -> None:
    thread = new_thread(setup.api, setup.anna())
    tid = thread["id"]

    async def work(client: Any) -> Any:
        async def call(name: str, **arguments: Any) -> Any:
            return await client.call_tool(name, {"thread_id": tid, **arguments})

        empty = answer(await call("working_state__get"))
        first = answer(await call("working_state__patch", patch={"step": 1, "todo": ["a"]}, version=0))
        stale = tool_error(await call("working_state__patch", patch={"step": 2}, version=0))
        second = answer(await call("working_state__patch", patch={"todo": None, "done": True}))
        too_large = tool_error(await call("working_state__patch", patch={"blob": "x" * 20000}))
        bad = tool_error(await call("working_state__patch", patch=[1]))
        return empty, first, stale, second, too_large, bad

    empty, first, stale, second, too_large, bad = setup.http(setup.anna(), work)
    assert empty == {"state": {}, "version": 0, "size": EMPTY_SIZE, "updated_at": None}
    assert (first["state"], first["version"]) == ({"step": 1, "todo": ["a"]}, 1)
    assert (stale["status"], stale["reason_code"], stale["param"]) == (409, "stale_version", "arguments.version")
    assert (second["state"], second["version"]) == ({"step": 1, "done": True}, 2)
    assert (too_large["status"], too_large["code"], too_large["param"]) == (422, "working_state_too_large",
                                                                            "arguments.patch")
    assert (bad["status"], bad["param"]) == (422, "arguments.patch")
    rest = setup.api.get(f"/threads/{tid}/state", headers=setup.anna())
    assert rest.json() == second and rest.headers["etag"] == '"2"'


def _recalls(db: Any, record_id: str) -> int:
    return int(db.execute("SELECT recall_count FROM memory_records WHERE id = %s", (record_id,)).fetchone()[0])


def test_inj_12_the_block_resource_is_her_turns_block_and_counts_no_recall(setup: Setup, db: Any) -> None:
    anna = setup.api.post("/memory", headers=setup.anna(),
                          json={"index_id": setup.index_id, "type": "fact", "text": "Anna keeps bees."}).json()
    setup.api.post("/memory", headers=setup.anna(),
                   json={"index_id": setup.index_id, "type": "preference", "text": "Anna prefers honey."})
    setup.api.post("/memory", headers=setup.bob(),
                   json={"index_id": setup.index_id, "type": "fact", "text": "Bob keeps wasps."})
    uri = f"memory://{setup.index_id}/block"

    async def read(client: Any) -> Any:
        listed = [r.uri for r in (await client.list_resources()).resources]
        templates = [t.uri_template for t in (await client.list_resource_templates()).resource_templates]
        return listed, templates, (await client.read_resource(uri)).contents[0]

    listed, templates, block = setup.http(setup.anna(), read)
    assert uri in listed and templates == ["memory://{index_id}/block"]
    assert block.mime_type == "text/plain" and block.text.startswith("[about_this_person]\n")
    lines = [json.loads(line) for line in block.text.splitlines()[1:]]
    assert {line["text"] for line in lines} == {"Anna keeps bees.", "Anna prefers honey."}
    meta = block.meta["coremem/block"]
    assert meta["store_override"] is True and anna["id"] in meta["injected_ids"]
    assert _recalls(db, anna["id"]) == 0  # a turn would count a recall; reading the resource does not

    bob = setup.http(setup.bob(), lambda client: client.read_resource(uri)).contents[0]
    assert "Anna" not in bob.text and "Bob keeps wasps." in bob.text

    # A key whose own block injects from this store: exactly its turns' block (here: preferences only).
    block_key = setup.org.make_key(policy=writer_policy(), memory={
        "retrieval_tool": True, "injection": {"index_id": setup.index_id, "types": ["preference"]}})["secret"]
    own = setup.http(bearer(block_key, "anna"), lambda client: client.read_resource(uri)).contents[0]
    assert own.text.splitlines() == ["[about_this_person]",
                                     '{"type":"preference","confidence":"100%","text":"Anna prefers honey."}']
    assert own.meta["coremem/block"]["store_override"] is False
    assert _recalls(db, anna["id"]) == 0


def test_inj_12_an_unreachable_store_reads_as_an_unknown_one(setup: Setup) -> None:
    other = setup.api.post("/indexes", json={"name": f"other-{setup.index_id[-8:]}"}, headers=setup.org.admin).json()
    narrow = setup.org.make_key(policy={**writer_policy(), "indexes": [setup.index_id]})["secret"]
    unknown = "idx_" + "0" * 26

    async def work(client: Any) -> Any:
        from mcp.shared.exceptions import MCPError

        listed = [r.uri for r in (await client.list_resources()).resources]
        errors = []
        for index_id in (other["id"], unknown, "idx_\x00"):
            try:
                await client.read_resource(f"memory://{index_id}/block")
            except MCPError as error:
                errors.append(error.data)
        return listed, errors

    listed, (foreign, absent, nul) = setup.http(bearer(narrow, "anna"), work)
    assert (nul["status"], nul["param"]) == (422, "uri")  # bad input, never a 500
    assert listed == [f"memory://{setup.index_id}/block"]
    assert foreign["status"] == 404
    assert {**foreign, "message": foreign["message"].replace(other["id"], unknown)} == absent

    async def tools(client: Any) -> Any:
        return [t.name for t in (await client.list_tools()).tools], text_of(
            await client.call_tool(f"memory__{other['id']}__search", {"query": "x"}))

    names, refused = setup.http(bearer(narrow, "anna"), tools)
    assert not any(other["id"] in name for name in names)
    assert json.loads(refused)["error"]["status"] == 404
