"""TRN-11 with TRN-8: a turn failed as abandoned (accepted longer ago than any turn can run, turns/abandoned.py)
that finishes after all stays failed: its caller may have been told so, and sent the turn again. Nothing of its
end is kept (answer, tool calls, working state), but what it cost is: its usage rows and its usage on the
response. It answers the response as it stands."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

from backend.config import Settings
from backend.domains.turns.abandoned import longest
from tests.helpers import Org
from tests.turns.conftest import anna, items

SPENT = {"input_tokens": 11, "output_tokens": 7, "total_tokens": 18}


def _running(db: Any) -> str:
    """The id of the one turn running now, once its accepting transaction has committed."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        row = db.execute("SELECT id FROM responses WHERE status = 'in_progress'").fetchone()
        if row:
            return str(row[0])
        time.sleep(0.02)
    raise AssertionError("no turn is running")


def _age(db: Any, response_id: str, settings: Settings) -> None:
    """As if the turn was accepted longer ago than any turn can run (its process looks stopped)."""
    db.execute("UPDATE responses SET created_at = now() - %s WHERE id = %s",
               (longest(settings) + timedelta(minutes=1), response_id))


def test_trn_11_a_keyed_turn_failed_as_abandoned_that_finishes_stays_failed_and_keeps_its_cost(
        client: Any, org: Org, scripted: Any, db: Any, settings: Settings) -> None:
    keyed = {**anna(org), "Idempotency-Key": "k-late"}
    body = {"model": "scripted", "input": "Hello."}
    replays: list[Any] = []

    def abandoned_meanwhile() -> None:
        _age(db, _running(db), settings)
        replays.append(client.post("/responses", json=body, headers=keyed))  # the repeat fails it

    scripted.reply("Late answer.", before=abandoned_meanwhile)
    late = client.post("/responses", json=body, headers=keyed)
    assert replays[0].status_code == 201, replays[0].text
    failed = replays[0].json()
    assert (failed["status"], failed["error"]["code"]) == ("failed", "internal_error")
    assert late.status_code == 201, late.text
    doc = late.json()
    assert (doc["id"], doc["status"], doc["error"]) == (failed["id"], "failed", failed["error"])
    assert doc["output"] == [] and doc["usage"] == SPENT
    # nothing of its end in the thread: a keyed turn keeps its input with its answer (THR-4), so neither is there
    assert items(client, anna(org), doc["thread_id"]) == []
    row = db.execute("SELECT status, usage, output FROM responses WHERE id = %s", (doc["id"],)).fetchone()
    assert row == ("failed", SPENT, None)
    # its cost is metered, once, and its key replays the same failure, with that usage
    assert db.execute("SELECT response_id, input_tokens, output_tokens FROM usage_events").fetchall() == [
        (doc["id"], 11, 7)]
    assert client.post("/responses", json=body, headers=keyed).json() == doc
    assert len(scripted.requests) == 1


def test_trn_11_a_turn_read_as_abandoned_that_finishes_writes_no_state_and_no_answer(
        client: Any, org: Org, scripted: Any, db: Any, settings: Settings) -> None:
    first = client.post("/responses", json={"model": "scripted", "input": "Hello."}, headers=anna(org)).json()
    thread_id = first["thread_id"]
    read: list[Any] = []

    def abandoned_meanwhile() -> None:
        response_id = _running(db)
        _age(db, response_id, settings)
        read.append(client.get(f"/responses/{response_id}", headers=anna(org)))  # the read fails it

    scripted.reply(tool_calls=[("builtin__update_working_state", {"patch": {"goal": "move house"}})])
    scripted.reply("Planned.", before=abandoned_meanwhile)
    late = client.post("/responses", headers=anna(org), json={
        "model": "scripted", "input": "Plan the move.", "thread_id": thread_id,
        "tools": [{"type": "tool", "name": "builtin__update_working_state"}]})
    assert read[0].status_code == 200 and read[0].json()["status"] == "failed", read[0].text
    assert late.status_code == 201, late.text
    doc = late.json()
    assert doc["status"] == "failed" and doc["error"]["code"] == "internal_error" and doc["output"] == [], doc
    assert doc["usage"] == {name: 2 * n for name, n in SPENT.items()}  # two model calls
    # the input was kept when the turn was accepted (TRN-11); its tool call and answer are not
    kept = items(client, anna(org), thread_id)
    assert [(i["type"], i["response_id"]) for i in kept] == [("message", first["id"])] * 2 + [("message", doc["id"])]
    state = client.get(f"/threads/{thread_id}/state", headers=anna(org)).json()
    assert (state["state"], state["version"]) == ({}, 0)
    assert client.get(f"/responses/{doc['id']}", headers=anna(org)).json()["usage"] == doc["usage"]
    usage = client.get("/usage", headers=org.admin).json()["totals"]
    assert (usage["calls"], usage["input_tokens"], usage["output_tokens"]) == (3, 33, 21)
    assert doc["error"]["message"].startswith("The process running this turn stopped")
