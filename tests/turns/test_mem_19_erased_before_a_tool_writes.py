"""MEM-19 inside a turn: a person erased after the turn was accepted never gets a record back through the turn's
write tool, whether she is the turn's person, its thread's owner or a participant its thread names. The tool's
write runs in a transaction of its own, which began after the erasure; what counts is when the turn began."""

from __future__ import annotations

from typing import Any

from backend.access.policy import writer_policy
from tests.helpers import Org, bearer
from tests.threads.util import group_policy, msg, new_thread
from tests.turns.conftest import anna


def _write_tool_store(client: Any, org: Org, policy: dict[str, Any]) -> tuple[str, str]:
    index_id = client.post("/indexes", headers=org.full, json={"name": "support"}).json()["id"]
    key = org.make_key(memory={"write_tool": True}, policy=policy)
    return index_id, str(key["secret"])


def _mentions(db: Any, who: str) -> int:
    """Rows of records and responses that still name `who` (as owner, in a label, or in their text)."""
    records = db.execute("SELECT count(*) FROM memory_records WHERE subject = %s OR labels::text LIKE %s OR "
                         "text ILIKE '%%canary%%'", (who, f'%"{who}"%')).fetchone()[0]
    responses = db.execute("SELECT count(*) FROM responses WHERE subject = %s OR labels::text LIKE %s",
                           (who, f'%"{who}"%')).fetchone()[0]
    return int(records) + int(responses)


def test_mem_19_the_turns_person_erased_before_its_write_tool_runs_gets_no_record(client, org, db, scripted):
    index_id, key = _write_tool_store(client, org, writer_policy())
    write = f"memory__{index_id}__write"
    erased: list[int] = []
    scripted.reply(tool_calls=[(write, {"type": "preference", "text": "Likes CANARYtea."})], before=lambda: (
        erased.append(client.delete("/subjects/anna", headers=org.admin).status_code)))
    scripted.reply("Noted.")
    response = client.post("/responses", headers=anna(org, key), json={
        "model": "scripted", "input": "I like CANARYtea.", "tools": [{"type": "tool", "name": write}]})
    assert erased == [200]
    assert response.status_code == 409 and response.json()["code"] == "subject_erased", response.text
    assert _mentions(db, "anna") == 0


def test_mem_19_a_participant_erased_during_a_turn_is_not_written_back_by_its_write_tool(
        client, org, db, scripted, settings):
    client.app.state.settings = settings.with_overrides(threads_group_reach_by_rule=True)
    policy = group_policy()
    policy["rules"] += writer_policy()["rules"][-1:]  # and memory writes
    index_id, key = _write_tool_store(client, org, policy)
    write = f"memory__{index_id}__write"
    bert = bearer(key, "bert")
    thread = new_thread(client, bert, items=[msg("user", "Hello from Bert.")],
                        labels={"participants": ["bert", "carl"]})["id"]
    erased: list[int] = []
    scripted.reply(tool_calls=[(write, {"type": "preference", "text": "Likes CANARYtea."})], before=lambda: (
        erased.append(client.delete("/subjects/carl", headers=org.admin).status_code)))
    scripted.reply("Noted.")
    response = client.post("/responses", headers=bert, json={
        "model": "scripted", "input": "I like CANARYtea.", "thread_id": thread,
        "tools": [{"type": "tool", "name": write}]})
    assert erased == [200]
    assert response.status_code == 409 and response.json()["code"] == "subject_erased", response.text
    assert _mentions(db, "carl") == 0
    # Bert's response says why it failed, as the route did
    assert db.execute("SELECT status, error->>'code' FROM responses").fetchall() == [("failed", "subject_erased")]


def test_mem_19_a_writer_in_the_thread_erased_while_the_model_reads_her_words_leaves_no_answer(
        client, org, db, scripted, settings):
    """Carl wrote in Bert's thread and is no participant any more; the model reads his words, he is erased while it
    answers: Bert's answer, made of Carl's words, is not written into the thread (as a summary of them would not)."""
    client.app.state.settings = settings.with_overrides(threads_group_reach_by_rule=True)
    key = org.make_key(policy=group_policy())["secret"]
    bert, carl = bearer(key, "bert"), bearer(key, "carl")
    thread = new_thread(client, bert, items=[msg("user", "Hello from Bert.")],
                        labels={"participants": ["bert", "carl"]})["id"]
    assert client.post(f"/threads/{thread}/items", headers=carl,
                       json={"items": [msg("user", "My CANARYcode is 1234.")]}).status_code == 201
    relabelled = client.patch(f"/threads/{thread}", headers=bert, json={"labels": {"participants": ["bert"]}})
    assert relabelled.status_code == 200, relabelled.text
    erased: list[int] = []
    scripted.reply("Carl's CANARYcode is 1234.", before=lambda: erased.append(
        client.delete("/subjects/carl", headers=org.admin).status_code))
    response = client.post("/responses", headers=bert, json={"model": "scripted", "input": "What was Carl's code?",
                                                              "thread_id": thread})
    assert erased == [200]
    assert "CANARYcode" in str(scripted.requests[0]["messages"])  # the model did read his words
    assert response.status_code == 409 and response.json()["code"] == "subject_erased", response.text
    assert db.execute("SELECT count(*) FROM thread_items WHERE body::text ILIKE '%%canary%%'").fetchone()[0] == 0
