"""TRN-1, TRN-2, TRN-7: turns kept in threads, what the model is sent and in which order, reading responses."""

from __future__ import annotations

import json
from typing import Any

from backend.access.policy import writer_policy
from backend.errors import THREADS_MISSING_MESSAGE
from tests.helpers import Org, assert_error, bearer, eventually
from tests.turns.conftest import anna, items, turn


def test_trn_1_a_turn_creates_a_thread_and_continues_it(client: Any, org: Org, scripted: Any) -> None:
    scripted.reply("Hi Anna, how can I help?").reply("Your first message was a greeting.").reply("Third.")
    first = turn(client, anna(org), input="Hello")
    assert first["status"] == "completed" and first["output_text"] == "Hi Anna, how can I help?"
    assert first["usage"] == {"input_tokens": 11, "output_tokens": 7, "total_tokens": 18}
    thread_id = first["thread_id"]
    assert thread_id.startswith("thr_") and first["id"].startswith("resp_")
    second = turn(client, anna(org), input="What did I say first?", previous_response_id=first["id"])
    assert second["thread_id"] == thread_id
    assert scripted.messages(1) == [
        {"role": "user", "content": "Hello"}, {"role": "assistant", "content": "Hi Anna, how can I help?"},
        {"role": "user", "content": "What did I say first?"}]
    # previous_response_id may name any response of the thread: the turn continues at its end (no fork)
    third = turn(client, anna(org), input="And now?", previous_response_id=first["id"])
    assert [m["content"] for m in scripted.messages(2)][-2:] == ["Your first message was a greeting.", "And now?"]
    fourth = turn(client, anna(org), input="By thread id", thread_id=thread_id)
    fifth = turn(client, anna(org), input="By conversation", conversation=thread_id)
    kept = items(client, anna(org), thread_id)
    assert [i["position"] for i in kept] == list(range(1, 11))
    assert [i["response_id"] for i in kept] == [r["id"] for r in (first, second, third, fourth, fifth)
                                                for _ in range(2)]
    assert [(i["role"], i["subject"]) for i in kept[:2]] == [("user", "anna"), ("assistant", "anna")]


def test_trn_1_one_thread_field_at_most(client: Any, org: Org, scripted: Any) -> None:
    first = turn(client, anna(org), input="Hello")
    for pair in ({"thread_id": first["thread_id"], "conversation": first["thread_id"]},
                 {"previous_response_id": first["id"], "thread_id": first["thread_id"]}):
        response = client.post("/responses", json={"model": "scripted", "input": "x", **pair}, headers=anna(org))
        assert_error(response, 400, "conflicting_thread_fields")
    assert len(scripted.requests) == 1


def test_trn_1_without_threads_nothing_is_kept_and_thread_fields_get_the_plt_6_404(client: Any, org: Org,
                                                                                   scripted: Any) -> None:
    plain = org.make_key(["knowledge", "memory"])["secret"]
    answer = turn(client, anna(org, plain), input="Hello")
    assert answer["status"] == "completed" and answer["thread_id"] is None
    for field in ("thread_id", "previous_response_id", "conversation", "working_state_from"):
        response = client.post("/responses", json={"model": "scripted", "input": "x", field: "thr_x"},
                               headers=anna(org, plain))
        body = assert_error(response, 404)
        assert body["message"] == THREADS_MISSING_MESSAGE
    assert client.get(f"/responses/{answer['id']}", headers=anna(org, plain)).json()["message"] == \
        THREADS_MISSING_MESSAGE
    # a key with threads does not find it either: nothing was kept
    assert_error(client.get(f"/responses/{answer['id']}", headers=anna(org)), 404)
    # an unknown thread with `threads` is a plain 404
    unknown = client.post("/responses", json={"model": "scripted", "input": "x", "thread_id": "thr_nope"},
                          headers=anna(org))
    assert assert_error(unknown, 404)["message"] != THREADS_MISSING_MESSAGE


def test_trn_1_store_false_keeps_nothing_but_usage(client: Any, org: Org, scripted: Any) -> None:
    answer = turn(client, anna(org), input="Hello", store=False)
    assert answer["thread_id"] is None and answer["output_text"] == scripted.DEFAULT
    assert client.get("/threads", headers=org.admin).json()["data"] == []
    assert_error(client.get(f"/responses/{answer['id']}", headers=anna(org)), 404)
    usage = client.get("/usage", headers=org.admin).json()
    assert usage["totals"] == {"input_tokens": 11, "output_tokens": 7, "calls": 1}
    assert usage["by_key"] == {org.key_id: {"input_tokens": 11, "output_tokens": 7, "calls": 1}}


