"""Memory writes (MEM-1, MEM-4, MEM-6): a keyed write reaches only a record its writer sees and lands where readers
look after a correction; a tag stays within 64 characters once lowercased."""

from __future__ import annotations

import json
from typing import Any

from tests.helpers import assert_error, bearer
from tests.memory.conftest import Mem


def test_mem_1_a_tag_that_lowercases_longer_than_64_characters_is_422(mem: Mem, client: Any) -> None:
    """`POST /memory` with the tag "İ"×64 (64 characters, within the schema's limit) answered 201 and stored the
    lowercased tag "i̇"×64, 128 characters: `str.lower()` turns U+0130 into two code points. MEM-1 allows tags of
    at most 64 characters and MEM-12 stores them lowercase: now 422 `validation_failed` on `tags[0]`."""
    response = client.post("/memory", headers=mem.anna(),
                           json={"index_id": mem.index_id, "type": "fact", "text": "Tagged.", "tags": ["\u0130" * 64]})
    assert_error(response, 422, "validation_failed", "tags[0]")
    fits = client.post("/memory", headers=mem.anna(),
                       json={"index_id": mem.index_id, "type": "fact", "text": "Tagged.", "tags": ["\u0130" * 32]})
    assert fits.status_code == 201 and fits.json()["tags"] == ["i\u0307" * 32], fits.text


def test_mem_4_a_keyed_write_never_changes_nor_shows_a_record_it_cannot_see(mem: Mem, client: Any, db: Any) -> None:
    """A key whose policy lets it see only `department: payroll` records (but write any) gets 404 for the
    administrator's shared `department: hr` record with `key: "salary"` on GET and PATCH. Yet `POST /memory
    {"type": "fact", "key": "salary", "text": "overwritten"}` with that key answered 200: it overwrote the hidden
    record's text and returned its hidden `metadata` ({"secret": "s3"}), `labels` and `tags` (`find_by_key` took
    no scope). MEM-6: no route has a wider view than GET /memory; PLT-8. Now 403 `policy_denied` on `key`, and
    the record is unchanged."""
    policy = {"indexes": ["*"], "settings": {}, "rules": [
        {"id": "see-payroll", "effect": "permit", "kind": "memory_record", "actions": ["see"],
         "match": {"labels": {"department": "payroll"}}},
        {"id": "write-any", "effect": "permit", "kind": "memory_record", "actions": ["write", "delete"]},
        {"id": "memory-write", "effect": "permit", "kind": "memory_write"}]}
    narrow = bearer(mem.org.make_key(policy=policy)["secret"])
    hidden = client.post("/memory", headers=mem.admin, json={
        "index_id": mem.index_id, "type": "fact", "key": "salary", "text": "CEO salary is 900k",
        "labels": {"department": "hr"}, "metadata": {"secret": "s3"}, "tags": ["confidential"]})
    assert hidden.status_code == 201, hidden.text
    record_id = hidden.json()["id"]
    assert client.get(f"/memory/{record_id}", headers=narrow).status_code == 404  # the key does not see it
    response = client.post("/memory", headers=narrow,
                           json={"index_id": mem.index_id, "type": "fact", "key": "salary", "text": "overwritten"})
    assert_error(response, 403, "policy_denied", "key")
    assert "s3" not in response.text and "confidential" not in response.text
    stored = db.execute("SELECT text FROM memory_records WHERE id = %s", (record_id,)).fetchone()[0]
    assert stored == "CEO salary is 900k"


def test_mem_4_a_keyed_write_after_a_correction_changes_the_correction(mem: Mem, client: Any, db: Any) -> None:
    """A keyed POST after the key's record was corrected (write tool `replaces`) changed the replaced record, which
    no list or recall shows: the write vanished for every reader. Now it changes the correction readers see in its
    place; a correction of another type is 409 `key_replaced` naming it, and nothing is written."""
    first = client.post("/memory", headers=mem.anna(), json={"index_id": mem.index_id, "type": "fact",
                                                             "key": "home", "text": "Lives in Utrecht."})
    assert first.status_code == 201, first.text
    fixed = client.post(mem.tool("write"), headers=mem.anna(), json={"arguments": {
        "type": "fact", "text": "Lives in Leiden.", "replaces": first.json()["id"]}})
    correction_id = json.loads(fixed.json()["output"])["memory_id"]
    again = client.post("/memory", headers=mem.anna(), json={"index_id": mem.index_id, "type": "fact",
                                                             "key": "home", "text": "Lives in Delft."})
    assert again.status_code == 200, again.text
    assert (again.json()["id"], again.json()["text"], again.json()["status"]) == (
        correction_id, "Lives in Delft.", "active")
    listed = client.get("/memory", headers=mem.anna(), params={"index_id": mem.index_id}).json()["data"]
    assert [r["text"] for r in listed] == ["Lives in Delft."]
    stored = db.execute("SELECT text, status FROM memory_records WHERE id = %s", (first.json()["id"],)).fetchone()
    assert stored == ("Lives in Utrecht.", "replaced")

    other = client.post("/memory", headers=mem.anna(), json={"index_id": mem.index_id, "type": "fact",
                                                             "key": "tea", "text": "Likes tea."}).json()
    retyped = client.post(mem.tool("write"), headers=mem.anna(), json={"arguments": {
        "type": "preference", "text": "Prefers green tea.", "replaces": other["id"]}})
    retyped_id = json.loads(retyped.json()["output"])["memory_id"]
    before = mem.counts(db)
    refused = assert_error(client.post("/memory", headers=mem.anna(), json={
        "index_id": mem.index_id, "type": "fact", "key": "tea", "text": "Likes coffee."}), 409, "key_replaced", "key")
    assert retyped_id in refused["message"] and mem.counts(db) == before
