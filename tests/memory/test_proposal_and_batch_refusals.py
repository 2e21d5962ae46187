"""Refusals found by an audit of the routes that count or quote records: promotion proposals need `memory` as every
memory route does (PLT-6), and a batch's policy refusal names the record it refuses (MEM-5)."""

from __future__ import annotations

from typing import Any

from tests.extraction.util import new_store
from tests.helpers import Org, assert_error, bearer

CANTEEN = "The canteen closes at two."


def _proposal_on_two_peoples_records(org: Org, db: Any, store: str) -> tuple[str, list[str]]:
    """A store with Anna's and Bob's own record of the same words and the open proposal the maintenance pass makes
    of them (rows as `proposals.repository.insert_proposal` writes them)."""
    index_id = new_store(org, store)
    record_ids = []
    for person in ("anna", "bob"):
        response = org.client.post("/memory", json={"index_id": index_id, "type": "fact", "text": CANTEEN},
                                   headers=bearer(org.key, person))
        assert response.status_code == 201, response.text
        record_ids.append(response.json()["id"])
    db.execute("INSERT INTO memory_proposals (org_id, id, index_id, type, text, norm_hash, basis) "
               "VALUES (%s, %s, %s, 'fact', %s, 'probe-hash', 'same_text')", (org.org_id, f"prp_{store}", index_id,
                                                                              CANTEEN))
    for record_id, person in zip(record_ids, ("anna", "bob"), strict=True):
        db.execute("INSERT INTO memory_proposal_evidence (org_id, proposal_id, record_id, subject) "
                   "VALUES (%s, %s, %s, %s)", (org.org_id, f"prp_{store}", record_id, person))
    return index_id, record_ids


def test_plt_6_a_management_key_without_memory_cannot_read_proposals(org: Org, db: Any) -> None:
    """A key holding only `management` (no `memory`) is refused on GET /memory and /memory/export, yet GET
    /memory/proposals answered 200 with each proposal's text and evidence: Anna's and Bob's record ids, owners and
    texts. Now 403 `capability_missing`, as every memory route (PLT-6; 02-memory: a key needs `memory` here)."""
    _, record_ids = _proposal_on_two_peoples_records(org, db, "read")
    management_only = bearer(org.make_key(["management"])["secret"])
    assert_error(org.client.get("/memory", headers=management_only), 403, code="capability_missing")
    assert_error(org.client.get("/memory/export", params={"format": "ndjson"}, headers=management_only), 403,
                 code="capability_missing")
    response = org.client.get("/memory/proposals", headers=management_only)
    assert record_ids[0] not in response.text and CANTEEN not in response.text, response.text
    assert_error(response, 403, code="capability_missing")


def test_plt_6_a_management_key_without_memory_cannot_dismiss_a_proposal(org: Org, db: Any) -> None:
    """A key holding only `management` dismissed a promotion proposal (200, with the evidence records' texts), and
    a dismissed text is never proposed again: a key that may not touch memory decided what becomes shared memory.
    Now 403 `capability_missing` (PLT-6), and the proposal stays open."""
    _proposal_on_two_peoples_records(org, db, "dismiss")
    management_only = bearer(org.make_key(["management"])["secret"])
    response = org.client.post("/memory/proposals/prp_dismiss/dismiss", headers=management_only)
    status = db.execute("SELECT status FROM memory_proposals WHERE id = 'prp_dismiss'").fetchone()[0]
    assert status == "open", response.text
    assert_error(response, 403, code="capability_missing")


def test_mem_5_a_batch_refused_by_policy_names_the_refused_record(org: Org, db: Any) -> None:
    """POST /memory/batch whose second record carries labels a `memory_write` deny rule refuses answered 403
    `policy_denied` with `param: null`, so a client of a 1,000-record batch could not tell which record to fix.
    Now `records[1]` (MEM-5: the first invalid one is named by its position), and nothing is written."""
    index_id = new_store(org, "batch")
    policy = {"indexes": ["*"], "rules": [
        {"id": "write", "effect": "permit", "kind": "memory_write"},
        {"id": "no-ceo", "effect": "deny", "kind": "memory_write", "match": {"labels": {"dept": "ceo"}}}]}
    key = bearer(org.make_key(policy=policy)["secret"])
    records = [{"index_id": index_id, "type": "fact", "text": "Fine.", "labels": {"dept": "sales"}},
               {"index_id": index_id, "type": "fact", "text": "Refused.", "labels": {"dept": "ceo"}}]
    response = org.client.post("/memory/batch", json={"records": records}, headers=key)
    assert db.execute("SELECT count(*) FROM memory_records WHERE index_id = %s", (index_id,)).fetchone()[0] == 0
    assert_error(response, 403, "policy_denied", "records[1]")
