"""Writing, changing and deleting records (MEM-1 … MEM-5, MEM-7, MEM-8, MEM-12, MEM-14, MEM-17, MEM-18)."""

from __future__ import annotations

from typing import Any

from tests.helpers import assert_error
from tests.memory.conftest import Mem


def test_mem_1_4_record_has_every_field_and_is_owned_by_the_subject(mem: Mem, client: Any) -> None:
    body = {"index_id": mem.index_id, "type": "preference", "text": "Prefers email over phone.",
            "metadata": {"customer": "acme"}, "labels": {"department": "payroll"}, "confidence": 0.9,
            "key": "contact_channel", "tags": ["Contact", "EMAIL", "contact"], "priority": "high",
            "expires_at": "2031-01-01T00:00:00+01:00"}
    response = client.post("/memory", json=body, headers=mem.anna())
    assert response.status_code == 201, response.text
    record = response.json()
    assert record["id"].startswith("mem_")
    assert record["subject"] == "anna"
    assert record["type"] == "preference"
    assert record["text"] == "Prefers email over phone."
    assert record["metadata"] == {"customer": "acme"}
    assert record["labels"] == {"department": "payroll"}
    assert record["confidence"] == 0.9 and record["effective_confidence"] == 0.9
    assert record["tags"] == ["contact", "email"]  # MEM-12: lowercase, no duplicates
    assert record["priority"] == "high"
    assert record["expires_at"] == "2030-12-31T23:00:00Z"
    assert record["source"] == "api" and record["verified"] is False
    assert record["status"] == "active" and record["replaces"] is None and record["replaced_by"] is None
    assert record["confirmations"] == 0 and record["last_confirmed_at"] is None
    assert record["contested"] is False and record["recall_count"] == 0
    assert record["commitment"] is None and record["episode"] is None and record["provenance"] is None
    assert record["key"] == "contact_channel" and record["version"] == 1
    again = client.get(f"/memory/{record['id']}", headers=mem.anna())
    assert again.json() == record


def test_mem_3_default_confidence_and_verified_by_source(mem: Mem, client: Any) -> None:
    by_key = mem.write(mem.nobody, "Office opens at nine.")
    assert (by_key["confidence"], by_key["source"], by_key["verified"], by_key["subject"]) == (1.0, "api", False, None)
    by_admin = mem.write(mem.admin, "Payroll closes on the 25th.")
    assert (by_admin["confidence"], by_admin["source"], by_admin["verified"]) == (1.0, "admin", True)


def test_mem_4_key_upsert_updates_in_place_with_a_new_version(mem: Mem, client: Any, db: Any) -> None:
    first = client.post("/memory", json={"index_id": mem.index_id, "type": "project", "key": "synapse_status",
                                         "text": "v1.4.0 deployed", "priority": "high", "tags": ["synapse"]},
                        headers=mem.anna())
    assert first.status_code == 201, first.text
    second = client.post("/memory", json={"index_id": mem.index_id, "type": "project", "key": "synapse_status",
                                          "text": "v1.5.0 deployed"}, headers=mem.anna())
    assert second.status_code == 200, second.text
    record = second.json()
    assert record["id"] == first.json()["id"]
    assert record["text"] == "v1.5.0 deployed" and record["version"] == 2
    assert record["priority"] == "high" and record["tags"] == ["synapse"]  # fields not sent are kept
    # Same key for another owner, another type or shared: separate records, never duplicates of one another.
    bob = client.post("/memory", json={"index_id": mem.index_id, "type": "project", "key": "synapse_status",
                                       "text": "bob's"}, headers=mem.bob())
    shared = client.post("/memory", json={"index_id": mem.index_id, "type": "project", "key": "synapse_status",
                                          "text": "shared"}, headers=mem.nobody)
    other_type = client.post("/memory", json={"index_id": mem.index_id, "type": "note", "key": "synapse_status",
                                              "text": "a note"}, headers=mem.anna())
    assert [bob.status_code, shared.status_code, other_type.status_code] == [201, 201, 201]
    shared_again = client.post("/memory", json={"index_id": mem.index_id, "type": "project", "key": "synapse_status",
                                                "text": "shared v2"}, headers=mem.nobody)
    assert shared_again.status_code == 200 and shared_again.json()["id"] == shared.json()["id"]
    rows = db.execute("SELECT subject, type, count(*) FROM memory_records WHERE key = 'synapse_status' "
                      "AND index_id = %s GROUP BY 1, 2 ORDER BY 1, 2", (mem.index_id,)).fetchall()
    assert rows == [("anna", "note", 1), ("anna", "project", 1), ("bob", "project", 1), (None, "project", 1)]
    history = client.get(f"/memory/{record['id']}/history", headers=mem.anna()).json()
    assert [(v["version"], v["action"], v["text"]) for v in history["versions"]] == [
        (1, "created", "v1.4.0 deployed"), (2, "updated", "v1.5.0 deployed")]


def test_mem_4_key_upsert_in_one_batch_never_duplicates(mem: Mem, client: Any, db: Any) -> None:
    records = [{"index_id": mem.index_id, "type": "fact", "key": "k", "text": f"version {i}"} for i in range(5)]
    response = client.post("/memory/batch", json={"records": records}, headers=mem.anna())
    assert response.status_code == 201, response.text
    body = response.json()
    assert (body["created"], body["updated"]) == (1, 4)
    assert len({r["id"] for r in body["data"]}) == 1
    assert mem.counts(db)[0] == 1
    assert db.execute("SELECT text, version FROM memory_records WHERE index_id = %s",
                      (mem.index_id,)).fetchone() == ("version 4", 5)


