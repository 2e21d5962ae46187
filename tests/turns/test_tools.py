"""TRN-3, TRN-4, MEM-17, MEM-20 … MEM-22: platform tools run in the turn, client functions go back to the caller,
the working-state tool writes when the turn completes."""

from __future__ import annotations

import json
import time
from typing import Any

from backend.access.policy import writer_policy
from tests.helpers import Org, assert_error, bearer
from tests.turns.conftest import anna, items, turn


def _store(client: Any, org: Org, **memory: Any) -> tuple[str, str]:
    index_id = client.post("/indexes", headers=org.full, json={"name": "support"}).json()["id"]
    key = org.make_key(memory={"retrieval_tool": True, "write_tool": True, **memory}, policy=writer_policy())
    return index_id, str(key["secret"])


def test_mem_17_a_write_tool_call_in_a_turn_keeps_a_record_with_provenance(client: Any, org: Org, scripted: Any
                                                                          ) -> None:
    index_id, key = _store(client, org)
    write = f"memory__{index_id}__write"
    scripted.reply(tool_calls=[(write, {"type": "preference", "text": "Prefers tea over coffee"})]).reply("Noted.")
    answer = turn(client, anna(org, key), input="I prefer tea.", tools=[{"type": "tool", "name": write}])
    assert answer["status"] == "completed" and answer["output_text"] == "Noted."
    call, result, _ = answer["output"]
    assert (call["type"], call["name"], result["type"]) == ("function_call", write, "function_call_output")
    written = json.loads(result["output"])
    assert written["action"] == "created" and written["type"] == "preference"
    # the tool definition the model got, and the tool result it read next
    assert [t["function"]["name"] for t in scripted.requests[0]["tools"]] == [write]
    assert "preference" in json.dumps(scripted.requests[0]["tools"][0]["function"]["parameters"])
    assert scripted.messages(1)[-1] == {"role": "tool", "tool_call_id": call["call_id"], "content": result["output"]}
    record = client.get(f"/memory/{written['memory_id']}", headers=anna(org, key)).json()
    assert record["subject"] == "anna" and record["source"] == "model"
    assert record["provenance"] == {"thread_id": answer["thread_id"], "response_id": answer["id"],
                                    "item_id": call["id"]}
    kept = items(client, anna(org, key), answer["thread_id"])
    assert [i["type"] for i in kept] == ["message", "function_call", "function_call_output", "message"]
    assert kept[2]["output"] == result["output"]
    trace = client.get(f"/responses/{answer['id']}", headers=anna(org, key)).json()["trace"]
    assert [(t["name"], t["status"]) for t in trace["tools"]] == [(write, "completed")]
    assert trace["rounds"] == 2


def test_plt_13_the_model_reads_a_write_tools_result_without_waiting_for_the_records_vector(
        client: Any, org: Org, scripted: Any, db: Any) -> None:
    """A turn's write tool keeps its record at once, without a vector, and the model reads the result while the
    embedding provider is still busy; the record gets its vector after the commit, of the index's model."""
    setting = {"provider": "openai_compatible", "model": "slow-embeddings", "dimensions": 64, "base_url": scripted.url}
    created = client.post("/indexes", headers=org.full, json={"name": "support", "embedding": setting})
    assert created.status_code == 201, created.text
    index_id = created.json()["id"]
    key = str(org.make_key(memory={"write_tool": True}, policy=writer_policy())["secret"])
    write = f"memory__{index_id}__write"

    def kept() -> list[tuple[str, str | None]]:
        return db.execute("SELECT text, embedding_model FROM memory_records WHERE index_id = %s",
                          (index_id,)).fetchall()

    seen: list[Any] = []

    def once_committed() -> None:  # the record's insert may still be finishing when the model reads its result
        deadline = time.monotonic() + 10
        while not kept() and time.monotonic() < deadline:
            time.sleep(0.01)
        seen.append(kept())

    scripted.embeddings_open.clear()  # the embedding provider answers nothing until the end of the turn
    scripted.reply(tool_calls=[(write, {"type": "preference", "text": "Prefers tea over coffee"})])
    scripted.reply("Noted.", before=once_committed)
    answer = turn(client, anna(org, key), input="I prefer tea.", tools=[{"type": "tool", "name": write}])
    assert answer["status"] == "completed" and json.loads(answer["output"][1]["output"])["action"] == "created"
    assert seen == [[("Prefers tea over coffee", None)]]  # when the model read the tool's result
    scripted.embeddings_open.set()
    deadline = time.monotonic() + 20
    while kept() != [("Prefers tea over coffee", "openai_compatible/slow-embeddings/64")]:
        assert time.monotonic() < deadline, kept()
        time.sleep(0.05)
    assert [request["input"] for request in scripted.embedding_requests] == [["Prefers tea over coffee"]]


