"""EXT-15, EXT-16, MEM-16, MEM-19: the maintenance pass's promotion analyses and contested marking against the
scripted helper model; reading, applying, dismissing and erasing proposals over HTTP."""

from __future__ import annotations

import json

from tests.extraction.maintenance_util import improvements_on, maintain, proposals, store_settings, write
from tests.extraction.util import new_store
from tests.helpers import assert_error, bearer

OFFICE = "The office closes at six."
NEVER = ("Call the help desk on +31 20 123 4567.", "Questions go to helpdesk@acme.test for answers.",
         "The handbook is at https://wiki.acme.test/handbook today.")


def _shared_only_management_key(org):
    response = org.client.post(f"/tenants/{org.org_id}/keys", headers=org.admin, json={
        "name": "auditor", "capabilities": ["knowledge", "memory", "management"],
        "policy": {"indexes": ["*"], "rules": [{"id": "shared", "effect": "permit", "kind": "memory_record",
                                                "actions": ["see"], "match": {"labels": {"subject": ""}}}]}})
    assert response.status_code == 201, response.text
    return bearer(response.json()["secret"])


def test_ext_15_proposals_by_people_and_by_judgement_never_personal_data(client, org, db, scripted, run_jobs,
                                                                         database_url):
    improvements_on(org)
    index_id = new_store(org)
    store_settings(org, index_id, promotion={"enabled": True, "labels": {"audience": "everyone"}})
    held = [write(org, index_id, person, OFFICE) for person in ("anna", "bob")]
    for text in NEVER:
        for person in ("anna", "bob"):
            write(org, index_id, person, text)
    monday = write(org, index_id, "anna", "The team meeting is on Monday.")
    tuesday = write(org, index_id, "anna", "The team meeting is on Tuesday.")
    canteen = write(org, index_id, "anna", "The canteen serves soup on Fridays.")  # the newest: line 0
    scripted.reply(json.dumps({"general": [0]}))  # the helper model's judgement
    scripted.reply(json.dumps({"contradictions": [0]}))  # the meeting pair
    maintain(database_url, run_jobs)
    found = {p["text"]: p for p in proposals(org)}
    assert sorted(found) == [canteen["text"], OFFICE]  # never a phone number, an e-mail address or a link
    office = found[OFFICE]
    assert (office["basis"], office["people"], office["status"]) == ("same_text", 2, "open")
    assert sorted(e["record_id"] for e in office["evidence"]) == sorted(r["id"] for r in held)
    assert (found[canteen["text"]]["basis"], found[canteen["text"]]["people"]) == ("general", 1)
    judged = scripted.requests[0]["messages"][-1]["content"]
    assert judged.startswith("0. The canteen serves soup on Fridays.") and "+31" not in judged
    # MEM-16: the pair the helper model named is contested, each naming its partner.
    for record, partner in ((monday, tuesday), (tuesday, monday)):
        got = client.get(f"/memory/{record['id']}", headers=bearer(org.key, "anna")).json()
        assert (got["contested"], got["contested_with"]) == (True, partner["id"])
    assert db.execute("SELECT count(*) FROM usage_events WHERE job = 'maintenance' AND key_id IS NULL"
                      ).fetchone()[0] == 2
    settings = client.get(f"/memory/stores/{index_id}", headers=org.full).json()
    assert settings["last_maintenance_run_at"] is not None
    # The read is audited; a management key sees only the evidence its policy lets it see.
    assert db.execute("SELECT count(*) FROM audit_events WHERE action = 'memory.read' AND object_type = "
                      "'memory_proposal'").fetchone()[0] == 1
    auditor = _shared_only_management_key(org)
    seen = {p["text"]: p for p in proposals(org, auditor)}
    assert (seen[OFFICE]["people"], seen[OFFICE]["evidence"]) == (2, [])
    assert_error(client.get("/memory/proposals", headers=bearer(org.key, "anna")), 403)


def test_ext_15_apply_dismiss_and_erasure(client, org, db, scripted, run_jobs, database_url):
    improvements_on(org, helper=False)
    index_id = new_store(org)
    store_settings(org, index_id, promotion={"enabled": True, "labels": {"audience": "everyone"}})
    for person in ("anna", "bob"):
        write(org, index_id, person, OFFICE)
    for person in ("anna", "anna2"):
        write(org, index_id, person, "Parking is free after seven.")
    maintain(database_url, run_jobs)
    assert scripted.requests == []  # no helper model: nothing judged, nothing asked
    found = {p["text"]: p for p in proposals(org)}
    office, parking = found[OFFICE], found["Parking is free after seven."]
    applied = client.post(f"/memory/proposals/{office['id']}/apply", headers=org.admin)
    assert applied.status_code == 200, applied.text
    record = client.get(f"/memory/{applied.json()['record_id']}", headers=org.full).json()
    assert (record["subject"], record["labels"], record["text"]) == (None, {"audience": "everyone"}, OFFICE)
    assert len([r for r in client.get("/memory", params={"index_id": index_id}, headers=org.full).json()["data"]
                if r["text"] == OFFICE]) == 3  # the people's own records stay theirs
    assert_error(client.post(f"/memory/proposals/{office['id']}/apply", headers=org.admin), 409,
                 "proposal_decided")
    dismissed = client.post(f"/memory/proposals/{parking['id']}/dismiss", headers=org.admin)
    assert dismissed.status_code == 200 and dismissed.json()["status"] == "dismissed"
    assert proposals(org) == []
    maintain(database_url, run_jobs, 1)
    assert proposals(org) == []  # a dismissed proposal is not made again
    actions = [r[0] for r in db.execute("SELECT action FROM audit_events WHERE action LIKE 'memory.proposal%' "
                                        "ORDER BY seq").fetchall()]
    assert actions == ["memory.proposal_applied", "memory.proposal_dismissed"]
    # MEM-19: erasing Anna deletes the proposals resting on her records alone (`anna2` holds the other record of
    # the parking proposal, so that one stays until `anna2` is erased too).
    erased = client.delete("/subjects/anna", headers=org.admin)
    assert erased.status_code == 200, erased.text
    assert erased.json()["counts"]["memory_proposals"] == 0
    assert len(proposals(org, status="all")) == 2
    erased = client.delete("/subjects/anna2", headers=org.admin)
    assert erased.json()["counts"]["memory_proposals"] == 1
    assert [p["text"] for p in proposals(org, status="all")] == [OFFICE]


def test_ext_15_no_analysis_while_improvements_are_off(client, org, scripted, run_jobs, database_url):
    index_id = new_store(org)
    for person in ("anna", "bob"):
        write(org, index_id, person, OFFICE)
    maintain(database_url, run_jobs)
    assert proposals(org, status="all") == []
    assert client.get(f"/memory/stores/{index_id}", headers=org.full).json()["last_maintenance_run_at"] is not None
