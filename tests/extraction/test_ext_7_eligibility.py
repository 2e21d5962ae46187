"""EXT-7 (and EXT-2's `quiet_minutes` default): which threads a run reads. The switch's filters (`key_ids`: a
turn of one of those keys; `agent_ids`: one of those agents answered; both: both must hold) and the quiet rule
(the thread's last change at least `quiet_minutes` old), through the HTTP API, a real worker and the scripted
model server. A thread a run finds eligible gets windows; the others get none (and are not sent to the model)."""

from __future__ import annotations

import json
from typing import Any

from tests.extraction.util import answer, conversation, get_switch, new_store, run_now, switch_on, windows
from tests.helpers import bearer


def _extract_nothing(scripted: Any) -> None:
    """Turns get a plain answer, extraction an empty (valid) one, so every window read ends `ready`."""
    scripted.respond = lambda request: answer() if "response_format" in request else "Noted."


def _agent(org: Any, name: str) -> str:
    response = org.client.post("/agents", headers=org.admin,
                               json={"name": name, "model": "scripted", "instructions": "Help."})
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def _turn(org: Any, secret: str, person: str, text: str, *, agent_id: str | None = None,
          thread_id: str | None = None) -> str:
    """A turn of `person` sent with the key `secret` (answered by `agent_id`, else the model `scripted`); the
    thread's id."""
    body: dict[str, Any] = {"input": text, **({"agent_id": agent_id} if agent_id else {"model": "scripted"})}
    if thread_id:
        body["thread_id"] = thread_id
    response = org.client.post("/responses", headers=bearer(secret, person), json=body)
    assert response.status_code == 201, response.text
    return str(response.json()["thread_id"])


def _read_threads(db: Any, index_id: str) -> set[str]:
    """The threads a run cut windows from."""
    return {row[0] for row in windows(db, index_id)}


def _age(db: Any, thread_id: str, minutes: float) -> None:
    """Simulates time: the thread's last change and its items' times become `minutes` ago."""
    db.execute("UPDATE threads SET updated_at = now() - make_interval(secs => %s) WHERE id = %s",
               (minutes * 60, thread_id))
    db.execute("UPDATE thread_items SET created_at = now() - make_interval(secs => %s) WHERE thread_id = %s",
               (minutes * 60, thread_id))


def _run(org: Any, index_id: str, run_jobs: Any) -> None:
    run_now(org, index_id)
    run_jobs()


def test_ext_7_key_ids_reads_only_threads_with_a_turn_of_those_keys(client, org, db, scripted, run_jobs):
    index_id = new_store(org)
    _extract_nothing(scripted)
    other = org.make_key()
    by_org_key = _turn(org, org.key, "anna", "I like tea.")
    by_other_key = _turn(org, other["secret"], "bert", "I like coffee.")
    # Written by the filtered key, but through POST /threads only: no turn, so no filter matches it (decisions).
    items_only = conversation(org, "carl", ("user", "I like water."))
    # A turn of the org key, then items appended through the filtered key: the filtered key wrote no turn there.
    mixed = _turn(org, org.key, "dora", "I like juice.")
    assert client.post(f"/threads/{mixed}/items", headers=bearer(other["secret"], "dora"), json={
        "items": [{"type": "message", "role": "user", "content": "And lemonade."}]}).status_code == 201
    body = switch_on(org, index_id, filters={"key_ids": [other["id"]]})
    assert body["filters"] == {"key_ids": [other["id"]], "agent_ids": []}
    _run(org, index_id, run_jobs)
    assert _read_threads(db, index_id) == {by_other_key}
    assert not {by_org_key, items_only, mixed} & _read_threads(db, index_id)
    # The same threads without the filter are all eligible: the filter, not something else, kept them out.
    switch_on(org, index_id)
    _run(org, index_id, run_jobs)
    assert _read_threads(db, index_id) == {by_org_key, by_other_key, items_only, mixed}
    assert get_switch(org, index_id)["windows"] == {"ready": 4, "failed": 0, "queued": 0, "parked": 0}


def test_ext_7_agent_ids_reads_only_threads_one_of_those_agents_answered(client, org, db, scripted, run_jobs):
    index_id = new_store(org)
    _extract_nothing(scripted)
    chosen, other = _agent(org, "chosen"), _agent(org, "other")
    by_chosen = _turn(org, org.key, "anna", "Plan my week.", agent_id=chosen)
    by_other = _turn(org, org.key, "bert", "Plan my week.", agent_id=other)
    no_agent = _turn(org, org.key, "carl", "Plan my week.")
    # The other agent answered first, the chosen one later in the same thread: one of them answered.
    later = _turn(org, org.key, "dora", "Plan my week.", agent_id=other)
    assert _turn(org, org.key, "dora", "And my month.", agent_id=chosen, thread_id=later) == later
    items_only = conversation(org, "erik", ("user", "Plan my week."))
    switch_on(org, index_id, filters={"agent_ids": [chosen]})
    _run(org, index_id, run_jobs)
    assert _read_threads(db, index_id) == {by_chosen, later}
    switch_on(org, index_id)
    _run(org, index_id, run_jobs)
    assert _read_threads(db, index_id) == {by_chosen, by_other, no_agent, later, items_only}