def test_trn_1_bad_requests_are_refused_before_anything_is_kept(client: Any, org: Org, scripted: Any, db: Any
                                                                 ) -> None:
    cases = [({"input": "x", "stream": True}, 422, "stream"), ({"input": "x", "model": None}, 422, "model"),
             ({"input": "x", "model": "not-offered"}, 422, "model"), ({"input": ""}, 422, "input"),
             ({"input": [{"role": "user", "content": [{"type": "input_audio",
                                                       "input_audio": {"data": "AAAA", "format": "wav"}}]}]},
              422, "input[0]"),
             ({"input": [{"type": "message", "role": "boss", "content": "x"}]}, 422, "input[0].role"),
             ({"input": "x", "unknown": 1}, 422, "unknown"), ({"input": "x", "timezone": "Mars/Base"}, 422,
                                                               "timezone"),
             ({"input": "x", "user": "bob"}, 400, "X-Core-Subject")]
    for body, status, param in cases:
        body.setdefault("model", "scripted")
        if body["model"] is None:
            del body["model"]
        assert_error(client.post("/responses", json=body, headers=anna(org)), status, param=param)
    assert db.execute("SELECT count(*) FROM thread_items").fetchone()[0] == 0
    assert db.execute("SELECT count(*) FROM responses").fetchone()[0] == 0
    assert scripted.requests == []


def test_plt_7_the_user_field_names_the_person(client: Any, org: Org, scripted: Any) -> None:
    answer = turn(client, org.full, input="Hello", user="bob")
    assert items(client, bearer(org.key, subject="bob"), answer["thread_id"])[0]["subject"] == "bob"
    assert_error(client.get(f"/threads/{answer['thread_id']}", headers=anna(org)), 404)


def _memory_setup(client: Any, org: Org) -> tuple[str, str]:
    index_id = client.post("/indexes", headers=org.full, json={"name": "support"}).json()["id"]
    for subject, body in (("anna", {"type": "behaviour", "text": "Answer in Dutch"}),
                          ("anna", {"type": "fact", "text": "Has a dog named Rex"}),
                          (None, {"type": "fact", "text": "The office closes at six"})):
        headers = bearer(org.key, subject=subject) if subject else org.full
        created = client.post("/memory", headers=headers, json={"index_id": index_id, **body})
        assert created.status_code == 201, created.text
    key = org.make_key(memory={"injection": {"index_id": index_id}, "write_tool": True}, policy=writer_policy())
    return index_id, str(key["secret"])


def test_trn_2_context_order_and_the_preview_gives_the_same_block(client: Any, org: Org, scripted: Any,
                                                                   db: Any) -> None:
    index_id, key = _memory_setup(client, org)
    first = turn(client, anna(org, key), input="Hello", instructions="Be brief.")
    state = client.put(f"/threads/{first['thread_id']}/state", json={"state": {"goal": "plan a trip"}},
                       headers=anna(org, key))
    assert state.status_code == 200, state.text
    second = turn(client, anna(org, key), input="Where do I go?", instructions="Be brief.",
                  thread_id=first["thread_id"])
    sent = scripted.messages(1)
    assert [m["role"] for m in sent] == ["system", "system", "system", "user", "assistant", "user"]
    assert sent[0]["content"] == "Be brief."
    assert json.loads(sent[1]["content"].split("\n", 1)[1]) == {"goal": "plan a trip"}
    block = sent[2]["content"]
    assert "Answer in Dutch" in block and "Has a dog named Rex" in block and "The office closes at six" in block
    assert [m["content"] for m in sent[3:]] == ["Hello", scripted.DEFAULT, "Where do I go?"]
    key_id = client.get("/key", headers=bearer(key)).json()["id"]
    preview = client.post(f"/memory/stores/{index_id}/injection/preview", headers=org.admin,
                          json={"subject": {"id": "anna"}, "key_id": key_id, "input": "Where do I go?"})
    assert preview.status_code == 200, preview.text
    assert preview.json()["block"] == block  # byte for byte
    # INJ-11: the turn keeps the preview's account of its block; the list of each left-out record is the
    # previewer's alone (DSH-6), the stored trace counts them
    kept = client.get(f"/responses/{second['id']}", headers=anna(org, key)).json()["trace"]["injection"]
    assert "left_out" in preview.json()["trace"] and "left_out" not in kept
    assert kept == {k: v for k, v in preview.json()["trace"].items() if k != "left_out"}
    # recall counts: bumped by the two turns (written within a second of them, INJ-8), never by the preview
    assert eventually(lambda: {r[0] for r in db.execute("SELECT recall_count FROM memory_records")} == {2})
    trace = client.get(f"/responses/{first['id']}", headers=anna(org, key)).json()["trace"]
    assert trace["injection"]["enabled"] is True and len(trace["injection"]["injected_ids"]) == 3
    assert trace["model"]["provider"] == "openai_compatible" and trace["timings"]["total_ms"] > 0