def test_mem_3_a_key_upsert_is_sourced_and_verified_as_the_writers_new_record_would_be(mem: Mem, client: Any) -> None:
    """An administrator's writes are `source: admin`, `verified: true`; a key's are `api` and unverified (MEM-3,
    MEM-18). A keyed upsert rewrites the record in that writer's name, so both follow the writer, both ways."""
    body = {"index_id": mem.index_id, "type": "fact", "key": "desk", "text": "Desk on the third floor."}
    by_key = client.post("/memory", json=body, headers=mem.nobody)
    assert by_key.status_code == 201, by_key.text
    assert (by_key.json()["source"], by_key.json()["verified"]) == ("api", False)
    by_admin = client.post("/memory", json={**body, "text": "Desk on the fourth floor."}, headers=mem.admin)
    assert by_admin.status_code == 200, by_admin.text
    assert by_admin.json()["id"] == by_key.json()["id"]
    assert (by_admin.json()["source"], by_admin.json()["verified"]) == ("admin", True)
    again = client.post("/memory/batch", json={"records": [{**body, "text": "Desk on the fifth floor."}]},
                        headers=mem.nobody)
    assert again.status_code == 201 and again.json()["updated"] == 1, again.text
    assert (again.json()["data"][0]["source"], again.json()["data"][0]["verified"]) == ("api", False)
    record = client.get(f"/memory/{by_key.json()['id']}", headers=mem.admin).json()
    assert (record["text"], record["source"], record["verified"]) == ("Desk on the fifth floor.", "api", False)
    history = client.get(f"/memory/{record['id']}/history", headers=mem.admin).json()["versions"]
    assert [(v["action"], v["verified"]) for v in history] == [("created", False), ("updated", True),
                                                               ("updated", False)]


def test_mem_18_new_words_from_a_key_are_unverified_and_other_changes_keep_the_verification(mem: Mem,
                                                                                           client: Any) -> None:
    """Verification vouches for the words: a key's PATCH of the text drops it; an administrator's edit and a
    change of anything else keep what the record had (verifying stays its own audited act)."""
    created = client.post("/memory", json={"index_id": mem.index_id, "type": "fact", "text": "Desk on floor 3."},
                          headers=mem.nobody).json()
    url = f"/memory/{created['id']}"
    assert client.post(f"{url}/verify", headers=mem.admin).json()["verified"] is True
    tagged = client.patch(url, json={"tags": ["office"]}, headers=mem.nobody)
    assert tagged.status_code == 200, tagged.text
    assert tagged.json()["verified"] is True
    reworded = client.patch(url, json={"text": "Desk on floor 4."}, headers=mem.nobody).json()
    assert reworded["verified"] is False
    by_admin = client.patch(url, json={"text": "Desk on floor 5."}, headers=mem.admin).json()
    assert by_admin["verified"] is False
    assert client.post(f"{url}/verify", headers=mem.admin).json()["verified"] is True
    assert client.patch(url, json={"text": "Desk on floor 6."}, headers=mem.admin).json()["verified"] is True

def test_plt_8_key_upsert_is_judged_on_the_record_as_it_will_be_written(mem: Mem, client: Any, db: Any) -> None:
    """A keyed write that sends no labels keeps the record's labels, so `memory_write` is judged on those, not on
    an empty label set; a keyed write that sends labels is judged on the labels it sends."""
    from tests.helpers import bearer

    payroll_only = mem.org.make_key(policy={"indexes": ["*"], "rules": [
        {"id": "w", "effect": "permit", "kind": "memory_write", "match": {"labels": {"department": "payroll"}}},
        {"id": "all", "effect": "permit", "kind": "memory_record"}]})["secret"]
    body = {"index_id": mem.index_id, "type": "fact", "key": "payday", "text": "Salaries on the 25th."}
    first = client.post("/memory", json={**body, "labels": {"department": "payroll"}}, headers=bearer(payroll_only))
    assert first.status_code == 201, first.text
    unlabelled = client.post("/memory", json={**body, "text": "Salaries on the 24th."}, headers=bearer(payroll_only))
    assert unlabelled.status_code == 200, unlabelled.text
    assert unlabelled.json()["labels"] == {"department": "payroll"} and unlabelled.json()["version"] == 2
    relabelled = client.post("/memory", json={**body, "labels": {"department": "sales"}}, headers=bearer(payroll_only))
    assert_error(relabelled, 403, code="policy_denied")
    fresh = client.post("/memory", json={**body, "key": "other"}, headers=bearer(payroll_only))
    assert_error(fresh, 403, code="policy_denied")  # a new keyed record without labels: no rule permits it
    assert db.execute("SELECT text, labels->>'department' FROM memory_records WHERE index_id = %s",
                      (mem.index_id,)).fetchall() == [("Salaries on the 24th.", "payroll")]


def test_mem_4_unknown_or_unnamed_index_is_404_and_episode_is_422(mem: Mem, client: Any, db: Any) -> None:
    absent = client.post("/memory", json={"index_id": "idx_nope", "type": "fact", "text": "x"}, headers=mem.anna())
    assert_error(absent, 404, param="index_id")
    other = client.post("/indexes", json={"name": "hidden"}, headers=mem.admin).json()["id"]
    narrow = mem.org.make_key(policy={"indexes": [mem.index_id], "rules": [
        {"id": "w", "effect": "permit", "kind": "memory_write"},
        {"id": "own", "effect": "permit", "kind": "memory_record"}]})["secret"]
    from tests.helpers import bearer

    unnamed = client.post("/memory", json={"index_id": other, "type": "fact", "text": "x"}, headers=bearer(narrow))
    assert_error(unnamed, 404, param="index_id")
    episode = client.post("/memory", json={"index_id": mem.index_id, "type": "episode", "text": "x"},
                          headers=mem.anna())
    assert_error(episode, 422, param="type")
    episode_part = client.post("/memory", json={"index_id": mem.index_id, "type": "fact", "text": "x",
                                                "episode": {"from": "2026-01-01T00:00:00Z"}}, headers=mem.anna())
    assert_error(episode_part, 422, param="episode")
    assert mem.counts(db)[0] == 0


