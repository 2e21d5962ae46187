"""TRN-8 and TRN-11: idempotent turns, and a model that is down, slow, failing, rate limiting or malformed."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import psycopg
import pytest

from backend.config import Settings
from tests.helpers import Org, assert_error, bearer
from tests.turns.conftest import anna, items, turn


@pytest.fixture
def settings(tmp_path: Path, database_url: str) -> Settings:
    """A short model timeout and one retry, so the faults below take seconds."""
    return Settings(database_url=database_url, data_dir=tmp_path / "data", secret="test-secret-" + "x" * 20,
                    model_timeout_seconds=1.0, model_max_retries=1)


def _post(client: Any, org: Org, key: str | None, **body: Any) -> Any:
    headers = {**anna(org), **({"Idempotency-Key": key} if key else {})}
    return client.post("/responses", json={"model": "scripted", **body}, headers=headers)


def test_trn_8_the_same_key_and_body_replay_the_answer(client: Any, org: Org, scripted: Any, db: Any) -> None:
    scripted.reply("Only once.")
    first = _post(client, org, "k-1", input="Hello")
    again = _post(client, org, "k-1", input="Hello")
    assert first.status_code == again.status_code == 201
    assert again.json() == first.json() and again.headers["x-core-thread-id"] == first.json()["thread_id"]
    assert len(scripted.requests) == 1
    assert db.execute("SELECT count(*) FROM thread_items").fetchone()[0] == 2
    assert_error(_post(client, org, "k-1", input="Something else"), 422, "idempotency_key_reused",
                 param="Idempotency-Key")
    # keys are per credential: another key may use the same name
    other = org.make_key()["secret"]
    response = client.post("/responses", json={"model": "scripted", "input": "Hello"},
                           headers={**anna(org, other), "Idempotency-Key": "k-1"})
    assert response.status_code == 201 and response.json()["id"] != first.json()["id"]
    assert_error(_post(client, org, "k-2", input="Hello", store=False), 422, "idempotency_unkept")


def test_trn_8_a_key_name_of_one_person_never_answers_another_on_the_same_key(client: Any, org: Org,
                                                                             scripted: Any) -> None:
    """One application key serves many people: Bob choosing the name Anna chose gets a turn of his own, never her
    stored answer or her thread."""
    scripted.reply("Anna's private answer.").reply("Bob's answer.")
    hers = _post(client, org, "retry-1", input="Hello")
    bobs = client.post("/responses", json={"model": "scripted", "input": "Hello"},
                       headers={**bearer(org.key, subject="bob"), "Idempotency-Key": "retry-1"})
    assert hers.status_code == bobs.status_code == 201
    assert bobs.json()["id"] != hers.json()["id"] and bobs.json()["thread_id"] != hers.json()["thread_id"]
    assert bobs.json()["output_text"] == "Bob's answer."
    assert _post(client, org, "retry-1", input="Hello").json() == hers.json()
    assert len(scripted.requests) == 2


def test_trn_8_an_erased_person_s_key_names_are_forgotten(client: Any, org: Org, scripted: Any, db: Any) -> None:
    scripted.reply("Before.").reply("After.")
    first = _post(client, org, "k-erase", input="Hello")
    assert client.delete("/subjects/anna", headers=bearer(org.key)).status_code in (200, 204)
    kept = db.execute("SELECT idempotency_owner, idempotency_key FROM responses WHERE id = %s",
                      (first.json()["id"],)).fetchone()
    assert kept == (None, None)
    again = _post(client, org, "k-erase", input="Hello")
    assert again.status_code == 201 and again.json()["output_text"] == "After."


def test_trn_8_a_repeat_while_the_first_runs_is_409(client: Any, org: Org, scripted: Any) -> None:
    seen: list[Any] = []
    scripted.reply("Slow answer.", before=lambda: seen.append(_post(client, org, "k-busy", input="Hello")))
    first = _post(client, org, "k-busy", input="Hello")
    assert first.status_code == 201
    assert_error(seen[0], 409, "idempotency_in_flight", param="Idempotency-Key")
    assert _post(client, org, "k-busy", input="Hello").json() == first.json()


def test_trn_8_a_repeat_accepted_at_the_same_moment_is_409_and_writes_nothing(
        client: Any, org: Org, scripted: Any, db: Any) -> None:
    """Neither request has committed when both look the key up: the second waits on the first's row and answers
    409 (not a 500 from the unique index), keeping no thread, item or response of its own."""
    before = db.execute("SELECT (SELECT count(*) FROM threads), (SELECT count(*) FROM thread_items), "
                        "(SELECT count(*) FROM responses)").fetchone()
    with psycopg.connect(db.info.dsn) as first:  # the first request, holding its uncommitted row
        first.execute("INSERT INTO responses (org_id, id, key_id, model, status, idempotency_owner, "
                      "idempotency_key, request_digest, created_at) VALUES (%s, 'resp_first', %s, 'scripted', "
                      "'in_progress', %s, 'k-race', 'digest', now())", (org.org_id, org.key_id, f"{org.key_id}/anna"))
        answers: list[Any] = []
        second = threading.Thread(target=lambda: answers.append(_post(client, org, "k-race", input="Hello")))
        second.start()
        second.join(timeout=1.0)
        assert second.is_alive(), "the second request must wait for the first one's row"
        first.commit()
    second.join(timeout=30)
    assert_error(answers[0], 409, "idempotency_in_flight", param="Idempotency-Key")
    after = db.execute("SELECT (SELECT count(*) FROM threads), (SELECT count(*) FROM thread_items), "
                       "(SELECT count(*) FROM responses)").fetchone()
    assert after == (before[0], before[1], before[2] + 1)  # only the first request's row
    assert scripted.requests == []


def _failed_turn(client: Any, org: Org, code: str, **body: Any) -> dict[str, Any]:
    answer = turn(client, anna(org), input="Are you there?", **body)
    assert answer["status"] == "failed" and answer["error"]["code"] == code, answer
    assert answer["error"]["message"] and answer["output"] == []
    kept = items(client, anna(org), answer["thread_id"])
    assert [(i["type"], i["response_id"]) for i in kept] == [("message", answer["id"])]
    read = client.get(f"/responses/{answer['id']}", headers=anna(org)).json()
    assert read["status"] == "failed" and read["error"] == answer["error"]
    return answer


def test_trn_11_http_500_fails_the_turn_after_a_bounded_retry(client: Any, org: Org, scripted: Any) -> None:
    scripted.fail(500).fail(500)
    _failed_turn(client, org, "model_error")
    assert len(scripted.requests) == 2


def test_trn_11_a_slow_model_times_out(client: Any, org: Org, scripted: Any) -> None:
    scripted.stall(3).stall(3)
    _failed_turn(client, org, "model_timeout")


def test_trn_11_malformed_answers_fail_the_turn(client: Any, org: Org, scripted: Any) -> None:
    scripted.malformed()
    _failed_turn(client, org, "invalid_model_output")


def test_trn_11_a_429_is_retried_after_retry_after(client: Any, org: Org, scripted: Any) -> None:
    scripted.fail(429, headers={"Retry-After": "1"}).reply("Here now.")
    assert turn(client, anna(org), input="Hi")["output_text"] == "Here now."
    scripted.fail(429, headers={"Retry-After": "0"}).fail(429, headers={"Retry-After": "0"})
    _failed_turn(client, org, "rate_limited")


def test_trn_11_a_server_that_is_down(client: Any, org: Org, scripted: Any) -> None:
    created = client.post("/admin/models", headers=org.admin,
                          json={"id": "down", "provider": "openai_compatible", "base_url": "http://127.0.0.1:9/v1"})
    assert created.status_code == 201
    _failed_turn(client, org, "model_unavailable", model="down")


def test_trn_11_a_failed_turn_meters_what_it_spent_and_the_thread_goes_on(client: Any, org: Org,
                                                                          scripted: Any) -> None:
    scripted.fail(500).fail(500).reply("Back again.")
    failed = _failed_turn(client, org, "model_error")
    after = turn(client, anna(org), input="Retry", previous_response_id=failed["id"])
    assert after["output_text"] == "Back again."
    # the failed turn's input stays in what the model is sent next
    assert [m["content"] for m in scripted.messages(-1)] == ["Are you there?", "Retry"]
    assert client.get("/usage", headers=org.admin).json()["totals"]["calls"] == 2


def test_thr_6_a_thread_deleted_while_the_model_answers_keeps_nothing_of_the_turn(client: Any, org: Org,
                                                                                   scripted: Any, db: Any) -> None:
    """The answer is appended by the response's closing statement: a thread deleted meanwhile takes no items, and
    the turn answers the 404 of a thread that is gone instead of a completed response whose answer is nowhere."""
    first = turn(client, anna(org), input="Hello.")
    thread_id = first["thread_id"]
    deleted: list[int] = []
    scripted.reply("Hello again.", before=lambda: deleted.append(
        client.delete(f"/threads/{thread_id}", headers=anna(org)).status_code))
    response = _post(client, org, None, input="Again.", thread_id=thread_id)
    assert deleted == [204]
    assert_error(response, 404, param="thread_id")
    assert db.execute("SELECT count(*) FROM thread_items").fetchone()[0] == 0
    assert db.execute("SELECT status, thread_id, output FROM responses WHERE id <> %s",
                      (first["id"],)).fetchall() == [("failed", None, None)]


def test_trn_11_an_accepting_commit_that_fails_ends_the_turn_and_keeps_nothing(client: Any, org: Org,
                                                                               scripted: Any, db: Any) -> None:
    """The accepting commit completes while the model is asked (turns/loop.py, `commit_first`). Refused at commit
    (here by a deferred trigger), the turn is an internal error: no thread, item or response is kept, whatever
    the model answered, and the next turn runs as usual."""
    db.execute("CREATE FUNCTION refuse_at_commit() RETURNS trigger LANGUAGE plpgsql AS "
               "$$ BEGIN RAISE EXCEPTION 'refused at commit'; END $$")
    db.execute("CREATE CONSTRAINT TRIGGER refuse_marked_turns AFTER INSERT ON responses DEFERRABLE INITIALLY "
               "DEFERRED FOR EACH ROW WHEN (NEW.metadata->>'refuse' = 'yes') EXECUTE FUNCTION refuse_at_commit()")
    assert_error(_post(client, org, None, input="Hello.", metadata={"refuse": "yes"}), 500, "internal_error")
    assert db.execute("SELECT (SELECT count(*) FROM threads), (SELECT count(*) FROM thread_items), "
                      "(SELECT count(*) FROM responses)").fetchone() == (0, 0, 0)
    assert turn(client, anna(org), input="Hello.")["status"] == "completed"
    assert db.execute("SELECT count(*) FROM responses WHERE status = 'completed'").fetchone()[0] == 1


def test_thr_4_a_turn_with_an_idempotency_key_keeps_its_message_and_answer_together(client: Any, org: Org,
                                                                                   scripted: Any) -> None:
    """Without a key the input takes its place when the turn is accepted, so a message written while the model
    answers lands between it and the answer; with a key both are kept together when the turn ends."""
    opened = client.post("/responses", json={"model": "scripted", "input": "Start"}, headers=anna(org)).json()
    thread_id = opened["thread_id"]
    seen: list[list[str]] = []

    def meanwhile(text: str) -> Any:
        def write() -> None:
            seen.append([_text(i) for i in items(client, anna(org), thread_id)])
            posted = client.post(f"/threads/{thread_id}/items", headers=anna(org),
                                 json={"items": [{"type": "message", "role": "user", "content": text}]})
            assert posted.status_code == 201, posted.text
        return write

    scripted.reply("Plain answer.", before=meanwhile("Written during the plain turn"))
    scripted.reply("Keyed answer.", before=meanwhile("Written during the keyed turn"))
    plain = client.post("/responses", json={"model": "scripted", "input": "Plain question", "thread_id": thread_id},
                        headers=anna(org))
    keyed = _post(client, org, "k-together", input="Keyed question", thread_id=thread_id)
    assert plain.status_code == keyed.status_code == 201
    assert "Plain question" in seen[0] and "Keyed question" not in seen[1]  # not in the thread while it runs
    kept = items(client, anna(org), thread_id)
    assert [_text(i) for i in kept][2:] == [
        "Plain question", "Written during the plain turn", "Plain answer.",
        "Written during the keyed turn", "Keyed question", "Keyed answer."]
    assert [i["position"] for i in kept] == list(range(1, 9))
    assert [i["response_id"] for i in kept[-2:]] == [keyed.json()["id"]] * 2
    # the keyed turn's context was the thread when it was accepted: without what was written while it ran
    assert [m["content"] for m in scripted.messages(-1)] == [
        "Start", scripted.DEFAULT, "Plain question", "Written during the plain turn", "Plain answer.",
        "Keyed question"]
    assert _post(client, org, "k-together", input="Keyed question", thread_id=thread_id).json() == keyed.json()


def _text(item: dict[str, Any]) -> str:
    content = item.get("content")
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content or [])
