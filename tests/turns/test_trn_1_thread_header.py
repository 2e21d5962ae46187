"""TRN-1, TRN-9, PLT-6, TRN-8: `X-Core-Thread-Id` on POST /responses means what `thread_id` means, as on
POST /messages: it continues that thread, an unknown id is 404, a key without `threads` gets PLT-6's 404, a body
naming another thread is 400, and an Idempotency-Key's request includes it."""

from __future__ import annotations

from typing import Any

from tests.helpers import ALL_CAPS, Org, assert_error, assert_threads_missing, bearer
from tests.turns.conftest import anna, items, turn


def _with_header(client: Any, org: Org, thread: str, headers: dict[str, str] | None = None, **body: Any) -> Any:
    body.setdefault("model", "scripted")
    body.setdefault("input", "Again.")
    return client.post("/responses", json=body, headers={**(headers or anna(org)), "X-Core-Thread-Id": thread})


def _threads(db: Any) -> int:
    return int(db.execute("SELECT count(*) FROM threads").fetchone()[0])


def test_plt_6_a_turn_naming_x_core_thread_id_without_threads_answers_the_threads_404(
        client: Any, org: Org, scripted: Any, db: Any) -> None:
    thread_id = turn(client, anna(org), input="Hello.")["thread_id"]
    asked = len(scripted.requests)
    no_threads = org.make_key(capabilities=[c for c in ALL_CAPS if c != "threads"])["secret"]
    assert_threads_missing(_with_header(client, org, thread_id, bearer(no_threads, subject="anna")))
    assert_threads_missing(_with_header(client, org, "thr_unknown", bearer(no_threads, subject="anna")))
    assert len(scripted.requests) == asked  # no model was asked: nothing ran
    assert db.execute("SELECT count(*) FROM usage_events").fetchone()[0] == asked


def test_trn_1_x_core_thread_id_on_responses_continues_that_thread(client: Any, org: Org, scripted: Any,
                                                                   db: Any) -> None:
    first = turn(client, anna(org), input="Hello.")
    thread_id = first["thread_id"]
    scripted.reply("Continued.")
    answer = _with_header(client, org, thread_id)
    assert answer.status_code == 201, answer.text
    assert answer.json()["thread_id"] == thread_id and answer.headers["x-core-thread-id"] == thread_id
    # the model saw the thread, and the turn was kept in it
    assert [m["content"] for m in scripted.messages(-1) if m["role"] == "user"] == ["Hello.", "Again."]
    assert [i["response_id"] for i in items(client, anna(org), thread_id)] == [first["id"]] * 2 + [
        answer.json()["id"]] * 2
    # the same thread in the header and in the body is one thread
    assert _with_header(client, org, thread_id, thread_id=thread_id).status_code == 201
    assert _with_header(client, org, thread_id, conversation={"id": thread_id}).status_code == 201
    assert _threads(db) == 1


def test_trn_1_an_unknown_or_conflicting_x_core_thread_id_starts_no_thread(client: Any, org: Org, scripted: Any,
                                                                          db: Any) -> None:
    first = turn(client, anna(org), input="Hello.")
    thread_id = first["thread_id"]
    other = turn(client, anna(org), input="Other.")["thread_id"]
    asked = len(scripted.requests)
    assert_error(_with_header(client, org, "thr_unknown"), 404, "not_found", "thread_id")
    # An empty header names no thread either (as `thread_id: ""`); it does not start a new one.
    assert_error(_with_header(client, org, ""), 404, "not_found", "thread_id")
    assert_error(_with_header(client, org, thread_id, thread_id=other), 400, "conflicting_thread_fields", "thread_id")
    assert_error(_with_header(client, org, thread_id, conversation=other), 400, "conflicting_thread_fields",
                 "conversation")
    assert_error(_with_header(client, org, thread_id, previous_response_id=first["id"]), 400,
                 "conflicting_thread_fields", "previous_response_id")
    assert len(scripted.requests) == asked and _threads(db) == 2
    assert len(items(client, anna(org), thread_id)) == 2


def test_trn_9_an_empty_x_core_thread_id_on_messages_starts_no_thread(client: Any, org: Org, scripted: Any,
                                                                      db: Any) -> None:
    response = client.post("/messages", headers={**anna(org), "X-Core-Thread-Id": ""},
                           json={"model": "scripted", "max_tokens": 10, "messages": [{"role": "user", "content": "x"}]})
    assert_error(response, 404, "not_found", "thread_id")
    assert scripted.requests == [] and _threads(db) == 0


def test_trn_8_a_repeat_naming_another_thread_in_the_header_is_another_request(client: Any, org: Org,
                                                                               scripted: Any) -> None:
    one = turn(client, anna(org), input="One.")["thread_id"]
    two = turn(client, anna(org), input="Two.")["thread_id"]
    keyed = {**anna(org), "Idempotency-Key": "k-header"}
    first = _with_header(client, org, one, keyed)
    assert first.status_code == 201 and first.json()["thread_id"] == one, first.text
    asked = len(scripted.requests)
    assert _with_header(client, org, one, keyed).json() == first.json()
    # the header means `thread_id`: the same thread named in the body is the same request
    same = client.post("/responses", headers=keyed, json={"model": "scripted", "input": "Again.", "thread_id": one})
    assert same.status_code == 201 and same.json() == first.json(), same.text
    assert_error(_with_header(client, org, two, keyed), 422, "idempotency_key_reused", "Idempotency-Key")
    assert len(scripted.requests) == asked
    assert len(items(client, anna(org), two)) == 2
