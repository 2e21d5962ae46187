"""TRN-8 and TRN-11: a repeated Idempotency-Key replays what was kept even when the agent or model is gone since,
and a turn whose process stopped does not hold its key (409) forever."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import msgspec

from backend.config import Settings
from backend.domains.turns.abandoned import longest
from backend.domains.turns.idempotency import digest
from shared.schemas.turns import ResponseCreate
from tests.helpers import Org, assert_error
from tests.turns.conftest import anna


def _post(client: Any, org: Org, key: str | None, body: dict[str, Any]) -> Any:
    return client.post("/responses", json=body, headers={**anna(org), **({"Idempotency-Key": key} if key else {})})


def test_trn_8_a_replay_answers_the_kept_response_after_its_model_is_withdrawn(client: Any, org: Org,
                                                                               scripted: Any) -> None:
    scripted.reply("Kept answer.")
    body = {"model": "scripted", "input": "Hi"}
    first = _post(client, org, "k-model", body)
    assert first.status_code == 201 and first.json()["output_text"] == "Kept answer.", first.text
    assert client.delete("/admin/models/scripted", headers=org.admin).status_code == 204
    again = _post(client, org, "k-model", body)
    assert again.status_code == 201, again.text
    assert again.json() == first.json()
    assert len(scripted.requests) == 1
    # The body is still compared, and a new turn still needs an offered model.
    assert_error(_post(client, org, "k-model", {**body, "input": "Other"}), 422, "idempotency_key_reused",
                 param="Idempotency-Key")
    assert_error(_post(client, org, "k-new", body), 422, "model_not_offered", param="model")


def test_trn_8_a_replay_answers_the_kept_response_after_its_agent_is_deleted(client: Any, org: Org,
                                                                             scripted: Any) -> None:
    agent = client.post("/agents", headers=org.admin, json={"name": "helper", "model": "scripted",
                                                             "instructions": "Be brief."})
    assert agent.status_code == 201, agent.text
    body = {"agent_id": agent.json()["id"], "input": "Hi"}
    first = _post(client, org, "k-agent", body)
    assert first.status_code == 201 and first.json()["agent_id"] == agent.json()["id"], first.text
    assert client.delete(f"/agents/{agent.json()['id']}", headers=org.admin).status_code == 204
    again = _post(client, org, "k-agent", body)
    assert again.status_code == 201, again.text
    assert again.json() == first.json()
    assert len(scripted.requests) == 1


def _left_running(db: Any, org: Org, response_id: str, key: str, body: dict[str, Any], age: timedelta,
                  thread_id: str | None = None) -> None:
    """What a process that stopped after accepting a turn leaves: its response row, `in_progress`, accepted `age`
    ago (a keyed turn keeps its input only with its answer, THR-4)."""
    db.execute("INSERT INTO responses (org_id, id, thread_id, key_id, subject, model, status, labels, "
               "idempotency_owner, idempotency_key, request_digest, created_at) VALUES (%s, %s, %s, %s, 'anna', "
               "'scripted', 'in_progress', '{}', %s, %s, %s, now() - %s)",
               (org.org_id, response_id, thread_id, org.key_id, f"{org.key_id}/anna", key,
                digest(msgspec.convert(body, ResponseCreate)), age))


def test_trn_11_a_turn_whose_process_stopped_fails_and_its_key_replays_the_failure(
        client: Any, org: Org, scripted: Any, db: Any, settings: Settings) -> None:
    body = {"model": "scripted", "input": "Hello"}
    bound = longest(settings)
    # Still within the longest a turn can run (model timeout, retries and tool rounds of the settings): running.
    _left_running(db, org, "resp_running", "k-running", body, bound - timedelta(minutes=1))
    assert_error(_post(client, org, "k-running", body), 409, "idempotency_in_flight", param="Idempotency-Key")
    assert db.execute("SELECT status FROM responses WHERE id = 'resp_running'").fetchone()[0] == "in_progress"

    _left_running(db, org, "resp_stopped", "k-stopped", body, bound + timedelta(minutes=1))
    again = _post(client, org, "k-stopped", body)
    assert again.status_code == 201, again.text
    doc = again.json()
    assert (doc["id"], doc["status"], doc["error"]["code"]) == ("resp_stopped", "failed", "internal_error")
    assert "stopped" in doc["error"]["message"] and doc["completed_at"] is not None
    row = db.execute("SELECT status, error->>'code', completed_at IS NOT NULL FROM responses "
                     "WHERE id = 'resp_stopped'").fetchone()
    assert row == ("failed", "internal_error", True)
    assert _post(client, org, "k-stopped", body).json() == doc  # replayed as any failed turn
    assert_error(_post(client, org, "k-stopped", {**body, "input": "Other"}), 422, "idempotency_key_reused")
    assert scripted.requests == []  # nothing was run again


def test_trn_11_reading_a_turn_whose_process_stopped_shows_it_failed(client: Any, org: Org, scripted: Any,
                                                                     db: Any, settings: Settings) -> None:
    thread = client.post("/threads", headers=anna(org), json={})
    assert thread.status_code == 201, thread.text
    _left_running(db, org, "resp_gone", "k-gone", {"model": "scripted", "input": "Hello"},
                  longest(settings) + timedelta(minutes=1), thread_id=thread.json()["id"])
    read = client.get("/responses/resp_gone", headers=anna(org))
    assert read.status_code == 200, read.text
    assert (read.json()["status"], read.json()["error"]["code"]) == ("failed", "internal_error")
    assert db.execute("SELECT status FROM responses WHERE id = 'resp_gone'").fetchone()[0] == "failed"
