"""Memory tools outside a turn (MEM-20 … MEM-22): listing with schemas, writing, searching, the envelope."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

from jsonschema import Draft202012Validator

from backend.access.policy import writer_policy
from tests.helpers import assert_error, bearer
from tests.memory.conftest import Mem, make_index


def call(client: Any, mem: Mem, kind: str, arguments: dict[str, Any], headers: dict[str, str],
         **extra: Any) -> Any:
    return client.post(mem.tool(kind), json={"arguments": arguments, **extra}, headers=headers)


def output(response: Any) -> Any:
    assert response.status_code == 200, response.text
    return json.loads(response.json()["output"])


def today_in(zone: str) -> str:
    return datetime.now(UTC).astimezone(ZoneInfo(zone)).date().isoformat()


def test_mem_20_tools_are_listed_per_index_with_json_schemas(mem: Mem, client: Any) -> None:
    second = make_index(mem.org)
    response = client.get("/tools", params={"source": "memory"}, headers=mem.anna())
    assert response.status_code == 200, response.text
    tools = {t["name"]: t for t in response.json()["data"]}
    for index_id in (mem.index_id, second):
        search, write = tools[f"memory__{index_id}__search"], tools[f"memory__{index_id}__write"]
        for tool in (search, write):
            Draft202012Validator.check_schema(tool["parameters"])
            assert tool["type"] == "tool" and tool["source"] == "memory" and tool["index_id"] == index_id
            assert tool["offered"] is True
        assert set(search["parameters"]["properties"]) == {"query", "types", "after", "before", "limit"}
        assert search["parameters"]["required"] == ["query"]
        assert set(write["parameters"]["properties"]) == {"type", "text", "metadata", "confidence", "due_at",
                                                          "promised_to", "replaces"}
        assert write["parameters"]["properties"]["type"]["enum"] == ["fact", "preference", "commitment", "behaviour"]
        assert "episode" not in write["description"]
    # The key's configuration decides what may be offered.
    search_only = bearer(mem.org.make_key(policy=writer_policy(), memory={"retrieval_tool": True,
                                                                          "write_tool": False})["secret"])
    listed = {t["name"]: t["offered"] for t in client.get("/tools", params={"source": "memory"},
                                                          headers=search_only).json()["data"]}
    assert listed[f"memory__{mem.index_id}__search"] is True and listed[f"memory__{mem.index_id}__write"] is False
    assert_error(call(client, mem, "write", {"type": "fact", "text": "x"}, search_only), 400, param="name")
    write_only = bearer(mem.org.make_key(policy=writer_policy(), memory={"retrieval_tool": False,
                                                                         "write_tool": True})["secret"])
    assert_error(call(client, mem, "search", {"query": "x"}, write_only), 400, param="name")
    assert_error(client.get("/tools", params={"source": "files"}, headers=mem.anna()), 400, param="source")
    assert_error(client.post("/tools/memory__idx_nope__search/call", json={"arguments": {"query": "x"}},
                             headers=mem.anna()), 404, param="name")
    assert_error(client.post("/tools/not_a_tool/call", json={"arguments": {}}, headers=mem.anna()), 404,
                 param="name")


def test_mem_21_write_tool_tells_todays_date_in_the_turns_zone(mem: Mem, client: Any) -> None:
    def description(**params: Any) -> str:
        tools = client.get("/tools", params={"source": "memory", **params}, headers=mem.anna()).json()["data"]
        return next(t["description"] for t in tools if t["name"] == f"memory__{mem.index_id}__write")

    assert f"Today is {today_in('UTC')}" in description() and "in UTC" in description()
    assert f"Today is {today_in('Pacific/Kiritimati')}" in description(timezone="Pacific/Kiritimati")
    assert f"Today is {today_in('Pacific/Pago_Pago')}" in description(timezone="Pacific/Pago_Pago")
    org_url = f"/tenants/{mem.org.org_id}"
    assert client.patch(org_url, json={"timezone": "Pacific/Kiritimati"}, headers=mem.admin).status_code == 200
    try:
        assert f"Today is {today_in('Pacific/Kiritimati')}" in description()
        assert "in Pacific/Kiritimati" in description()
        assert "in Europe/Amsterdam" in description(timezone="Europe/Amsterdam")
    finally:
        client.patch(org_url, json={"timezone": "UTC"}, headers=mem.admin)
    assert_error(client.get("/tools", params={"source": "memory", "timezone": "Mars/Olympus"}, headers=mem.anna()),
                 422, param="timezone")
    # An empty zone is a bad zone, not the organisation's (THR-12's rule for empty values).
    assert_error(client.get("/tools", params={"source": "memory", "timezone": ""}, headers=mem.anna()),
                 422, param="timezone")


def test_mem_21_write_tool_creates_confirms_and_replaces(mem: Mem, client: Any, db: Any) -> None:
    created = output(call(client, mem, "write", {"type": "preference", "text": "Prefers mornings."}, mem.anna()))
    assert set(created) == {"memory_id", "action", "type", "confidence"}
    assert (created["action"], created["type"], created["confidence"]) == ("created", "preference", 0.7)
    record = client.get(f"/memory/{created['memory_id']}", headers=mem.anna()).json()
    assert (record["source"], record["subject"], record["verified"]) == ("model", "anna", False)
    db.execute("UPDATE memory_records SET updated_at = now() - interval '20 days' WHERE id = %s",
               (created["memory_id"],))
    confirmed = output(call(client, mem, "write", {"type": "preference", "text": "  prefers   MORNINGS "},
                            mem.anna()))
    assert confirmed == {"memory_id": created["memory_id"], "action": "confirmed", "type": "preference",
                         "confidence": 0.7}
    age = db.execute("SELECT extract(epoch FROM now() - updated_at), confirmations FROM memory_records "
                     "WHERE id = %s", (created["memory_id"],)).fetchone()
    assert age[0] < 60 and age[1] == 1  # confirmation restarts the decay age
    # Bob saying the same words gets his own record; so does another type.
    bobs = output(call(client, mem, "write", {"type": "preference", "text": "Prefers mornings."}, mem.bob()))
    assert bobs["action"] == "created" and bobs["memory_id"] != created["memory_id"]
    # A shared record (the application naming nobody) is confirmed in the same words too, not written twice.
    office = output(call(client, mem, "write", {"type": "fact", "text": "The office closes at six."}, mem.nobody))
    again = output(call(client, mem, "write", {"type": "fact", "text": "the office closes at SIX."}, mem.nobody))
    assert (office["action"], again["action"], again["memory_id"]) == ("created", "confirmed", office["memory_id"])
    replaced = output(call(client, mem, "write", {"type": "preference", "text": "Prefers evenings.",
                                                  "replaces": created["memory_id"], "confidence": 0.9}, mem.anna()))
    assert replaced == {"memory_id": replaced["memory_id"], "action": "replaced",
                        "replaces": created["memory_id"], "type": "preference", "confidence": 0.9}
    # A correction keeps the owner, also when the application (naming nobody) corrects Anna's record.
    fixed = output(call(client, mem, "write", {"type": "preference", "text": "Prefers afternoons.",
                                               "replaces": replaced["memory_id"]}, mem.nobody))
    assert client.get(f"/memory/{fixed['memory_id']}", headers=mem.anna()).json()["subject"] == "anna"
    assert_error(call(client, mem, "write", {"type": "preference", "text": "again",
                                             "replaces": created["memory_id"]}, mem.anna()), 409,
                 param="arguments.replaces")
    assert_error(call(client, mem, "write", {"type": "preference", "text": "Bob's fix",
                                             "replaces": fixed["memory_id"]}, mem.bob()), 404,
                 param="arguments.replaces")
    shared = mem.write(mem.nobody, "Office opens at nine.", labels={"audience": "everyone"})
    assert_error(call(client, mem, "write", {"type": "fact", "text": "Office opens at ten.",
                                             "replaces": shared["id"]}, mem.anna()), 403,
                 param="arguments.replaces")
    # The application corrects the shared record: the correction keeps its owner (nobody) and labels.
    corrected = output(call(client, mem, "write", {"type": "fact", "text": "Office opens at ten.",
                                                   "replaces": shared["id"]}, mem.nobody))
    record = client.get(f"/memory/{corrected['memory_id']}", headers=mem.nobody).json()
    assert (record["subject"], record["labels"], record["replaces"]) == (None, {"audience": "everyone"}, shared["id"])


def test_mem_21_write_tool_refuses_types_and_bad_arguments(mem: Mem, client: Any, db: Any) -> None:
    episode = call(client, mem, "write", {"type": "episode", "text": "A session."}, mem.anna())
    body = assert_error(episode, 422, param="arguments.type")
    assert "fact, preference, commitment, behaviour" in body["message"]
    # Inside a turn the same refusal is a tool error the model reads.
    from backend.domains.tools.service import tool_error_output
    from backend.errors import ValidationFailed

    model_reads = json.loads(tool_error_output(ValidationFailed(body["message"], param=body["param"],
                                                                code=body["code"])))
    assert model_reads == {"error": {"code": "type_not_allowed", "message": body["message"],
                                     "param": "arguments.type"}}
    assert_error(call(client, mem, "write", {"type": "identity", "text": "x"}, mem.anna()), 422,
                 param="arguments.type")
    for arguments, param in [
        ({"type": "fact"}, "arguments.text"),
        ({"type": "fact", "text": ""}, "arguments.text"),
        ({"type": "fact", "text": "x", "colour": "red"}, "arguments.colour"),
        ({"type": "fact", "text": "x", "confidence": 2}, "arguments.confidence"),
        ({"type": "commitment", "text": "x", "due_at": "2026-12-10T09:00:00"}, "arguments.due_at"),
        ({"type": "fact", "text": "x", "due_at": "2026-12-10T09:00:00Z"}, "arguments.due_at"),
        ({"type": "fact", "text": "x", "replaces": "not-an-id"}, "arguments.replaces"),
        ({"type": "fact", "text": "x", "metadata": {"b": "x" * 9000}}, "arguments.metadata"),
    ]:
        assert_error(call(client, mem, "write", arguments, mem.anna()), 422, param=param)
    assert mem.counts(db)[0] == 0
    promise = output(call(client, mem, "write", {"type": "commitment", "text": "Calls the bank back.",
                                                 "due_at": "2026-12-10T09:00:00+01:00", "promised_to": "the bank"},
                          mem.anna()))
    stored = client.get(f"/memory/{promise['memory_id']}", headers=mem.anna()).json()
    assert stored["commitment"] == {"status": "open", "due_at": "2026-12-10T08:00:00Z", "promised_to": "the bank"}
    no_write_rule = bearer(mem.org.make_key(memory={"write_tool": True})["secret"], "anna")
    assert_error(call(client, mem, "write", {"type": "fact", "text": "x"}, no_write_rule), 403,
                 code="policy_denied")


def test_mem_22_search_tool_lines_percentages_contested_and_envelope(mem: Mem, client: Any, db: Any) -> None:
    tea = mem.write(mem.anna(), "Likes green tea with honey.", confidence=0.824, type="preference")
    shared = mem.write(mem.nobody, "The kitchen stocks green tea.", type="fact")
    mem.write(mem.bob(), "Bob likes green tea too.")
    db.execute("UPDATE memory_records SET contested = true, contested_with = %s WHERE id = %s",
               (shared["id"], tea["id"]))
    plain_key = bearer(mem.org.make_key(capabilities=["knowledge", "memory"], policy=writer_policy())["secret"],
                       "anna")
    plain = call(client, mem, "search", {"query": "green tea"}, plain_key)
    assert plain.status_code == 200, plain.text
    lines = [json.loads(line) for line in plain.json()["output"].splitlines()]
    by_id = {line["id"]: line for line in lines}
    assert set(by_id) == {tea["id"], shared["id"]}
    assert list(by_id[tea["id"]]) == ["type", "confidence", "text", "id", "created_at", "contested"]
    assert by_id[tea["id"]]["confidence"] == "82%" and by_id[tea["id"]]["contested"] is True
    assert by_id[shared["id"]]["confidence"] == "100%" and "contested" not in by_id[shared["id"]]
    typed = call(client, mem, "search", {"query": "green tea", "types": ["fact"]}, plain_key)
    assert [json.loads(line)["id"] for line in typed.json()["output"].splitlines()] == [shared["id"]]
    future = call(client, mem, "search", {"query": "green tea", "after": "2999-01-01T00:00:00+02:00"}, plain_key)
    assert future.json()["output"] == ""
    assert_error(call(client, mem, "search", {"query": "tea", "after": "2026-01-01T00:00:00"}, plain_key), 422,
                 param="arguments.after")
    assert_error(call(client, mem, "search", {"query": "tea", "before": "9999-12-31T23:00:00-22:22"}, plain_key),
                 422, param="arguments.before")
    assert_error(call(client, mem, "search", {"query": "tea", "limit": 500}, plain_key), 422,
                 param="arguments.limit")
    assert_error(call(client, mem, "search", {}, plain_key), 422, param="arguments.query")
    wrapped = call(client, mem, "search", {"query": "green tea"}, mem.anna()).json()["output"]  # holds trust_envelope
    first, *inner, last = wrapped.splitlines()
    assert first.startswith("<tool-data id=") and last.startswith("</tool-data id=")
    assert first.split('"')[1] == last.split('"')[1]  # the same nonce opens and closes
    assert "data, not instructions" in inner[0]
    assert {json.loads(line)["id"] for line in inner[1:]} == {tea["id"], shared["id"]}
    counts = dict(db.execute("SELECT id, recall_count FROM memory_records WHERE id IN (%s, %s)",
                             (tea["id"], shared["id"])).fetchall())
    assert counts == {tea["id"]: 2, shared["id"]: 3}  # how often a search put each before a model


def test_mem_16_contested_partner_is_named_only_to_readers_who_see_it(mem: Mem, client: Any, db: Any) -> None:
    mine = mem.write(mem.anna(), "The meeting is on Monday.")
    shared = mem.write(mem.nobody, "The meeting is on Tuesday.")
    db.execute("UPDATE memory_records SET contested = true, contested_with = %s WHERE id = %s",
               (shared["id"], mine["id"]))
    db.execute("UPDATE memory_records SET contested = true, contested_with = %s WHERE id = %s",
               (mine["id"], shared["id"]))
    assert client.get(f"/memory/{mine['id']}", headers=mem.anna()).json()["contested_with"] == shared["id"]
    assert client.get(f"/memory/{shared['id']}", headers=mem.anna()).json()["contested_with"] == mine["id"]
    for_bob = client.get(f"/memory/{shared['id']}", headers=mem.bob()).json()
    assert for_bob["contested"] is True and for_bob["contested_with"] is None
    listed = client.get("/memory", params={"index_id": mem.index_id}, headers=mem.bob()).json()["data"]
    assert [(r["id"], r["contested_with"]) for r in listed] == [(shared["id"], None)]
    found = client.get("/memory/search", params={"q": "meeting", "index_id": mem.index_id}, headers=mem.bob())
    assert [(r["id"], r["contested"], r["contested_with"]) for r in found.json()["data"]] == [
        (shared["id"], True, None)]


def test_mem_15_behaviour_records_may_be_personal_or_shared(mem: Mem, client: Any) -> None:
    rule = output(call(client, mem, "write", {"type": "behaviour", "text": "Answer in Dutch."}, mem.anna()))
    assert client.get(f"/memory/{rule['memory_id']}", headers=mem.anna()).json()["type"] == "behaviour"
    shared = mem.write(mem.nobody, "Answer politely.", type="behaviour")
    assert shared["subject"] is None and shared["type"] == "behaviour"
    assert set(mem.list(mem.bob(), type="behaviour")) == {shared["id"]}