def test_ext_7_key_ids_and_agent_ids_together_must_both_match(client, org, db, scripted, run_jobs):
    index_id = new_store(org)
    _extract_nothing(scripted)
    key_b = org.make_key()
    agent_x, agent_y = _agent(org, "x"), _agent(org, "y")
    both = _turn(org, org.key, "anna", "Hello.", agent_id=agent_x)
    key_only = _turn(org, org.key, "bert", "Hello.", agent_id=agent_y)
    agent_only = _turn(org, key_b["secret"], "carl", "Hello.", agent_id=agent_x)
    neither = _turn(org, key_b["secret"], "dora", "Hello.", agent_id=agent_y)
    key_no_agent = _turn(org, org.key, "erik", "Hello.")
    switch_on(org, index_id, filters={"key_ids": [org.key_id], "agent_ids": [agent_x]})
    _run(org, index_id, run_jobs)
    assert _read_threads(db, index_id) == {both}
    # Each filter alone takes in what it matches: the pair above is their intersection, not one of them.
    switch_on(org, index_id, filters={"key_ids": [org.key_id]})
    _run(org, index_id, run_jobs)
    assert _read_threads(db, index_id) == {both, key_only, key_no_agent}
    switch_on(org, index_id, filters={"agent_ids": [agent_x]})
    _run(org, index_id, run_jobs)
    assert _read_threads(db, index_id) == {both, key_only, key_no_agent, agent_only}
    assert neither not in _read_threads(db, index_id)


def test_ext_7_a_thread_is_read_once_quiet_for_quiet_minutes_and_an_append_makes_it_wait_again(
        client, org, db, scripted, run_jobs):
    index_id = new_store(org)
    _extract_nothing(scripted)
    tid = conversation(org, "anna", ("user", "I moved to Utrecht."))
    assert switch_on(org, index_id, quiet_minutes=10)["quiet_minutes"] == 10
    _run(org, index_id, run_jobs)  # its last item is seconds old
    assert windows(db, index_id) == [] and scripted.requests == []
    _age(db, tid, 9)  # not yet quiet: 9 of 10 minutes
    _run(org, index_id, run_jobs)
    assert windows(db, index_id) == [] and scripted.requests == []
    _age(db, tid, 10.5)  # quiet now
    _run(org, index_id, run_jobs)
    assert [(w[0], w[1], w[2], w[3]) for w in windows(db, index_id)] == [(tid, 1, 1, "ready")]
    assert "user: I moved to Utrecht." in scripted.last["messages"][-1]["content"]
    # A new message makes its last item recent again: the new part waits for the thread to be quiet once more.
    assert client.post(f"/threads/{tid}/items", headers=bearer(org.key, "anna"), json={
        "items": [{"type": "message", "role": "user", "content": "Actually Delft."}]}).status_code == 201
    _run(org, index_id, run_jobs)
    assert [(w[1], w[2]) for w in windows(db, index_id)] == [(1, 1)]
    _age(db, tid, 11)
    _run(org, index_id, run_jobs)
    assert [(w[1], w[2], w[3]) for w in windows(db, index_id)] == [(1, 1, "ready"), (2, 2, "ready")]
    assert "user: Actually Delft." in scripted.last["messages"][-1]["content"]


def test_ext_2_quiet_minutes_defaults_to_30_and_the_run_keeps_to_it(client, org, db, scripted, run_jobs):
    index_id = new_store(org)
    _extract_nothing(scripted)
    tid = conversation(org, "anna", ("user", "I moved to Utrecht."))
    # No `quiet_minutes` in the body (tests/extraction/util.py always sends 0, so this PUT is written out).
    response = client.put(f"/memory/stores/{index_id}/extraction", headers=org.full,
                          json={"enabled": True, "model": "scripted"})
    assert response.status_code == 200, response.text
    assert response.json()["quiet_minutes"] == 30
    assert get_switch(org, index_id)["quiet_minutes"] == 30
    stored = db.execute("SELECT quiet_minutes FROM extraction_switches WHERE index_id = %s", (index_id,)).fetchone()
    assert stored == (30,)
    _run(org, index_id, run_jobs)
    assert windows(db, index_id) == []
    _age(db, tid, 29)  # quiet for 10 minutes, which would do for a smaller default, but not for 30
    _run(org, index_id, run_jobs)
    assert windows(db, index_id) == [] and scripted.requests == []
    _age(db, tid, 31)
    _run(org, index_id, run_jobs)
    assert json.loads(json.dumps([w[:4] for w in windows(db, index_id)])) == [[tid, 1, 1, "ready"]]