def test_trn_7_a_response_reads_back_with_its_trace_until_its_thread_is_deleted(client: Any, org: Org,
                                                                               scripted: Any, db: Any) -> None:
    answer = turn(client, anna(org), input="Hello", metadata={"ticket": "42"})
    read = client.get(f"/responses/{answer['id']}", headers=anna(org))
    assert read.status_code == 200, read.text
    doc = read.json()
    assert {k: doc[k] for k in ("id", "status", "output_text", "metadata")} == {
        "id": answer["id"], "status": "completed", "output_text": scripted.DEFAULT, "metadata": {"ticket": "42"}}
    assert doc["trace"]["usage"]["total_tokens"] == 18 and doc["trace_id"] == answer["trace_id"]
    # another person does not reach it
    assert_error(client.get(f"/responses/{answer['id']}", headers=bearer(org.key, subject="bob")), 404)
    assert client.delete(f"/threads/{answer['thread_id']}", headers=anna(org)).status_code == 204
    assert_error(client.get(f"/responses/{answer['id']}", headers=anna(org)), 404)
    row = db.execute("SELECT status, usage, output, trace, thread_id, metadata FROM responses").fetchone()
    assert row[0] == "completed" and row[1]["total_tokens"] == 18 and row[2:] == (None, None, None, None)


def test_mem_19_erasing_a_person_leaves_only_id_status_and_usage_of_her_responses(client: Any, org: Org,
                                                                                  scripted: Any, db: Any) -> None:
    turn(client, anna(org), input="Hello")
    turn(client, bearer(org.key, subject="bob"), input="Hi")
    erased = client.delete("/subjects/anna", headers=org.admin)
    assert erased.status_code == 200, erased.text
    assert erased.json()["counts"]["responses"] == 1
    rows = db.execute("SELECT subject, output IS NULL, usage->>'total_tokens' FROM responses "
                      "ORDER BY subject").fetchall()
    assert rows == [("bob", False, "18"), (None, True, "18")]


def test_mem_19_an_erased_person_s_responses_keep_no_key_agent_or_model_and_usage_is_unchanged(
        client: Any, org: Org, scripted: Any, db: Any) -> None:
    """Only id, status, usage and times stay of her responses; the usage report (PLT-18, per day, key and model)
    is read from the usage rows, so it does not change."""
    agent = client.post("/agents", headers=org.admin, json={"name": "helper", "model": "scripted",
                                                             "instructions": "Be brief."})
    assert agent.status_code == 201, agent.text
    hers = turn(client, anna(org), input="Hello", agent_id=agent.json()["id"], model=None)
    usage_before = client.get("/usage", headers=org.admin).json()
    assert client.delete("/subjects/anna", headers=org.admin).status_code == 200
    columns = ("key_id", "agent_id", "agent_version", "model", "subject", "thread_id", "output", "error", "trace",
               "metadata", "idempotency_owner", "idempotency_key", "request_digest")
    row = db.execute(f"SELECT {', '.join(columns)}, status, usage->>'total_tokens', created_at IS NOT NULL, "
                     "completed_at IS NOT NULL FROM responses WHERE id = %s", (hers["id"],)).fetchone()
    assert dict(zip(columns, row[:len(columns)], strict=True)) == dict.fromkeys(columns)
    assert row[len(columns):] == ("completed", "18", True, True)
    assert client.get("/usage", headers=org.admin).json() == usage_before
    assert usage_before["data"][0]["model"] == "scripted" and usage_before["totals"]["calls"] == 1


def test_mem_19_erasing_a_thread_s_owner_forgets_the_other_turns_in_her_thread_too(client: Any, org: Org,
                                                                                     scripted: Any, db: Any) -> None:
    """A turn in her thread made by a request naming nobody holds her conversation as much as her own turns do."""
    hers = turn(client, anna(org), input="My secret plan")
    theirs = turn(client, org.admin, input="Summarise it", thread_id=hers["thread_id"])
    assert db.execute("SELECT subject FROM responses WHERE id = %s", (theirs["id"],)).fetchone() == (None,)
    erased = client.delete("/subjects/anna", headers=org.admin)
    assert erased.status_code == 200, erased.text
    assert erased.json()["counts"]["responses"] == 2
    rows = db.execute("SELECT output, trace, thread_id, usage->>'total_tokens' FROM responses ORDER BY id").fetchall()
    assert rows == [(None, None, None, "18"), (None, None, None, "18")]


