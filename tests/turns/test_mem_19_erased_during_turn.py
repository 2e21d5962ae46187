"""MEM-19 during a turn: a person erased while the model answers her turn gets nothing of hers back (found by the
battery's erasure under load, issue 17 item 8): the turn's answer is not kept, and her response keeps only id,
status and usage, also when the erasure came while it was running."""

from __future__ import annotations

from tests.helpers import bearer
from tests.threads.util import group_policy, msg, new_thread
from tests.turns.conftest import turn


def test_mem_19_a_person_erased_while_the_model_answers_her_turn_gets_nothing_back(client, org, db, scripted):
    anna = bearer(org.key, "anna")
    first = turn(client, anna, input="I like CANARYtea.")
    erased: list[int] = []
    scripted.reply("You like CANARYtea.", before=lambda: erased.append(
        client.delete("/subjects/anna", headers=org.admin).status_code))
    response = client.post("/responses", headers=anna, json={"model": "scripted", "input": "And CANARYcake.",
                                                              "thread_id": first["thread_id"]})
    assert erased == [200]
    assert response.status_code in (404, 409), response.text
    assert db.execute("SELECT count(*) FROM thread_items").fetchone()[0] == 0
    assert db.execute("SELECT count(*) FROM responses WHERE subject IS NOT NULL OR thread_id IS NOT NULL OR "
                      "output IS NOT NULL OR trace IS NOT NULL").fetchone()[0] == 0
    assert db.execute("SELECT count(*) FROM responses").fetchone()[0] == 2  # id, status and usage stay


def test_mem_19_a_turn_in_another_persons_thread_keeps_nothing_of_an_erased_writer(client, org, db, scripted,
                                                                                   settings):
    """Her turn in a group thread that is Bert's: the thread stays, her answer is not written into it."""
    client.app.state.settings = settings.with_overrides(threads_group_reach_by_rule=True)
    key = org.make_key(policy=group_policy())["secret"]  # group threads: participants may continue them
    bert = bearer(key, "bert")
    thread = new_thread(client, bert, items=[msg("user", "Hello from Bert.")],
                        labels={"participants": ["anna", "bert"]})["id"]
    anna = bearer(key, "anna")
    erased: list[int] = []
    scripted.reply("Noted CANARYcake.", before=lambda: erased.append(
        client.delete("/subjects/anna", headers=org.admin).status_code))
    response = client.post("/responses", headers=anna, json={"model": "scripted", "input": "I like CANARYcake.",
                                                              "thread_id": thread})
    assert erased == [200], response.text
    assert response.status_code == 409 and response.json()["code"] == "subject_erased", response.text
    assert db.execute("SELECT count(*) FROM thread_items").fetchone()[0] == 1  # Bert's message stays
    assert db.execute("SELECT count(*) FROM thread_items WHERE text ILIKE '%%canary%%' OR body::text ILIKE "
                      "'%%canary%%' OR subject = 'anna'").fetchone()[0] == 0
