"""EXT-14: maintenance lessons from a person's episodes that went alike, asked of the scripted helper model;
nothing is sent for a person the helper model may not read."""

from __future__ import annotations

import json

from tests.extraction.maintenance_util import maintain, org_settings, store_settings
from tests.extraction.util import answer, conversation, new_store, records, run_now, switch_on
from tests.helpers import bearer
from tests.threads.util import append, msg

GOOD = {"text": "The plan was made and mailed to x@acme.test as asked.", "result": "succeeded", "result_basis": "judge"}


def test_ext_14_alike_episodes_teach_one_maintenance_lesson(client, org, db, scripted, run_jobs, database_url):
    index_id = new_store(org)
    switch_on(org, index_id, episodes=True)
    threads = {person: conversation(org, person, ("user", "Plan my week, mail me at x@acme.test.")) for person in
               ("anna", "bob")}
    for session in range(2):
        if session:
            for person, tid in threads.items():
                append(client, bearer(org.key, person), tid, msg("user", "And the week after?"))
        for _ in threads:
            scripted.reply(answer(episode=GOOD))
        run_now(org, index_id)
        run_jobs()
    for person in threads:
        assert len([r for r in records(org, index_id, person, type="episode") if r["subject"] == person]) == 2
    # Bob's rules keep the helper model from reading his conversations.
    org_settings(org, helper_model={"provider": "openai_compatible", "model": "scripted"},
                 policy={"rules": [{"id": "bob-private", "effect": "deny", "kind": "thread", "actions": ["see"],
                                    "match": {"labels": {"subject": "bob"}}}]})
    store_settings(org, index_id, lessons={"enabled": True, "min_episodes": 2})
    scripted.reset()
    scripted.reply(json.dumps({"text": "Anna likes her week planned in one go."}))
    maintain(database_url, run_jobs)
    assert len(scripted.requests) == 1  # Anna's episodes only
    sent = scripted.requests[0]["messages"][-1]["content"]
    assert "x@acme.test" not in sent and "<EMAIL_1>" in sent  # pseudonymised
    lessons = records(org, index_id, "anna", type="lesson")
    assert [(r["subject"], r["source"], r["metadata"]["lesson"], r["verified"]) for r in lessons] == [
        ("anna", "maintenance", {"kind": "workflow", "basis": "model"}, False)]
    assert db.execute("SELECT count(*) FROM lesson_sources").fetchone()[0] == 2
    refused = client.post(f"/memory/{lessons[0]['id']}/verify", headers=org.admin)
    assert refused.status_code == 409 and refused.json()["code"] == "maintenance_lesson"
    assert records(org, index_id, "bob", type="lesson") == []
    # Never shown to a colleague, even one whose key's policy grants every record of the organisation.
    lesson = lessons[0]
    everything = org.make_key(policy={"rules": [
        {"id": "see-all", "effect": "permit", "kind": "memory_record", "actions": ["see", "write", "delete"]}]})
    for who in ("bob", None):
        colleague = bearer(everything["secret"], who)
        listed = client.get("/memory", params={"index_id": index_id, "type": "lesson"}, headers=colleague)
        assert listed.status_code == 200 and listed.json()["data"] == []
        assert client.get(f"/memory/{lesson['id']}", headers=colleague).status_code == 404
        found = client.get("/memory/search", params={"index_id": index_id, "q": "week planned"}, headers=colleague)
        assert found.status_code == 200 and lesson["id"] not in [r["id"] for r in found.json()["data"]]
        assert client.delete(f"/memory/{lesson['id']}", headers=colleague).status_code == 404
    # Anna through the same key, and the administrator, still see it.
    assert client.get(f"/memory/{lesson['id']}", headers=bearer(everything["secret"], "anna")).status_code == 200
    assert client.get(f"/memory/{lesson['id']}", headers=org.admin).status_code == 200
    # The episodes were used: another pass asks nothing.
    maintain(database_url, run_jobs, 1)
    assert len(scripted.requests) == 1
