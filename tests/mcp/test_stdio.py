"""`coremem mcp --stdio` started as a subprocess by the `mcp` SDK's own client, with the test database and the
credential in its environment: the same tools, people, refusals and history as over HTTP and REST."""

from __future__ import annotations

import subprocess
from typing import Any

from tests.helpers import bearer
from tests.mcp.conftest import COREMEM, Setup, answer, text_of, tool_error

ALLOWED = "fact, preference, commitment, behaviour"


def test_mem_20_stdio_offers_what_http_offers_and_keeps_people_apart(setup: Setup) -> None:
    async def listed(client: Any) -> Any:
        return {t.name: (t.description, t.input_schema) for t in (await client.list_tools()).tools}

    async def anna(client: Any) -> Any:
        tools = await listed(client)
        written = answer(await client.call_tool(setup.tool("write"), {"type": "fact", "text": "Anna keeps bees."}))
        found = text_of(await client.call_tool(setup.tool("search"), {"query": "bees"}))
        refused = tool_error(await client.call_tool(setup.tool("write"), {"type": "episode", "text": "A session."}))
        return tools, written, found, refused

    tools, written, found, refused = setup.stdio(setup.key, "anna", anna)
    assert tools == setup.http(setup.anna(), listed)
    assert written["action"] == "created"
    assert written["memory_id"] in found and "Anna keeps bees." in found
    assert (refused["code"], refused["param"]) == ("type_not_allowed", "arguments.type")
    assert ALLOWED in refused["message"]

    unknown = "mem_" + "0" * 26

    async def bob(client: Any) -> Any:
        found = text_of(await client.call_tool(setup.tool("search"), {"query": "bees"}))
        foreign = tool_error(await client.call_tool(setup.tool("write"), {
            "type": "fact", "text": "Bob keeps wasps.", "replaces": written["memory_id"]}))
        absent = tool_error(await client.call_tool(setup.tool("write"), {
            "type": "fact", "text": "Bob keeps wasps.", "replaces": unknown}))
        return found, foreign, absent

    found, foreign, absent = setup.stdio(setup.key, '{"id": "bob"}', bob)
    assert "bees" not in found and written["memory_id"] not in found
    assert foreign["status"] == 404
    assert {**foreign, "message": foreign["message"].replace(written["memory_id"], unknown)} == absent

    # The write is in the record's history as the key's, as a REST write would be.
    versions = setup.api.get(f"/memory/{written['memory_id']}/history", headers=setup.org.admin).json()["versions"]
    key_id = setup.api.get("/key", headers=bearer(setup.key)).json()["id"]
    assert [(v["action"], v["actor"]) for v in versions] == [("created", {"type": "key", "id": key_id})]


def run_stdio(setup: Setup, credential: str, subject: str | None, **env: str) -> subprocess.CompletedProcess[str]:
    params = setup.stdio_params(credential, subject)
    full = {k: v for k, v in {**(params.env or {}), "PATH": "/usr/bin:/bin", **env}.items() if v}
    return subprocess.run([COREMEM, "mcp", "--stdio"], env=full, stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=120)


def test_plt_7_a_subject_token_over_stdio_acts_for_her_and_cannot_name_another(setup: Setup) -> None:
    token = setup.org.subject_token(setup.key, "anna")
    refused = run_stdio(setup, token, "bob")
    assert refused.returncode == 2 and "conflicting_subjects" in refused.stderr and refused.stdout == ""
    unknown = run_stdio(setup, "ck_nope", None)
    assert unknown.returncode == 2 and "bad_credential" in unknown.stderr
    missing = run_stdio(setup, "", None)
    assert missing.returncode == 2 and "CORE_MCP_KEY" in missing.stderr
    # Without the API's secret it would make a new one: tokens would not verify, audit hashes would not match.
    no_secret = run_stdio(setup, token, None, CORE_SECRET="")
    assert no_secret.returncode == 2 and "CORE_SECRET" in no_secret.stderr
    assert not (setup.settings.data_dir / "secret").exists()

    bobs = setup.api.post("/memory", headers=setup.bob(),
                          json={"index_id": setup.index_id, "type": "fact", "text": "Bob keeps wasps."}).json()

    async def anna(client: Any) -> Any:
        written = answer(await client.call_tool(setup.tool("write"), {"type": "fact", "text": "Anna keeps bees."}))
        found = text_of(await client.call_tool(setup.tool("search"), {"query": "keeps"}))
        return written, found

    written, found = setup.stdio(token, None, anna)
    assert written["memory_id"] in found and bobs["id"] not in found
    record = setup.api.get(f"/memory/{written['memory_id']}", headers=setup.org.admin).json()
    assert record["subject"] == "anna"
    versions = setup.api.get(f"/memory/{written['memory_id']}/history", headers=setup.org.admin).json()["versions"]
    assert versions[0]["actor"]["type"] == "subject"
    assert record["source"] == "model"