def test_mem_4_write_without_memory_write_rule_is_403_and_audited(mem: Mem, client: Any, db: Any) -> None:
    from tests.helpers import bearer

    reader = mem.org.make_key()["secret"]  # default policy: no memory_write rule (PLT-9)
    response = client.post("/memory", json={"index_id": mem.index_id, "type": "fact", "text": "secret words"},
                           headers=bearer(reader, "anna"))
    assert_error(response, 403, code="policy_denied")
    assert mem.counts(db)[0] == 0
    row = db.execute("SELECT action, outcome, object_type, subject_hash, detail::text FROM audit_events "
                     "WHERE outcome = 'denied' AND detail->>'index_id' = %s", (mem.index_id,)).fetchone()
    assert row[:3] == ("memory.write", "denied", "memory_record")
    assert row[3] is not None and "anna" not in row[3]
    assert "secret words" not in row[4] and "anna" not in row[4]


BAD_INPUT = [
    ({"text": ""}, "text"),
    ({"text": "x" * 8001}, "text"),
    ({"type": "Fact"}, "type"),
    ({"type": "a" * 33}, "type"),
    ({"type": "1abc"}, "type"),
    ({"confidence": 1.5}, "confidence"),
    ({"confidence": -0.1}, "confidence"),
    ({"tags": [f"t{i}" for i in range(21)]}, "tags"),
    ({"tags": ["x" * 65]}, "tags[0]"),
    ({"tags": ["   "]}, "tags[0]"),
    ({"metadata": {"blob": "x" * 8200}}, "metadata"),
    ({"metadata": "not an object"}, "metadata"),
    ({"expires_at": "2030-01-01T00:00:00"}, "expires_at"),
    ({"priority": "urgent"}, "priority"),
    ({"colour": "red"}, "colour"),
    ({"labels": {"subject": "bob"}}, "labels.subject"),
    ({"commitment": {"status": "open"}}, "commitment"),
    ({"type": "commitment", "commitment": {"due_at": "2030-01-01T10:00:00"}}, "commitment.due_at"),
]


def test_mem_1_every_limit_is_422_naming_the_field_and_nothing_is_written(mem: Mem, client: Any, db: Any) -> None:
    for change, param in BAD_INPUT:
        body = {"index_id": mem.index_id, "type": "fact", "text": "fine", **change}
        response = client.post("/memory", json=body, headers=mem.anna())
        assert_error(response, 422, param=param)
    assert mem.counts(db)[0] == 0
    fine = client.post("/memory", json={"index_id": mem.index_id, "type": "fact", "text": "x" * 8000,
                                        "tags": [f"t{i}" for i in range(20)], "metadata": {"b": "x" * 8000}},
                       headers=mem.anna())
    assert fine.status_code == 201, fine.text


def test_plt_11_vocabulary_refuses_unknown_labels_on_records(mem: Mem, client: Any) -> None:
    vocabulary = f"/tenants/{mem.org.org_id}/vocabulary"
    put = client.put(vocabulary, json={"memory_record": {"department": {"attribute": True}}}, headers=mem.admin)
    assert put.status_code in (200, 204), put.text
    try:
        refused = client.post("/memory", json={"index_id": mem.index_id, "type": "fact", "text": "x",
                                               "labels": {"team": "a"}}, headers=mem.nobody)
        assert_error(refused, 422, param="labels.team")
        ok = client.post("/memory", json={"index_id": mem.index_id, "type": "fact", "text": "x",
                                          "labels": {"department": "payroll"}}, headers=mem.nobody)
        assert ok.status_code == 201, ok.text
        record = ok.json()["id"]
        assert_error(client.patch(f"/memory/{record}", json={"labels": {"team": "b"}}, headers=mem.nobody), 422,
                     param="labels.team")
    finally:
        client.put(vocabulary, json={}, headers=mem.admin)


def test_mem_5_batch_all_or_nothing_names_the_first_invalid_record(mem: Mem, client: Any, db: Any) -> None:
    good = [{"index_id": mem.index_id, "type": "fact", "text": f"fact {i}"} for i in range(30)]
    bad = [*good[:17], {"index_id": mem.index_id, "type": "fact", "text": ""}, *good[18:]]
    assert_error(client.post("/memory/batch", json={"records": bad}, headers=mem.anna()), 422, param="records[17].text")
    episode = [*good[:3], {"index_id": mem.index_id, "type": "episode", "text": "x"}]
    assert_error(client.post("/memory/batch", json={"records": episode}, headers=mem.anna()), 422,
                 param="records[3].type")
    big_metadata = [*good[:5], {"index_id": mem.index_id, "type": "fact", "text": "x",
                                "metadata": {"b": "x" * 9000}}]
    assert_error(client.post("/memory/batch", json={"records": big_metadata}, headers=mem.anna()), 422,
                 param="records[5].metadata")
    absent_index = [*good[:2], {"index_id": "idx_gone", "type": "fact", "text": "x"}]
    assert_error(client.post("/memory/batch", json={"records": absent_index}, headers=mem.anna()), 404,
                 param="records[2].index_id")
    too_many = {"records": [good[0]] * 1001}
    assert_error(client.post("/memory/batch", json=too_many, headers=mem.anna()), 422, param="records")
    assert mem.counts(db) == (0, 0)
    # A policy refusal in the middle of a batch also writes nothing: Anna may not write a shared record's key.
    from tests.helpers import bearer

    unlabelled_only = mem.org.make_key(policy={"indexes": ["*"], "rules": [
        {"id": "w", "effect": "permit", "kind": "memory_write", "when": [{"atom": "no_subject"}],
         "match": {"labels": {"department": ""}}},
        {"id": "all", "effect": "permit", "kind": "memory_record"}]})["secret"]
    mixed = [*good[:4], {"index_id": mem.index_id, "type": "fact", "text": "x", "labels": {"department": "hr"}}]
    assert_error(client.post("/memory/batch", json={"records": mixed}, headers=bearer(unlabelled_only)), 403)
    assert mem.counts(db)[0] == 0
    done = client.post("/memory/batch", json={"records": [good[0]] * 1000}, headers=mem.anna())
    assert done.status_code == 201, done.text
    assert done.json()["created"] == 1000 and mem.counts(db)[0] == 1000