def test_plt_13_a_hashing_vector_is_kept_with_the_write_tools_record(client: Any, org: Org, scripted: Any,
                                                                      db: Any) -> None:
    """A vector made in microseconds (`hashing`) is not left for later: the record is written with it, in the
    statement that writes its first history version (the row was never updated since), and it is the vector the
    provider makes for its text."""
    from backend.providers.embeddings import HashingEmbeddings

    setting = {"provider": "hashing", "model": "hashing", "dimensions": 64}
    created = client.post("/indexes", headers=org.full, json={"name": "support", "embedding": setting})
    assert created.status_code == 201, created.text
    index_id = created.json()["id"]
    key = str(org.make_key(memory={"write_tool": True}, policy=writer_policy())["secret"])
    write = f"memory__{index_id}__write"

    scripted.reply(tool_calls=[(write, {"type": "preference", "text": "Prefers tea over coffee"})]).reply("Noted.")
    answer = turn(client, anna(org, key), input="I prefer tea.", tools=[{"type": "tool", "name": write}])
    assert answer["status"] == "completed" and json.loads(answer["output"][1]["output"])["action"] == "created"
    time.sleep(0.3)  # a vector left for later would be written by now
    [(text, model, vector, unchanged)] = db.execute(
        "SELECT r.text, r.embedding_model, r.embedding::text, r.xmin::text = v.xmin::text FROM memory_records r "
        "JOIN memory_versions v ON v.org_id = r.org_id AND v.record_id = r.id WHERE r.index_id = %s",
        (index_id,)).fetchall()
    assert (text, model, unchanged) == ("Prefers tea over coffee", "hashing/hashing/64", True)
    expected = HashingEmbeddings(64).embed_one("Prefers tea over coffee")
    assert [round(float(v), 5) for v in str(vector).strip("[]").split(",")] == [round(v, 5) for v in expected]
    assert scripted.embedding_requests == []


def test_trn_3_the_model_reads_a_write_tools_result_while_its_record_is_inserted(
        client: Any, org: Org, scripted: Any, db: Any, database_url: str) -> None:
    """A write tool answers the model once everything that may refuse the call has run. The record's insert (its
    vector's insertion into the HNSW index is the slow part) and the commit finish while the model reads the
    result, and the turn ends only after them. Here the insert waits for a table lock the test holds until the
    model has been asked again."""
    import threading

    import psycopg
    from sqlalchemy.engine import make_url

    index_id, key = _store(client, org)
    write = f"memory__{index_id}__write"
    holder = psycopg.connect(make_url(database_url).set(drivername="postgresql").render_as_string(
        hide_password=False))
    holder.execute("LOCK TABLE memory_records IN SHARE MODE")  # reads go on; an insert waits
    released = threading.Lock()

    def release() -> None:
        with released:
            if not holder.closed:
                holder.rollback()
                holder.close()

    def insert_waiting() -> bool:
        return bool(db.execute("SELECT count(*) FROM pg_locks WHERE relation = 'memory_records'::regclass "
                               "AND NOT granted").fetchone()[0])

    seen: list[bool] = []

    def when_asked_again() -> None:
        deadline = time.monotonic() + 5
        while not insert_waiting() and time.monotonic() < deadline:
            time.sleep(0.01)
        seen.append(insert_waiting())
        release()

    safety = threading.Timer(8, release)  # code that waits for the insert before answering the model ends too
    safety.start()
    try:
        scripted.reply(tool_calls=[(write, {"type": "preference", "text": "Prefers tea over coffee"})])
        scripted.reply("Noted.", before=when_asked_again)
        answer = turn(client, anna(org, key), input="I prefer tea.", tools=[{"type": "tool", "name": write}])
    finally:
        safety.cancel()
        release()
    assert seen == [True]  # the model was asked again while the record's insert waited
    assert answer["status"] == "completed" and answer["output_text"] == "Noted."
    written = json.loads(answer["output"][1]["output"])
    record = client.get(f"/memory/{written['memory_id']}", headers=anna(org, key))
    assert record.status_code == 200 and record.json()["text"] == "Prefers tea over coffee"


