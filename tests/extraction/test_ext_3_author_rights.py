"""PLT-8, EXT-3, EXT-5: extraction writes as its author, so what the author's policy refuses fails the window
with `permission_denied`: a confirmation its `memory_write` rules refuse, an index its policy no longer names
(found before the model is asked), a record the model rightly named that the author cannot see."""

from __future__ import annotations

import json

from backend.access.policy import default_policy, writer_policy
from tests.extraction.util import answer, conversation, get_switch, new, new_store, run_now, set_switch, windows
from tests.helpers import bearer


def _author(org, index_id, policy):
    """A key with every capability and `policy` becomes the author of the store's switch (threads: all)."""
    author = org.make_key(policy=policy)
    response = set_switch(org, index_id, headers=bearer(author["secret"]), threads="all")
    assert response.status_code == 200, response.text
    return author


def _shared_record(org, index_id, text):
    response = org.client.post("/memory", json={"index_id": index_id, "type": "fact", "text": text},
                               headers=org.full)
    assert response.status_code == 201, response.text
    assert response.json()["subject"] is None
    return response.json()


def _confirm(record):
    return {"type": "fact", "text": record["text"], "action": "confirm", "target_id": record["id"]}


def test_plt_8_a_confirmation_needs_memory_write_on_the_record(client, org, db, scripted, run_jobs):
    index_id = new_store(org)
    shared = _shared_record(org, index_id, "The office closes at six.")
    # The author may see and change shared records (a request naming nobody), but write only a person's own.
    policy = default_policy()
    policy["rules"].append({"id": "write-own", "effect": "permit", "kind": "memory_write",
                            "when": [{"atom": "subject_is_owner"}]})
    _author(org, index_id, policy)
    conversation(org, None, ("user", "The office closes at six, as always."))
    scripted.reply(answer(_confirm(shared)))
    run_now(org, index_id)
    run_jobs()
    assert len(scripted.requests) == 1
    assert windows(db, index_id)[0][3:7] == ("failed", "permission_denied", 0, 0)
    after = client.get(f"/memory/{shared['id']}", headers=org.full).json()
    assert (after["confirmations"], after["last_confirmed_at"]) == (0, shared["last_confirmed_at"])
    history = client.get(f"/memory/{shared['id']}/history", headers=org.full).json()
    assert [v["action"] for v in history["versions"]] == ["created"]


def test_ext_3_an_author_whose_policy_left_the_index_fails_before_the_model_is_asked(client, org, db, scripted,
                                                                                      run_jobs):
    index_id = new_store(org)
    author = _author(org, index_id, writer_policy())
    conversation(org, "anna", ("user", "I like tea."))
    moved = {**writer_policy(), "indexes": ["idx_somewhere_else"]}
    response = client.patch(f"/tenants/{org.org_id}/keys/{author['id']}", headers=org.admin,
                            json={"policy": moved})
    assert response.status_code == 200, response.text
    scripted.reply(answer(new("preference", "Anna likes tea.")), usage=(50, 5))
    run_now(org, index_id)
    run_jobs()
    assert scripted.requests == []
    assert db.execute("SELECT count(*) FROM usage_events").fetchone()[0] == 0
    body = get_switch(org, index_id)
    assert body["state"] == "active" and body["error_code"] == "permission_denied"
    [error] = db.execute("SELECT error FROM extraction_windows WHERE index_id = %s", (index_id,)).fetchone()
    assert index_id in error and "indexes" in error


def test_ext_3_a_record_the_author_cannot_see_is_permission_denied_not_invalid_output(client, org, db, scripted,
                                                                                      run_jobs):
    index_id = new_store(org)
    shared = _shared_record(org, index_id, "The office closes at six.")
    # The author sees only a person's own records: a shared record is there, but out of its reach.
    policy = {"indexes": ["*"], "rules": [
        {"id": "own", "effect": "permit", "kind": "memory_record", "when": [{"atom": "subject_is_owner"}]},
        {"id": "threads", "effect": "permit", "kind": "thread"},
        {"id": "write", "effect": "permit", "kind": "memory_write"}]}
    _author(org, index_id, policy)
    conversation(org, None, ("user", "The office closes at six, as always."))
    scripted.reply(answer(_confirm(shared)))
    run_now(org, index_id)
    run_jobs()
    assert windows(db, index_id)[0][3:5] == ("failed", "permission_denied")
    assert client.get(f"/memory/{shared['id']}", headers=org.full).json()["confirmations"] == 0
    # A record id the model made up is still the model's fault.
    conversation(org, None, ("user", "And on Fridays at five."))
    scripted.reply(answer(_confirm({"id": "mem_made_up", "text": "The office closes at five on Fridays."})))
    run_now(org, index_id)
    run_jobs()
    assert sorted(w[4] for w in windows(db, index_id)) == ["invalid_model_output", "permission_denied"]


def test_plt_8_the_model_is_shown_only_records_the_author_may_see(client, org, db, scripted, run_jobs):
    index_id = new_store(org)
    _shared_record(org, index_id, "The office closes at six.")
    secret = org.client.post("/memory", json={"index_id": index_id, "type": "fact", "text": "The vault code is 4321.",
                                              "labels": {"secret": "yes"}}, headers=org.full)
    assert secret.status_code == 201, secret.text
    # The author may not see records labelled `secret`: their words never reach its model either.
    policy = writer_policy()
    policy["rules"].append({"id": "no-secrets", "effect": "deny", "kind": "memory_record",
                            "match": {"labels": {"secret": "yes"}}})
    _author(org, index_id, policy)
    conversation(org, None, ("user", "When does the office close?"))
    scripted.reply(answer())
    run_now(org, index_id)
    run_jobs()
    prompt = json.dumps(scripted.requests[0]["messages"])
    assert "The office closes at six." in prompt and "4321" not in prompt