def test_mem_5_a_batch_names_the_first_invalid_record_whichever_check_finds_it(mem: Mem, client: Any, db: Any) -> None:
    """The body's schema and the checks made with the organisation and the index (metadata size, `episode`, NUL,
    an unknown index) are one judgement: the record named is the first invalid one by position (MEM-5)."""
    good = [{"index_id": mem.index_id, "type": "fact", "text": f"fact {i}"} for i in range(8)]
    big = {**good[0], "metadata": {"b": "x" * 9 * 1024}}

    def refused(records: list[dict[str, Any]], status: int, param: str) -> None:
        assert_error(client.post("/memory/batch", json={"records": records}, headers=mem.anna()), status, param=param)

    refused([big, *good[1:5], {**good[5], "text": ""}, *good[6:]], 422, "records[0].metadata")
    refused([good[0], {**good[1], "index_id": "idx_gone"}, {**good[2], "text": ""}], 404, "records[1].index_id")
    refused([{**good[0], "type": "episode"}, {**good[1], "confidence": 2}], 422, "records[0].type")
    refused([good[0], {**good[1], "text": "a\x00b"}, {**good[2], "surprise": 1}], 422, "records[1].text")
    # And the other way round: a schema error before a record the later checks refuse is still the one named.
    refused([good[0], {**good[1], "confidence": 2}, big], 422, "records[1].confidence")
    refused([{**good[0], "id": "mem_forged"}, big], 422, "records[0].id")
    refused([good[0], {"index_id": mem.index_id, "type": "fact"}, big], 422, "records[1].text")
    refused([good[0], 7, big], 422, "records[1]")
    assert_error(client.post("/memory/batch", json={"records": [good[0]], "extra": 1}, headers=mem.anna()), 422,
                 param="extra")
    assert_error(client.post("/memory/batch", json={"records": []}, headers=mem.anna()), 422, param="records")
    assert mem.counts(db) == (0, 0)
    # The published contract is still the batch of `MemoryCreate` records.
    document = client.get("/schema/openapi.json").json()
    schema = document["paths"]["/memory/batch"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert schema["required"] == ["records"] and schema["additionalProperties"] is False
    assert schema["properties"]["records"]["items"] == {"$ref": "#/components/schemas/MemoryCreate"}
    assert "text" in document["components"]["schemas"]["MemoryCreate"]["properties"]


def test_mem_7_patch_changes_fields_writes_a_version_and_restarts_decay_age(mem: Mem, client: Any, db: Any) -> None:
    record = mem.write(mem.anna(), "Lives in Utrecht.", tags=["home"])
    db.execute("UPDATE memory_records SET updated_at = now() - interval '40 days' WHERE id = %s", (record["id"],))
    response = client.patch(f"/memory/{record['id']}", json={"text": "Lives in Delft.", "tags": ["Home", "move"],
                                                            "confidence": 0.8, "priority": "low",
                                                            "metadata": {"since": 2026}}, headers=mem.anna())
    assert response.status_code == 200, response.text
    changed = response.json()
    assert changed["text"] == "Lives in Delft." and changed["tags"] == ["home", "move"]
    assert (changed["confidence"], changed["priority"], changed["metadata"]) == (0.8, "low", {"since": 2026})
    assert changed["version"] == 2 and changed["subject"] == "anna"
    age = db.execute("SELECT extract(epoch FROM now() - updated_at) FROM memory_records WHERE id = %s",
                     (record["id"],)).fetchone()[0]
    assert age < 60
    empty = client.patch(f"/memory/{record['id']}", json={}, headers=mem.anna())
    assert empty.status_code == 200 and empty.json()["version"] == 3
    history = client.get(f"/memory/{record['id']}/history", headers=mem.anna()).json()
    assert [v["text"] for v in history["versions"]] == ["Lives in Utrecht.", "Lives in Delft.", "Lives in Delft."]
    cleared = client.patch(f"/memory/{record['id']}", json={"expires_at": None}, headers=mem.anna())
    assert cleared.json()["expires_at"] is None
    for bad, param in [({"type": "note"}, "type"), ({"subject": "bob"}, "subject"), ({"text": ""}, "text"),
                       ({"expires_at": "2030-01-01T00:00:00"}, "expires_at"), ({"commitment": {}}, "commitment")]:
        assert_error(client.patch(f"/memory/{record['id']}", json=bad, headers=mem.anna()), 422, param=param)


def test_mem_7_owner_never_changes_and_people_cannot_change_shared_records(mem: Mem, client: Any) -> None:
    shared = mem.write(mem.nobody, "Expense claims go to finance by the 25th.")
    mine = mem.write(mem.anna(), "Anna's own note.")
    assert_error(client.patch(f"/memory/{shared['id']}", json={"text": "x"}, headers=mem.anna()), 403)
    assert_error(client.delete(f"/memory/{shared['id']}", headers=mem.anna()), 403)
    assert_error(client.patch(f"/memory/{mine['id']}", json={"text": "x"}, headers=mem.bob()), 404)
    by_nobody = client.patch(f"/memory/{mine['id']}", json={"text": "changed by the application"},
                             headers=mem.nobody)
    assert by_nobody.status_code == 200 and by_nobody.json()["subject"] == "anna"
    assert client.get(f"/memory/{shared['id']}", headers=mem.anna()).json()["text"] == shared["text"]


def test_mem_8_deleting_a_record_and_a_confirmed_record(mem: Mem, client: Any, db: Any) -> None:
    tool = f"/tools/memory__{mem.index_id}__write/call"
    first = client.post(tool, json={"arguments": {"type": "fact", "text": "Has a dog called Rex."}},
                        headers=mem.anna()).json()
    again = client.post(tool, json={"arguments": {"type": "fact", "text": "has a dog called rex"}},
                        headers=mem.anna()).json()
    import json

    created, confirmed = json.loads(first["output"]), json.loads(again["output"])
    assert created["action"] == "created" and confirmed["action"] == "confirmed"
    assert confirmed["memory_id"] == created["memory_id"]
    assert mem.counts(db)[0] == 1
    record = client.get(f"/memory/{created['memory_id']}", headers=mem.anna()).json()
    assert record["confirmations"] == 1 and record["last_confirmed_at"] is not None
    deleted = client.delete(f"/memory/{created['memory_id']}", headers=mem.anna())
    assert deleted.status_code == 204
    assert mem.counts(db) == (0, 0)
    assert_error(client.get(f"/memory/{created['memory_id']}", headers=mem.anna()), 404)
    assert_error(client.delete(f"/memory/{created['memory_id']}", headers=mem.anna()), 404)


def test_mem_8_deleting_a_correction_does_not_bring_the_replaced_record_back(mem: Mem, client: Any) -> None:
    import json

    tool = f"/tools/memory__{mem.index_id}__write/call"
    old = json.loads(client.post(tool, json={"arguments": {"type": "fact", "text": "Works at Acme."}},
                                 headers=mem.anna()).json()["output"])["memory_id"]
    fix = json.loads(client.post(tool, json={"arguments": {"type": "fact", "text": "Works at Globex.",
                                                           "replaces": old}}, headers=mem.anna()).json()["output"])
    assert fix["action"] == "replaced" and fix["replaces"] == old
    replaced = client.get(f"/memory/{old}", headers=mem.anna()).json()
    assert replaced["status"] == "replaced" and replaced["replaced_by"] == fix["memory_id"]
    assert client.get(f"/memory/{fix['memory_id']}", headers=mem.anna()).json()["replaces"] == old
    assert mem.list(mem.anna()) == [fix["memory_id"]]
    assert client.delete(f"/memory/{fix['memory_id']}", headers=mem.anna()).status_code == 204
    after = client.get(f"/memory/{old}", headers=mem.anna()).json()
    assert after["status"] == "replaced" and after["replaced_by"] is None
    assert mem.list(mem.anna()) == []
    assert mem.list(mem.anna(), include_replaced="true") == [old]


def test_mem_14_commitments(mem: Mem, client: Any) -> None:
    promise = client.post("/memory", json={"index_id": mem.index_id, "type": "commitment",
                                           "text": "Calls the bank back on Thursday.",
                                           "commitment": {"due_at": "2026-12-10T09:00:00+01:00",
                                                          "promised_to": "the bank"}}, headers=mem.anna())
    assert promise.status_code == 201, promise.text
    assert promise.json()["commitment"] == {"status": "open", "due_at": "2026-12-10T08:00:00Z",
                                            "promised_to": "the bank"}
    default = mem.write(mem.anna(), "Sends the report.", type="commitment")
    assert default["commitment"] == {"status": "open", "due_at": None, "promised_to": None}
    done = client.patch(f"/memory/{default['id']}", json={"commitment": {"status": "done"}}, headers=mem.anna())
    assert done.json()["commitment"]["status"] == "done"
    assert_error(client.patch(f"/memory/{default['id']}", json={"commitment": {"status": "late"}},
                              headers=mem.anna()), 422, param="commitment.status")


def _commitment(mem: Mem, client: Any, **part: Any) -> dict[str, Any]:
    body = {"index_id": mem.index_id, "type": "commitment", "text": "Calls the bank back on Thursday.",
            "commitment": {"due_at": "2026-12-10T09:00:00+01:00", "promised_to": "the bank", **part}}
    response = client.post("/memory", json=body, headers=mem.anna())
    assert response.status_code == 201, response.text
    return dict(response.json())


def test_mem_7_14_patch_of_a_commitment_changes_only_the_fields_sent(mem: Mem, client: Any) -> None:
    promise = _commitment(mem, client)

    def patched(part: Any) -> dict[str, Any]:
        response = client.patch(f"/memory/{promise['id']}", json={"commitment": part}, headers=mem.anna())
        assert response.status_code == 200, response.text
        return dict(response.json()["commitment"])

    # Marking it done keeps when it was due and to whom it was promised.
    assert patched({"status": "done"}) == {"status": "done", "due_at": "2026-12-10T08:00:00Z",
                                           "promised_to": "the bank"}
    # A new due time on a done commitment does not reopen it (MEM-14 injects open ones only).
    assert patched({"due_at": "2026-12-11T09:00:00Z"}) == {"status": "done", "due_at": "2026-12-11T09:00:00Z",
                                                           "promised_to": "the bank"}
    # An explicit null clears that field only; an empty part changes nothing.
    assert patched({"promised_to": None}) == {"status": "done", "due_at": "2026-12-11T09:00:00Z",
                                              "promised_to": None}
    assert patched({}) == {"status": "done", "due_at": "2026-12-11T09:00:00Z", "promised_to": None}
    assert patched({"status": "open", "due_at": None}) == {"status": "open", "due_at": None, "promised_to": None}
    # A PATCH without `commitment` leaves the part alone.
    _ = patched({"promised_to": "the bank"})
    other = client.patch(f"/memory/{promise['id']}", json={"priority": "high"}, headers=mem.anna())
    assert other.json()["commitment"] == {"status": "open", "due_at": None, "promised_to": "the bank"}


def test_mem_7_14_a_commitment_keeps_its_part_so_null_is_422(mem: Mem, client: Any) -> None:
    promise = _commitment(mem, client, status="done")
    assert_error(client.patch(f"/memory/{promise['id']}", json={"commitment": None}, headers=mem.anna()), 422,
                 param="commitment")
    assert_error(client.patch(f"/memory/{promise['id']}", json={"commitment": {"status": None}},
                              headers=mem.anna()), 422, param="commitment.status")
    stored = client.get(f"/memory/{promise['id']}", headers=mem.anna()).json()
    assert stored["commitment"] == {"status": "done", "due_at": "2026-12-10T08:00:00Z", "promised_to": "the bank"}
    assert stored["version"] == 1
    # A record of another type has no part: null there changes nothing, a part is 422 as before.
    fact = mem.write(mem.anna(), "Banks with ING.")
    assert client.patch(f"/memory/{fact['id']}", json={"commitment": None},
                        headers=mem.anna()).json()["commitment"] is None
    assert_error(client.patch(f"/memory/{fact['id']}", json={"commitment": {"status": "done"}},
                              headers=mem.anna()), 422, param="commitment")


def test_mem_4_14_key_upsert_of_a_commitment_changes_only_the_fields_sent(mem: Mem, client: Any) -> None:
    def upsert(headers: dict[str, str], **fields: Any) -> Any:
        return client.post("/memory", json={"index_id": mem.index_id, "type": "commitment", "key": "bank-call",
                                            "text": "Calls the bank back.", **fields}, headers=headers)

    created = upsert(mem.anna(), commitment={"due_at": "2026-12-10T08:00:00Z", "promised_to": "the bank"})
    assert created.status_code == 201, created.text
    assert created.json()["commitment"] == {"status": "open", "due_at": "2026-12-10T08:00:00Z",
                                            "promised_to": "the bank"}
    done = upsert(mem.anna(), commitment={"status": "done"})
    assert done.status_code == 200, done.text
    assert done.json()["commitment"] == {"status": "done", "due_at": "2026-12-10T08:00:00Z",
                                         "promised_to": "the bank"}
    moved = upsert(mem.anna(), commitment={"due_at": "2026-12-11T08:00:00Z"})
    assert moved.json()["commitment"]["status"] == "done"
    kept = upsert(mem.anna())  # no `commitment` at all: the stored part stays
    assert kept.json()["commitment"] == {"status": "done", "due_at": "2026-12-11T08:00:00Z",
                                         "promised_to": "the bank"}
    assert_error(upsert(mem.anna(), commitment=None), 422, param="commitment")
    batch = client.post("/memory/batch", json={"records": [
        {"index_id": mem.index_id, "type": "commitment", "key": "bank-call", "text": "Calls the bank back.",
         "commitment": None}]}, headers=mem.anna())
    assert_error(batch, 422, param="records[0].commitment")
    # A new keyed commitment sent with null gets the defaults, as any new commitment does.
    fresh = upsert(mem.bob(), commitment=None)
    assert fresh.status_code == 201 and fresh.json()["commitment"] == {"status": "open", "due_at": None,
                                                                       "promised_to": None}


def _contest(db: Any, first: str, second: str) -> None:
    """Mark two records contested as maintenance's contested marking does (EXT-16): each names the other, with a
    history version whose partner is the other record."""
    for record_id, partner in ((first, second), (second, first)):
        db.execute("UPDATE memory_records SET contested = true, contested_with = %s, version = version + 1 "
                   "WHERE id = %s", (partner, record_id))
        db.execute("INSERT INTO memory_versions (org_id, record_id, version, at, action, actor_type, actor_id, "
                   "partner_id, text, metadata, labels, confidence, tags, priority, expires_at, status, verified, "
                   "commitment) SELECT org_id, id, version, clock_timestamp(), 'updated', 'system', 'maintenance', "
                   "%s, text, metadata, labels, confidence, tags, priority, expires_at, status, verified, commitment "
                   "FROM memory_records WHERE id = %s", (partner, record_id))


def test_mem_16_17_history_partners_are_named_to_readers_who_may_see_them(mem: Mem, client: Any, db: Any) -> None:
    mine = mem.write(mem.anna(), "The office is in Delft.")["id"]
    shared = mem.write(mem.nobody, "The office is in Utrecht.")["id"]
    _contest(db, mine, shared)

    def partners(record_id: str, headers: dict[str, str]) -> list[str | None]:
        response = client.get(f"/memory/{record_id}/history", headers=headers)
        assert response.status_code == 200, response.text
        return [v["partner_id"] for v in response.json()["versions"]]

    # Anna sees the shared partner on her record, so its history names it too; so do administrators.
    assert client.get(f"/memory/{mine}", headers=mem.anna()).json()["contested_with"] == shared
    assert partners(mine, mem.anna()) == [None, shared]
    assert partners(mine, mem.admin) == [None, shared]
    assert partners(shared, mem.anna()) == [None, mine]
    # Bob sees the shared record but not Anna's: its partner is hidden from him, on the record and in history.
    assert client.get(f"/memory/{shared}", headers=mem.bob()).json()["contested_with"] is None
    assert partners(shared, mem.bob()) == [None, None]
    assert partners(shared, mem.admin) == [None, mine]


def test_mem_17_history_lists_versions_confirmations_and_partners(mem: Mem, client: Any) -> None:
    import json

    tool = f"/tools/memory__{mem.index_id}__write/call"
    old = json.loads(client.post(tool, json={"arguments": {"type": "preference", "text": "Likes tea."}},
                                 headers=mem.anna()).json()["output"])["memory_id"]
    client.post(tool, json={"arguments": {"type": "preference", "text": "Likes tea"}}, headers=mem.anna())
    new = json.loads(client.post(tool, json={"arguments": {"type": "preference", "text": "Likes coffee.",
                                                           "replaces": old}},
                                 headers=mem.anna()).json()["output"])["memory_id"]
    history = client.get(f"/memory/{old}/history", headers=mem.anna()).json()
    assert [(v["version"], v["action"]) for v in history["versions"]] == [(1, "created"), (2, "confirmed"),
                                                                          (3, "replaced")]
    assert history["versions"][2]["partner_id"] == new
    assert history["replaced_by"]["id"] == new and history["replaces"] is None
    forward = client.get(f"/memory/{new}/history", headers=mem.anna()).json()
    assert forward["replaces"]["id"] == old and forward["replaces"]["status"] == "replaced"
    assert_error(client.get(f"/memory/{old}/history", headers=mem.bob()), 404)


def test_mem_18_verify_is_for_administrators_only(mem: Mem, client: Any, db: Any) -> None:
    record = mem.write(mem.anna(), "Is a vegetarian.")
    db.execute("UPDATE memory_records SET updated_at = now() - interval '3 days' WHERE id = %s", (record["id"],))
    assert_error(client.post(f"/memory/{record['id']}/verify", headers=mem.anna()), 403)
    assert_error(client.post(f"/memory/{record['id']}/verify", headers=mem.nobody), 403)
    token = mem.org.subject_token(mem.key, "anna")
    from tests.helpers import bearer

    assert_error(client.post(f"/memory/{record['id']}/verify", headers=bearer(token)), 403)
    verified = client.post(f"/memory/{record['id']}/verify", headers=mem.admin)
    assert verified.status_code == 200, verified.text
    assert verified.json()["verified"] is True and verified.json()["version"] == 2
    age_days = db.execute("SELECT extract(epoch FROM now() - updated_at) / 86400 FROM memory_records WHERE id = %s",
                          (record["id"],)).fetchone()[0]
    assert age_days > 2.9  # verification does not restart the decay age (MEM-9)
    assert client.get(f"/memory/{record['id']}", headers=mem.anna()).json()["verified"] is True
    assert_error(client.post("/memory/mem_00000000000000000000000000/verify", headers=mem.admin), 404)


def test_mem_17_a_record_written_during_a_turn_keeps_its_provenance(mem: Mem, client: Any, settings: Any,
                                                                   database_url: str) -> None:
    """The turns domain runs the write tool with the turn's ids; the record keeps them (MEM-17)."""
    import json

    from backend.domains.tools import service as tools
    from tests.helpers import as_request

    provenance = {"thread_id": "thr_01j0000000000000000000000a", "response_id": "resp_01j0000000000000000000000a",
                  "item_id": "itm_01j0000000000000000000000a"}

    async def during_a_turn(ctx: Any) -> str:
        return await tools.call(ctx, f"memory__{mem.index_id}__write",
                                {"type": "fact", "text": "Flies to Oslo on Monday."}, None, provenance=provenance)

    answer = json.loads(as_request(database_url, settings, mem.key, "anna", during_a_turn))
    record = client.get(f"/memory/{answer['memory_id']}", headers=mem.anna()).json()
    assert record["provenance"] == provenance and record["source"] == "model"


def test_mem_1_arbitrary_bodies_are_answered_never_with_500(org: Any, client: Any) -> None:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from tests.memory.conftest import make_index, writer_key

    index_id = make_index(org)
    headers = {"Authorization": f"Bearer {writer_key(org)}"}
    numbers = st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    scalars = st.none() | st.booleans() | numbers | st.text(max_size=40)
    values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8),
                                                                                              inner, max_size=4),
                          max_leaves=8)
    fields = st.sampled_from(["type", "text", "metadata", "labels", "confidence", "key", "tags", "priority",
                              "expires_at", "commitment", "episode", "subject"])
    bodies = st.dictionaries(fields, values, max_size=6)

    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
    @given(body=bodies)
    def check(body: dict[str, Any]) -> None:
        response = client.post("/memory", json={"index_id": index_id, **body}, headers=headers)
        assert response.status_code in (200, 201, 400, 403, 404, 422), response.text
        if response.status_code >= 400:
            assert response.json()["param"] is not None, response.text

    check()