def test_trn_3_a_write_that_fails_after_the_model_read_its_result_fails_the_turn(
        client: Any, org: Org, scripted: Any, db: Any) -> None:
    """Should the record's insert fail once the model has read "created", the turn fails (TRN-11) and its thread
    keeps the call with an error instead of the result: nothing claims a record that is not there."""
    index_id, key = _store(client, org)
    write = f"memory__{index_id}__write"
    db.execute("CREATE FUNCTION test_refuse_insert() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
               "IF NEW.text = 'Refuse me' THEN RAISE EXCEPTION 'refused by the test'; END IF; RETURN NEW; END $$")
    db.execute("CREATE TRIGGER test_refuse_insert BEFORE INSERT ON memory_records FOR EACH ROW "
               "EXECUTE FUNCTION test_refuse_insert()")
    try:
        scripted.reply(tool_calls=[(write, {"type": "fact", "text": "Refuse me"})]).reply("Saved it.")
        answer = turn(client, anna(org, key), input="Remember: refuse me.", tools=[{"type": "tool", "name": write}])
    finally:
        db.execute("DROP TRIGGER test_refuse_insert ON memory_records")
        db.execute("DROP FUNCTION test_refuse_insert()")
    assert answer["status"] == "failed" and answer["error"]["code"] == "tool_write_failed", answer
    assert "after the model was told it succeeded" in answer["error"]["message"]
    assert json.loads(scripted.messages(1)[-1]["content"])["action"] == "created"  # what the model read
    assert db.execute("SELECT count(*) FROM memory_records WHERE text = 'Refuse me'").fetchone()[0] == 0
    kept = items(client, anna(org, key), answer["thread_id"])
    assert [i["type"] for i in kept][:3] == ["message", "function_call", "function_call_output"]
    assert kept[2]["output"] == "" and kept[2]["error"] == answer["error"]["message"]
    trace = client.get(f"/responses/{answer['id']}", headers=anna(org, key)).json()["trace"]
    assert [(t["name"], t["status"]) for t in trace["tools"]] == [(write, "error")]


def test_mem_21_a_refused_type_is_a_tool_error_the_model_reads(client: Any, org: Org, scripted: Any) -> None:
    index_id, key = _store(client, org)
    write = f"memory__{index_id}__write"
    scripted.reply(tool_calls=[(write, {"type": "episode", "text": "x"})]).reply("Sorry.")
    answer = turn(client, anna(org, key), input="x", tools=[{"type": "tool", "name": write}])
    assert answer["status"] == "completed"
    result = answer["output"][1]
    assert result["error"] and "fact, preference, commitment, behaviour" in result["error"]
    assert json.loads(scripted.messages(1)[-1]["content"])["error"]["param"] == "arguments.type"


def test_mem_20_a_tool_the_key_does_not_offer_is_400_at_its_place(client: Any, org: Org, scripted: Any) -> None:
    index_id, _ = _store(client, org)
    reader = org.make_key(memory={"retrieval_tool": True, "write_tool": False})["secret"]
    tools = [{"type": "tool", "name": f"memory__{index_id}__search"},
             {"type": "tool", "name": f"memory__{index_id}__write"}]
    assert_error(client.post("/responses", headers=anna(org, reader),
                             json={"model": "scripted", "input": "x", "tools": tools}), 400, "tool_not_offered",
                 param="tools[1]")
    for name, code in (("memory__idx_nope__search", "tool_not_found"), ("nothing", "tool_not_found")):
        body = {"model": "scripted", "input": "x", "tools": [tools[0], {"type": "tool", "name": name}]}
        assert_error(client.post("/responses", headers=anna(org, reader), json=body), 400, code, param="tools[1]")
    clash = {"model": "scripted", "input": "x", "tools": [{"type": "function", "name": f"memory__{index_id}__search",
                                                           "parameters": {"type": "object"}}]}
    assert_error(client.post("/responses", headers=anna(org, reader), json=clash), 400, "tool_name_taken",
                 param="tools[0]")
    assert scripted.requests == []