def test_thr_12_a_turn_starting_a_thread_copies_her_state_and_one_continuing_a_thread_is_refused(
        client: Any, org: Org, scripted: Any) -> None:
    source = turn(client, anna(org), input="Plan the trip")
    put = client.put(f"/threads/{source['thread_id']}/state", json={"state": {"trip": "Lisbon"}}, headers=anna(org))
    assert put.status_code == 200, put.text
    copied = turn(client, anna(org), input="Where am I going?", working_state_from=source["thread_id"])
    assert copied["thread_id"] != source["thread_id"]
    assert scripted.messages()[0]["content"].endswith('\n{"trip": "Lisbon"}')  # the copy reached the model
    state = client.get(f"/threads/{copied['thread_id']}/state", headers=anna(org)).json()
    assert state["state"] == {"trip": "Lisbon"} and state["version"] == 1
    before = len(scripted.requests)
    for field, value in (("thread_id", copied["thread_id"]), ("previous_response_id", copied["id"]),
                         ("conversation", copied["thread_id"])):
        refused = client.post("/responses", json={"model": "scripted", "input": "Again", field: value,
                                                  "working_state_from": source["thread_id"]}, headers=anna(org))
        assert_error(refused, 400, "state_copy_needs_new_thread", param="working_state_from")
    refused = client.post("/responses", json={"model": "scripted", "input": "Again", "store": False,
                                              "working_state_from": source["thread_id"]}, headers=anna(org))
    assert_error(refused, 400, "state_copy_needs_new_thread", param="working_state_from")
    assert len(scripted.requests) == before
    assert len(items(client, anna(org), copied["thread_id"])) == 2


def test_plt_2_an_administrator_s_read_of_a_response_is_audited_and_a_key_s_is_not(client: Any, org: Org,
                                                                                   scripted: Any, db: Any) -> None:
    answer = turn(client, anna(org), input="Hello")
    assert client.get(f"/responses/{answer['id']}", headers=anna(org)).status_code == 200
    assert client.get(f"/responses/{answer['id']}", headers=org.admin).status_code == 200
    reads = db.execute("SELECT actor_type, object_id, detail FROM audit_events WHERE action = 'thread.read' "
                       "AND detail->>'route' = 'GET /responses/{id}'").fetchall()
    assert [(r[0], r[1], r[2]["ids"]) for r in reads] == [("admin", answer["thread_id"], [answer["id"]])]


def test_plt_9_another_person_s_response_is_as_absent_as_one_that_does_not_exist(client: Any, org: Org,
                                                                               scripted: Any) -> None:
    """PLT-9/PLT-10: continuing from a response whose thread she cannot see answers exactly the 404 of an unknown
    response; nothing in it (such as the thread's id) tells her the response exists."""
    bobs = turn(client, bearer(org.key, subject="bob"), input="My salary is private")
    answers = {}
    for response_id in (bobs["id"], "resp_nope"):
        refused = client.post("/responses", json={"model": "scripted", "input": "x",
                                                  "previous_response_id": response_id}, headers=anna(org))
        answers[response_id] = assert_error(refused, 404, param="previous_response_id")
        assert response_id in answers[response_id]["message"]
    hidden, unknown = answers[bobs["id"]], answers["resp_nope"]
    assert json.dumps(hidden).replace(bobs["id"], "resp_nope") == json.dumps(unknown)
    assert bobs["thread_id"] not in json.dumps(hidden)


def test_plt_7_a_turn_s_user_is_a_subject_id_checked_like_any_body_field(client: Any, org: Org,
                                                                         scripted: Any) -> None:
    """PLT-7/PLT-14: `user` of POST /responses and POST /messages is 1–256 printable characters; anything else is
    422 at `user`, before anything is kept or the model is asked."""
    turn_body = {"model": "scripted", "input": "x"}
    messages_body = {"model": "scripted", "max_tokens": 16, "messages": [{"role": "user", "content": "x"}]}
    for route, body in (("/responses", turn_body), ("/messages", messages_body)):
        for user in ("a" * 257, "", "anna\nbob"):
            refused = client.post(route, json={**body, "user": user}, headers=org.full)
            assert_error(refused, 422, "validation_failed", param="user")
        named = client.post(route, json={**body, "user": "a" * 256}, headers=org.full)
        assert named.status_code in (200, 201), named.text
    assert len(scripted.requests) == 2