def test_plt_14_a_nul_character_anywhere_is_422_naming_where(mem: Mem, client: Any, db: Any) -> None:
    """PostgreSQL cannot store U+0000; it must be refused as bad input, never reach SQL as a 500."""
    record = mem.write(mem.anna(), "fine")
    for change, param in [({"text": "a\x00b"}, "text"), ({"metadata": {"k": ["ok", "a\x00"]}}, "metadata.k[1]"),
                          ({"metadata": {"k\x00": 1}}, "metadata.k\x00"), ({"tags": ["a\x00"]}, "tags[0]"),
                          ({"key": "k\x00"}, "key"), ({"labels": {"x": "\x00y"}}, "labels.x")]:
        body = {"index_id": mem.index_id, "type": "fact", "text": "t", **change}
        assert_error(client.post("/memory", json=body, headers=mem.anna()), 422, param=param)
    assert_error(client.post("/memory/batch", json={"records": [{"index_id": mem.index_id, "type": "fact",
                                                                 "text": "\x00"}]}, headers=mem.anna()),
                 422, param="records[0].text")
    assert_error(client.patch(f"/memory/{record['id']}", json={"text": "\x00"}, headers=mem.anna()), 422,
                 param="text")
    for path, params, param in [("/memory", {"q": "a\x00"}, "q"), ("/memory", {"metadata": "k:\x00"}, "metadata"),
                                ("/memory/search", {"q": "\x00"}, "q"), ("/memory/by-tag", {"tag": "\x00"}, "tag"),
                                ("/memory/recall", {"index_id": "idx\x00"}, "index_id"),
                                ("/memory/expiring", {"within": "7d", "type": ["fact", "\x00"]}, "type"),
                                ("/memory/mem%00x", {}, "record_id"), ("/memory/mem%00x/history", {}, "record_id")]:
        assert_error(client.get(path, params=params, headers=mem.anna()), 422, param=param)
    assert_error(client.delete("/memory/mem%00x", headers=mem.anna()), 422, param="record_id")
    assert_error(client.post(mem.tool("search"), json={"arguments": {"query": "\x00"}}, headers=mem.anna()), 422,
                 param="arguments.query")
    assert_error(client.post(mem.tool("write"), json={"arguments": {"type": "fact", "text": "\x00"}},
                             headers=mem.anna()), 422, param="arguments.text")
    assert mem.counts(db)[0] == 1


