"""MEM-19 with THR-5: a response copies its thread's labels; erasing a person named in them takes her id out."""

from __future__ import annotations

from typing import Any

from tests.helpers import Org, bearer
from tests.turns.conftest import anna, turn


def test_mem_19_erasing_a_person_takes_her_id_out_of_other_people_s_response_labels(
        client: Any, org: Org, other_org: Org, scripted: Any, db: Any) -> None:
    labels = {"participants": ["anna", "bob"], "with": "bob", "team": "support"}
    thread = client.post("/threads", headers=anna(org), json={"labels": labels})
    assert thread.status_code == 201, thread.text
    hers = turn(client, anna(org), input="Hello", thread_id=thread.json()["id"])
    assert hers["labels"] == labels
    # Only Bob named: the list label is dropped once empty, as the threads eraser does.
    only_bob = client.post("/threads", headers=anna(org), json={"labels": {"participants": ["bob"]}})
    solo = turn(client, anna(org), input="Hi", thread_id=only_bob.json()["id"])
    # A `bob` in another organisation is another person.
    offered = client.post("/admin/models", headers=other_org.admin,
                          json={"id": "scripted", "provider": "openai_compatible", "base_url": scripted.url})
    assert offered.status_code == 201, offered.text
    elsewhere_thread = client.post("/threads", headers=bearer(other_org.key, "anna"),
                                   json={"labels": {"participants": ["anna", "bob"]}})
    elsewhere = turn(client, bearer(other_org.key, "anna"), input="Hello", thread_id=elsewhere_thread.json()["id"])

    erased = client.delete("/subjects/bob", headers=org.admin)
    assert erased.status_code == 200, erased.text
    assert erased.json()["counts"]["labelled_responses"] == 2

    read = client.get(f"/responses/{hers['id']}", headers=anna(org))
    assert read.status_code == 200, read.text
    assert read.json()["labels"] == {"participants": ["anna"], "team": "support"}
    assert read.json()["output_text"] == hers["output_text"]  # her own turn is otherwise untouched
    assert client.get(f"/responses/{solo['id']}", headers=anna(org)).json()["labels"] == {}
    assert db.execute("SELECT count(*) FROM responses WHERE org_id = %s AND labels::text LIKE '%%\"bob\"%%'",
                      (org.org_id,)).fetchone()[0] == 0
    kept = client.get(f"/responses/{elsewhere['id']}", headers=bearer(other_org.key, "anna"))
    assert kept.json()["labels"] == {"participants": ["anna", "bob"]}