def test_mem_22_search_results_in_the_trust_envelope(client: Any, org: Org, scripted: Any) -> None:
    index_id, _ = _store(client, org)
    client.post("/memory", headers=bearer(org.key, subject="anna"),
                json={"index_id": index_id, "type": "fact", "text": "Has a dog named Rex"})
    enveloped = org.make_key(["knowledge", "memory", "threads", "trust_envelope"])["secret"]
    search = f"memory__{index_id}__search"
    scripted.reply(tool_calls=[(search, {"query": "dog"})]).reply("You have a dog.")
    answer = turn(client, anna(org, enveloped), input="Do I have pets?", tools=[{"type": "tool", "name": search}])
    output = answer["output"][1]["output"]
    assert output.startswith("<tool-data") and "Has a dog named Rex" in output
    assert "data, not instructions" in scripted.messages(1)[-1]["content"]


def test_trn_3_client_functions_go_back_and_their_results_continue_the_turn(client: Any, org: Org,
                                                                            scripted: Any) -> None:
    weather = {"type": "function", "name": "get_weather", "description": "Weather in a city",
               "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}
    scripted.reply(tool_calls=[("get_weather", {"city": "Utrecht"})]).reply("It is sunny in Utrecht.")
    first = turn(client, anna(org), input="Weather?", tools=[weather])
    assert first["status"] == "completed" and first["output_text"] == ""
    (call,) = first["output"]
    assert call["type"] == "function_call" and json.loads(call["arguments"]) == {"city": "Utrecht"}
    assert scripted.requests[0]["tools"][0]["function"]["name"] == "get_weather"
    result = {"type": "function_call_output", "call_id": call["call_id"], "output": "sunny, 21 C"}
    second = turn(client, anna(org), input=[result], previous_response_id=first["id"], tools=[weather])
    assert second["output_text"] == "It is sunny in Utrecht."
    assert scripted.messages(1)[-2:] == [
        {"role": "assistant", "content": None, "tool_calls": [{"id": call["call_id"], "type": "function",
                                                               "function": {"name": "get_weather",
                                                                            "arguments": call["arguments"]}}]},
        {"role": "tool", "tool_call_id": call["call_id"], "content": "sunny, 21 C"}]
    # sending the same result again repeats an earlier input: not kept twice
    third = turn(client, anna(org), input=[result, {"role": "user", "content": "Thanks"}],
                 previous_response_id=second["id"], tools=[weather])
    kept = items(client, anna(org), first["thread_id"])
    assert [i["type"] for i in kept].count("function_call_output") == 1
    assert third["status"] == "completed"


def test_trn_3_a_result_answering_no_call_is_400(client: Any, org: Org, scripted: Any, db: Any) -> None:
    first = turn(client, anna(org), input="Hello")
    orphan = {"type": "function_call_output", "call_id": "call_nobody", "output": "x"}
    for body in ({"input": [orphan], "thread_id": first["thread_id"]}, {"input": [orphan], "store": False}):
        response = client.post("/responses", headers=anna(org), json={"model": "scripted", **body})
        assert_error(response, 400, "orphan_function_output", param="input[0].call_id")
    # with the whole conversation sent, the call in the same input answers it
    whole = [{"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
             {"type": "function_call_output", "call_id": "c1", "output": "done"}]
    assert turn(client, anna(org), input=whole, store=False)["status"] == "completed"
    assert db.execute("SELECT count(*) FROM thread_items").fetchone()[0] == 2


def test_trn_3_an_unknown_tool_is_told_to_the_model_and_an_endless_loop_is_stopped(client: Any, org: Org,
                                                                                   scripted: Any, settings: Any
                                                                                   ) -> None:
    scripted.reply(tool_calls=[("launch_rockets", {})]).reply("I cannot do that.")
    answer = turn(client, anna(org), input="Launch!")
    assert answer["status"] == "completed" and "launch_rockets" in answer["output"][1]["error"]
    assert "no tool named" in scripted.messages(1)[-1]["content"]
    index_id, key = _store(client, org)
    search = f"memory__{index_id}__search"
    for _ in range(settings.turn_max_tool_rounds + 1):
        scripted.reply(tool_calls=[(search, {"query": "again"})])
    looping = turn(client, anna(org, key), input="Loop", tools=[{"type": "tool", "name": search}])
    assert looping["status"] == "failed" and looping["error"]["code"] == "tool_rounds_exceeded"
    kept = items(client, anna(org, key), looping["thread_id"])
    # the rounds that ran are kept; the answer that asked for one more round runs nothing
    assert [i["type"] for i in kept].count("function_call") == settings.turn_max_tool_rounds
    assert len(scripted.requests) == 2 + settings.turn_max_tool_rounds + 1
    assert all(i["response_id"] == looping["id"] for i in kept)


def _state_tool() -> list[dict[str, str]]:
    return [{"type": "tool", "name": "builtin__update_working_state"}]


def test_trn_4_the_working_state_tool_writes_when_the_turn_completes(client: Any, org: Org, scripted: Any) -> None:
    scripted.reply(tool_calls=[("builtin__update_working_state", {"patch": {"goal": "move house", "step": 1}})])
    scripted.reply("Planned.")
    answer = turn(client, anna(org), input="Plan the move.", tools=_state_tool())
    call, result, _ = answer["output"]
    assert json.loads(call["arguments"]) == {"patch": {"goal": "move house", "step": 1}}
    assert json.loads(result["output"]) == {"version": 1, "size": len('{"goal":"move house","step":1}')}
    state = client.get(f"/threads/{answer['thread_id']}/state", headers=anna(org)).json()
    assert state["state"] == {"goal": "move house", "step": 1} and state["version"] == 1
    # a patch that is not an object is refused at call time: error, empty output, nothing written
    scripted.reply(tool_calls=[("builtin__update_working_state", {"patch": "nope"})]).reply("ok")
    refused = turn(client, anna(org), input="x", tools=_state_tool(), thread_id=answer["thread_id"])
    assert refused["output"][1]["output"] == "" and refused["output"][1]["error"]
    assert client.get(f"/threads/{answer['thread_id']}/state", headers=anna(org)).json()["version"] == 1


def test_trn_4_a_failed_turn_writes_no_state(client: Any, org: Org, scripted: Any) -> None:
    scripted.reply(tool_calls=[("builtin__update_working_state", {"patch": {"goal": "x"}})])
    scripted.fail(500).fail(500).fail(500)
    answer = turn(client, anna(org), input="Plan.", tools=_state_tool())
    assert answer["status"] == "failed" and answer["error"]["code"] == "model_error"
    assert client.get(f"/threads/{answer['thread_id']}/state", headers=anna(org)).json()["version"] == 0


def test_trn_4_the_turn_s_write_is_dropped_when_the_application_wrote_meanwhile(client: Any, org: Org,
                                                                                 scripted: Any) -> None:
    first = turn(client, anna(org), input="Hello")
    thread_id = first["thread_id"]

    def application_writes() -> None:
        written = client.put(f"/threads/{thread_id}/state", json={"state": {"mine": True}}, headers=anna(org))
        assert written.status_code == 200, written.text

    scripted.reply(tool_calls=[("builtin__update_working_state", {"patch": {"goal": "x"}})])
    scripted.reply("Done.", before=application_writes)
    answer = turn(client, anna(org), input="Plan.", tools=_state_tool(), thread_id=thread_id)
    assert answer["status"] == "completed"
    state = client.get(f"/threads/{thread_id}/state", headers=anna(org)).json()
    assert state["state"] == {"mine": True} and state["version"] == 1
    events = client.get("/audit?action=thread.working_state_dropped", headers=org.admin).json()["data"]
    assert len(events) == 1 and events[0]["object_id"] == thread_id
    assert events[0]["detail"]["response_id"] == answer["id"]


def test_trn_4_a_write_made_while_the_model_composed_its_first_answer_drops_the_turn_s_write(
        client: Any, org: Org, scripted: Any) -> None:
    """The turn's patches apply to the state the model was shown: an application write made before the tool's first
    call (while the model answered the first request) is not overwritten by a merge onto it."""
    first = turn(client, anna(org), input="Hello")
    thread_id = first["thread_id"]
    shown = client.put(f"/threads/{thread_id}/state", json={"state": {"goal": "move"}}, headers=anna(org))
    assert shown.status_code == 200, shown.text

    def application_writes() -> None:
        written = client.put(f"/threads/{thread_id}/state", json={"state": {"mine": True}}, headers=anna(org))
        assert written.status_code == 200, written.text

    scripted.reply(tool_calls=[("builtin__update_working_state", {"patch": {"step": 1}})],
                   before=application_writes)
    scripted.reply("Done.")
    answer = turn(client, anna(org), input="Plan.", tools=_state_tool(), thread_id=thread_id)
    assert answer["status"] == "completed"
    assert scripted.messages(1)[0]["content"].endswith('{"goal": "move"}')  # the state the model was shown
    assert json.loads(answer["output"][1]["output"])["version"] == 2  # the version after the one it was shown
    state = client.get(f"/threads/{thread_id}/state", headers=anna(org)).json()
    assert state["state"] == {"mine": True} and state["version"] == 2
    events = client.get("/audit?action=thread.working_state_dropped", headers=org.admin).json()["data"]
    assert len(events) == 1 and events[0]["object_id"] == thread_id
    assert events[0]["detail"] == {"response_id": answer["id"], "read_version": 1, "current_version": 2}
    read = client.get(f"/responses/{answer['id']}", headers=anna(org)).json()
    assert read["trace"]["working_state"] == "dropped"


def test_trn_4_the_state_tool_needs_tooling_threads_and_a_kept_turn(client: Any, org: Org, scripted: Any) -> None:
    for caps, missing in ((["knowledge", "memory", "threads"], "tooling"),
                          (["knowledge", "memory", "tooling"], "threads")):
        key = org.make_key(caps)["secret"]
        body = {"model": "scripted", "input": "x", "tools": _state_tool()}
        refused = assert_error(client.post("/responses", headers=anna(org, key), json=body), 403, "capability_missing",
                               param="tools[0]")
        assert f"`{missing}`" in refused["message"]
    body = {"model": "scripted", "input": "x", "tools": _state_tool(), "store": False}
    assert_error(client.post("/responses", headers=anna(org), json=body), 400, "tool_needs_stored_turn")


def test_trn_5_a_turn_on_an_agent_uses_its_model_instructions_block_and_state_schema(client: Any, org: Org,
                                                                                     scripted: Any) -> None:
    index_id, key = _store(client, org)
    client.post("/memory", headers=bearer(org.key, subject="anna"),
                json={"index_id": index_id, "type": "fact", "text": "Has a dog named Rex"})
    schema = {"type": "object", "properties": {"step": {"type": "integer"}}, "additionalProperties": False}
    agent = client.post("/agents", headers=org.admin, json={
        "name": "planner", "model": "scripted", "instructions": "You plan moves.",
        "memory_injection": {"index_id": index_id}, "working_state_schema": schema})
    assert agent.status_code == 201, agent.text
    agent_id = agent.json()["id"]
    scripted.reply(tool_calls=[("builtin__update_working_state", {"patch": {"goal": "x"}})])
    scripted.reply(tool_calls=[("builtin__update_working_state", {"patch": {"step": 2}})]).reply("Planned.")
    answer = turn(client, anna(org, key), input="Plan.", agent_id=agent_id, model=None, tools=_state_tool())
    assert answer["agent_id"] == agent_id and answer["agent_version"] == 1 and answer["model"] == "scripted"
    sent = scripted.messages(0)
    assert sent[0] == {"role": "system", "content": "You plan moves."}
    assert "Has a dog named Rex" in sent[1]["content"]  # the agent's block, though the key has none
    refused, accepted = answer["output"][1], answer["output"][3]
    assert refused["error"] and "working_state_schema" in refused["error"] and refused["output"] == ""
    assert json.loads(accepted["output"]) == {"version": 1, "size": len('{"step":2}')}
    assert client.get(f"/threads/{answer['thread_id']}/state", headers=anna(org, key)).json()["state"] == {"step": 2}
    read = client.get(f"/responses/{answer['id']}", headers=anna(org, key)).json()
    assert (read["agent_id"], read["agent_version"]) == (agent_id, 1)  # kept with the response, not only answered
    trace = read["trace"]
    assert trace["agent"] == {"id": agent_id, "version": 1}
    both = {"model": "scripted", "agent_id": agent_id, "input": "x"}
    assert_error(client.post("/responses", headers=anna(org, key), json=both), 422, param="model")
    assert_error(client.post("/responses", headers=anna(org, key), json={"agent_id": "agt_nope", "input": "x"}),
                 404, param="agent_id")


def test_thr_5_a_response_and_a_record_a_turn_makes_in_a_labelled_thread_start_with_its_labels(
        client: Any, org: Org, scripted: Any) -> None:
    index_id, key = _store(client, org)
    write = f"memory__{index_id}__write"
    labelled = client.post("/threads", json={"labels": {"topic": "verhuizing"}}, headers=anna(org, key))
    assert labelled.status_code == 201, labelled.text
    kept: list[dict[str, Any]] = []
    answers: list[dict[str, Any]] = []
    for thread_id in (labelled.json()["id"], None):
        scripted.reply(tool_calls=[(write, {"type": "fact", "text": f"Moves in May ({thread_id})"})]).reply("Noted.")
        where = {"thread_id": thread_id} if thread_id else {}
        answer = turn(client, anna(org, key), input="We move in May.", tools=[{"type": "tool", "name": write}],
                      **where)
        memory_id = json.loads(answer["output"][1]["output"])["memory_id"]
        kept.append(client.get(f"/memory/{memory_id}", headers=anna(org, key)).json())
        answers.append(answer)
    assert kept[0]["labels"] == answers[0]["labels"] == {"topic": "verhuizing"}
    assert kept[1]["labels"] == answers[1]["labels"] == {}  # a thread the turn started has none
    # The response keeps the labels it started with; who reaches it goes by its thread's labels as they are.
    relabelled = client.patch(f"/threads/{labelled.json()['id']}", json={"labels": {"topic": "verbouwing"}},
                              headers=anna(org, key))
    assert relabelled.status_code == 200, relabelled.text
    read = client.get(f"/responses/{answers[0]['id']}", headers=anna(org, key)).json()
    assert read["labels"] == {"topic": "verhuizing"}


def test_thr_11_a_turn_without_an_agent_keeps_the_state_to_the_thread_s_agent_s_schema(
        client: Any, org: Org, scripted: Any) -> None:
    """The model's patches in a thread an agent answered fit that agent's schema, as the application's PUT must,
    also in a turn that names a model instead of the agent."""
    _, key = _store(client, org)
    schema = {"type": "object", "properties": {"step": {"type": "integer"}}, "additionalProperties": False}
    created = client.post("/agents", headers=org.admin, json={"name": "planner", "model": "scripted",
                                                              "instructions": "You plan.",
                                                              "working_state_schema": schema})
    assert created.status_code == 201, created.text
    agent = created.json()
    scripted.reply("Planned.")
    first = turn(client, anna(org, key), input="Plan.", agent_id=agent["id"], model=None)
    scripted.reply(tool_calls=[("builtin__update_working_state", {"patch": {"goal": "x"}})])
    scripted.reply(tool_calls=[("builtin__update_working_state", {"patch": {"step": 3}})]).reply("Done.")
    plain = turn(client, anna(org, key), input="Next step.", thread_id=first["thread_id"], tools=_state_tool())
    refused, accepted = plain["output"][1], plain["output"][3]
    assert refused["error"] and "working_state_schema" in refused["error"] and refused["output"] == ""
    assert json.loads(accepted["output"])["version"] == 1
    assert client.get(f"/threads/{first['thread_id']}/state", headers=anna(org, key)).json()["state"] == {"step": 3}