def test_mem_4_concurrent_key_upserts_never_duplicate(mem: Mem, live_api: str, db: Any) -> None:
    """Twelve requests with the same key at once, over real HTTP: one record, one version per request."""
    from concurrent.futures import ThreadPoolExecutor

    import httpx

    def post(i: int) -> int:
        body = {"index_id": mem.index_id, "type": "fact", "key": "race", "text": f"attempt {i}"}
        return httpx.post(f"{live_api}/memory", json=body, headers=mem.anna(), timeout=30).status_code

    with ThreadPoolExecutor(max_workers=12) as pool:
        statuses = sorted(pool.map(post, range(12)))
    assert statuses == [200] * 11 + [201]
    rows = db.execute("SELECT id, version FROM memory_records WHERE index_id = %s", (mem.index_id,)).fetchall()
    assert len(rows) == 1 and rows[0][1] == 12
    assert mem.counts(db) == (1, 12)


def test_mem_5_a_large_batch_stores_each_record_as_single_writes_do(mem: Mem, client: Any, db: Any) -> None:
    """Batches of many records go through COPY and a staging table (backend/domains/memory/bulk.py): every
    field, the history version and the search vector come out as a single POST /memory writes them."""
    bodies = [{"index_id": mem.index_id, "type": ("fact", "preference", "commitment")[n % 3],
               "text": f"Batch record {n}: tab\there, quote ' and \\ backslash, ünïcode.",
               "metadata": {"n": n, "nested": {"list": [1, "two", None]}}, "labels": {"department": "payroll"},
               "confidence": 0.5 + n / 1000, "tags": [f"T{n % 4}", "batch"], "priority": ("low", "high")[n % 2],
               "expires_at": "2031-01-01T00:00:00+01:00" if n % 5 == 0 else None,
               **({"commitment": {"status": "open", "due_at": "2031-02-01T09:00:00Z"}} if n % 3 == 2 else {})}
              for n in range(120)]
    batch = client.post("/memory/batch", json={"records": bodies}, headers=mem.anna())
    assert batch.status_code == 201, batch.text
    singles = []
    for body in bodies:
        single = client.post("/memory", json=body, headers=mem.anna())
        assert single.status_code == 201, single.text
        singles.append(single.json())
    moment = {"id", "created_at", "updated_at"}
    by_batch = [{k: v for k, v in r.items() if k not in moment} for r in batch.json()["data"]]
    assert by_batch == [{k: v for k, v in r.items() if k not in moment} for r in singles]
    ids = [r["id"] for r in batch.json()["data"]]
    stored = db.execute("SELECT count(*), count(*) FILTER (WHERE search IS NOT NULL), (SELECT count(*) FROM "
                        "memory_versions WHERE record_id = ANY(%s)) FROM memory_records WHERE id = ANY(%s)",
                        (ids, ids)).fetchone()
    assert stored == (120, 120, 120)
    found = client.get("/memory/search", params={"index_id": mem.index_id, "q": "backslash ünïcode"},
                       headers=mem.anna())
    assert found.status_code == 200 and len(found.json()["data"]) >= 10


