"""EXT-12, EXT-13, MEM-17: episodes and lessons of a session, written with the session's last window against the
scripted model server."""

from __future__ import annotations

import json
from typing import Any

from tests.extraction.util import answer, conversation, new, new_store, records, run_now, set_switch, switch_on
from tests.helpers import assert_error, bearer
from tests.threads.util import append, msg

EPISODE = {"intent": "Anna wanted a summary of her notes.", "text": "The assistant summarised them and she thanked it.",
           "result": "succeeded", "result_basis": "reaction"}


def _turn(org: Any, scripted: Any, agent_id: str, person: str, text: str) -> dict[str, Any]:
    scripted.reply("Here is the summary.")
    response = org.client.post("/responses", headers=bearer(org.key, person),
                               json={"agent_id": agent_id, "input": text})
    assert response.status_code == 201, response.text
    return dict(response.json())


def _agent(org: Any) -> str:
    response = org.client.post("/agents", headers=org.admin,
                               json={"name": "notes", "model": "scripted", "instructions": "Help."})
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def _episodes(org: Any, index_id: str, person: str | None) -> list[dict[str, Any]]:
    """The person's own episodes (None: the shared ones)."""
    return [r for r in records(org, index_id, person, type="episode") if r["subject"] == person]


def test_ext_12_an_episode_has_every_structured_field_and_opens_with_the_intent(client, org, db, scripted,
                                                                                run_jobs):
    index_id = new_store(org)
    before = conversation(org, "anna", ("user", "An old question."))  # settled before episodes were switched on
    switch_on(org, index_id, episodes=True)
    agent_id = _agent(org)
    turn = _turn(org, scripted, agent_id, "anna", "Summarise my notes, please.")
    tid = turn["thread_id"]
    items = append(client, bearer(org.key, "anna"), tid,
                   {"type": "function_call", "call_id": "c1", "name": "notes_search", "arguments": "{}"},
                   {"type": "function_call_output", "call_id": "c1", "output": "", "error": "timeout"},
                   {"type": "function_call", "call_id": "c2", "name": "notes_read", "arguments": "{}"},
                   {"type": "function_call_output", "call_id": "c2", "output": "three notes"},
                   msg("user", "Thanks, that is exactly what I needed!"))
    scripted.reset()
    for _ in range(2):
        scripted.reply(answer(new("fact", "Anna keeps notes."), episode=EPISODE))
    run_now(org, index_id)
    run_jobs()
    episodes = _episodes(org, index_id, "anna")
    assert len(episodes) == 1, episodes
    episode = episodes[0]
    part = episode["episode"]
    thread_items = client.get(f"/threads/{tid}/items", headers=bearer(org.key, "anna")).json()["items"]
    assert set(part) == {"from", "to", "thread_id", "first_item_id", "last_item_id", "intent", "result",
                          "result_basis", "response_ids", "agent_id", "agent_version", "tools"}
    assert part["thread_id"] == tid and part["thread_id"] != before
    assert part["first_item_id"] == thread_items[0]["id"] and part["last_item_id"] == items[-1]["id"]
    assert part["from"] <= part["to"]
    assert (part["intent"], part["result"], part["result_basis"]) == (EPISODE["intent"], "succeeded", "reaction")
    assert part["response_ids"] == [turn["id"]]
    assert (part["agent_id"], part["agent_version"]) == (agent_id, 1)
    assert part["tools"] == [{"name": "notes_search", "status": "failed"},
                             {"name": "notes_read", "status": "completed"}]
    assert episode["text"].startswith(EPISODE["intent"])
    assert (episode["subject"], episode["confidence"], episode["source"]) == ("anna", 1.0, "extraction")
    # Only the session's window asked for an episode.
    formats = [r["response_format"]["json_schema"]["schema"]["properties"] for r in scripted.requests]
    assert sorted("episode" in f for f in formats) == [False, True]
    # MEM-17: extracted records keep thread, window and first/last item.
    for record in records(org, index_id, "anna"):
        provenance = record["provenance"]
        assert set(provenance) == {"thread_id", "window_id", "first_item_id", "last_item_id"}
        window = db.execute("SELECT thread_id FROM extraction_windows WHERE id = %s",
                            (provenance["window_id"],)).fetchone()
        assert window == (provenance["thread_id"],)
        history = client.get(f"/memory/{record['id']}/history", headers=org.full)
        assert history.status_code == 200, history.text


