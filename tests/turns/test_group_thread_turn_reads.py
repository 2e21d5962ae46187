"""Turns in a group thread (TRN-7, INJ-4): another participant reads the turn but not what its memory block held,
and a replay answers only a person who may still see the thread."""
from __future__ import annotations

import json
from typing import Any

from backend.access.policy import writer_policy
from tests.helpers import Org, bearer
from tests.turns.conftest import turn


def _group_setup(client: Any, org: Org, settings: Any) -> tuple[str, dict[str, str], dict[str, str], str]:
    """A key under the writer policy plus the group-thread rule (participants reach a thread), with the memory
    block on; Anna keeps one private fact; a thread of Anna's with participants Anna and Bob."""
    from tests.threads.util import GROUP_RULE

    client.app.state.settings = settings.with_overrides(threads_group_reach_by_rule=True)
    index_id = client.post("/indexes", headers=org.full, json={"name": "support"}).json()["id"]
    policy = writer_policy()
    policy["rules"].append(dict(GROUP_RULE))
    key = org.make_key(policy=policy, memory={"injection": {"enabled": True, "index_id": index_id}})["secret"]
    ann, bob = bearer(key, subject="anna"), bearer(key, subject="bob")
    made = client.post("/memory", headers=ann, json={"index_id": index_id, "type": "fact",
                                                     "text": "Anna's private diagnosis"})
    assert made.status_code == 201, made.text
    thread = client.post("/threads", headers=ann, json={"labels": {"participants": ["anna", "bob"]}})
    assert thread.status_code == 201, thread.text
    return str(made.json()["id"]), ann, bob, str(thread.json()["id"])


def test_trn_7_a_participant_reads_anothers_turn_without_its_injected_records(
        client: Any, org: Org, scripted: Any, settings: Any) -> None:
    """Bob, a participant of Anna's group thread, read GET /responses/{id} of Anna's turn and its trace showed
    `injection.injected_ids` = [Anna's private record id] and `sections.about_this_person: 1`, although GET
    /memory/{id} is 404 to him. Now the trace's injection is null for any reader but her and administrators (INJ-4;
    PLT-9: nothing names what one may not see); she still gets it."""
    record_id, ann, bob, thread_id = _group_setup(client, org, settings)
    hers = turn(client, ann, input="hello", thread_id=thread_id)
    assert "Anna's private diagnosis" in json.dumps(scripted.messages(-1))  # her turn did inject it
    assert client.get(f"/memory/{record_id}", headers=bob).status_code == 404  # Bob may not see the record
    read = client.get(f"/responses/{hers['id']}", headers=bob)
    assert read.status_code == 200, read.text
    injection = read.json()["trace"]["injection"] or {}
    assert record_id not in json.dumps(injection), injection
    assert (injection.get("sections") or {}).get("about_this_person", 0) == 0, injection
    assert record_id in json.dumps(client.get(f"/responses/{hers['id']}", headers=ann).json()["trace"]["injection"])


def test_trn_7_an_idempotency_replay_is_404_to_a_participant_removed_from_the_thread(
        client: Any, org: Org, scripted: Any, settings: Any) -> None:
    """Bob ran a turn in Anna's group thread with `Idempotency-Key: b1`; Anna removed him from the participants;
    GET /responses/{id} was then 404 for him, but repeating the request with the same key answered 201 with the
    stored response (the replay checked only the key's owner). Now the 404 of any read of a response whose thread he
    cannot see (TRN-7)."""
    _, ann, bob, thread_id = _group_setup(client, org, settings)
    body = {"model": "scripted", "input": "Bob's question", "thread_id": thread_id}
    first = client.post("/responses", headers={**bob, "Idempotency-Key": "b1"}, json=body)
    assert first.status_code == 201, first.text
    patched = client.patch(f"/threads/{thread_id}", headers=ann, json={"labels": {"participants": ["anna"]}})
    assert patched.status_code == 200, patched.text
    assert client.get(f"/responses/{first.json()['id']}", headers=bob).status_code == 404
    again = client.post("/responses", headers={**bob, "Idempotency-Key": "b1"}, json=body)
    assert again.status_code == 404, again.text[:300]
    assert again.json()["code"] == "not_found"