def test_mem_5_two_staged_batches_in_one_transaction_write_each_row_once(mem: Mem, database_url: str,
                                                                          db: Any) -> None:
    """The staging table is emptied after each move, so a second batch in the same transaction (extraction
    writes several windows' records in one) moves only its own rows."""
    from backend.domains.memory import bulk
    from backend.domains.memory.rules import norm_hash
    from backend.ids import new_id
    from tests.helpers import in_transaction

    def rows(prefix: str) -> list[dict[str, Any]]:
        return [{"org_id": mem.org.org_id, "id": new_id("mem"), "index_id": mem.index_id, "subject": "anna",
                 "type": "fact", "text": f"{prefix} {n}", "norm_hash": norm_hash(f"{prefix} {n}"), "metadata": {},
                 "labels": {}, "confidence": 1.0, "source": "api", "verified": False, "key": None, "tags": [],
                 "priority": "normal", "expires_at": None, "commitment": None, "provenance": None, "episode": None}
                for n in range(bulk.SMALLEST)]

    async def twice(session: Any) -> None:
        from backend.db.tenant import use_org

        await use_org(session, mem.org.org_id)
        for prefix in ("first staged", "second staged"):
            batch = rows(prefix)
            assert bulk.suits(batch)
            await bulk.insert(session, batch)

    in_transaction(database_url, twice)
    counted = db.execute("SELECT count(*), count(DISTINCT text) FROM memory_records WHERE text LIKE '%% staged %%'"
                         ).fetchone()
    assert counted == (2 * bulk.SMALLEST, 2 * bulk.SMALLEST)