def test_ext_12_result_basis_follows_the_order_reaction_records_judge(client, org, db, scripted, run_jobs):
    index_id = new_store(org)
    switch_on(org, index_id, episodes=True, threads="all")
    agent_id = _agent(org)
    scripted.fail(400)  # the last response of this session fails: `records`, whatever the model judged
    org.client.post("/responses", headers=bearer(org.key, "bob"), json={"agent_id": agent_id, "input": "Book a room."})
    assert db.execute("SELECT status FROM responses WHERE subject = 'bob'").fetchall() == [("failed",)]
    judged = conversation(org, None, ("user", "What time does the office close?"), ("assistant", "At six."))
    scripted.reset()
    judge = {"text": "A question was answered.", "result": "succeeded", "result_basis": "judge"}
    for _ in range(2):
        scripted.reply(answer(episode=judge))
    run_now(org, index_id)
    run_jobs()
    shared = _episodes(org, index_id, None)
    assert [(e["episode"]["thread_id"], e["episode"]["result"], e["episode"]["result_basis"]) for e in shared] == [
        (judged, "succeeded", "judge")]
    assert "intent" not in shared[0]["episode"] and shared[0]["subject"] is None
    bob = _episodes(org, index_id, "bob")
    assert [(e["episode"]["result"], e["episode"]["result_basis"]) for e in bob if e["subject"] == "bob"] == [
        ("failed", "records")]


def test_ext_13_lessons_need_episodes_422(client, org, scripted):
    index_id = new_store(org)
    assert_error(set_switch(org, index_id, lessons=True), 422, "validation_failed", "lessons")


def test_ext_13_lessons_of_a_session_are_confirmed_not_duplicated_and_none_for_nobody(client, org, db, scripted,
                                                                                     run_jobs):
    index_id = new_store(org)
    switch_on(org, index_id, episodes=True, lessons=True, threads="all")
    tid = conversation(org, "anna", ("user", "Plan my week."), ("assistant", "Done."))
    conversation(org, None, ("user", "Plan the team's week."))
    lessons = [{"kind": "workflow", "basis": "reaction", "text": "Anna likes plans as short lists."},
               {"kind": "pitfall", "basis": "model", "text": "Long answers lose her."}]
    for _ in range(2):
        scripted.reply(answer(episode={"text": "A plan was made.", "result": "succeeded", "result_basis": "judge"},
                              lessons=lessons))
    run_now(org, index_id)
    run_jobs()
    found = records(org, index_id, "anna", type="lesson")
    assert sorted((r["text"], r["metadata"]["lesson"]["kind"], r["metadata"]["lesson"]["basis"]) for r in found) == [
        ("Anna likes plans as short lists.", "workflow", "reaction"), ("Long answers lose her.", "pitfall", "model")]
    assert records(org, index_id, None, type="lesson") == []
    # A later session noting the same lesson in the same words confirms it.
    append(client, bearer(org.key, "anna"), tid, msg("user", "And next week?"))
    scripted.reply(answer(episode={"text": "Again.", "result": "succeeded", "result_basis": "judge"},
                          lessons=[{"kind": "workflow", "basis": "reaction",
                                    "text": "anna likes plans as short lists"}]))
    run_now(org, index_id)
    run_jobs()
    again = records(org, index_id, "anna", type="lesson")
    assert sorted((r["text"], r["confirmations"]) for r in again) == [
        ("Anna likes plans as short lists.", 1), ("Long answers lose her.", 0)]
    assert len(_episodes(org, index_id, "anna")) == 2


def test_ext_13_nearly_the_same_words_confirm_only_when_the_index_embeds(client, org, db, scripted, run_jobs):
    response = client.post("/indexes", headers=org.full, json={"name": "embedded", "embedding": {
        "provider": "hashing", "model": "hashing", "dimensions": 256}})
    assert response.status_code == 201, response.text
    embedded = response.json()["id"]
    plain = new_store(org, "plain")
    for index_id in (embedded, plain):
        switch_on(org, index_id, episodes=True, lessons=True)
    first = {"kind": "workflow", "basis": "model", "text": "Anna prefers plans written as short lists"}
    near = {"kind": "workflow", "basis": "model", "text": "Anna prefers plans written as short lists always"}
    tid = conversation(org, "anna", ("user", "Plan my week."))
    episode = {"text": "Planned.", "result": "succeeded", "result_basis": "judge"}
    for index_id in (embedded, plain):
        scripted.reply(answer(episode=episode, lessons=[first]))
        run_now(org, index_id)
    run_jobs()
    append(client, bearer(org.key, "anna"), tid, msg("user", "And next week?"))
    for index_id in (embedded, plain):
        scripted.reply(answer(episode=episode, lessons=[near]))
        run_now(org, index_id)
    run_jobs()
    assert [(r["text"], r["confirmations"]) for r in records(org, embedded, "anna", type="lesson")] == [
        (first["text"], 1)]
    assert sorted(r["text"] for r in records(org, plain, "anna", type="lesson")) == [first["text"], near["text"]]
    assert json.dumps(scripted.requests)  # every call was made through the scripted server
