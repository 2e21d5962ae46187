"""MEM-19 with THR-6: erasing a person reaches records, threads, items in others' threads, notes and state."""

from __future__ import annotations

from tests.helpers import bearer

CANARY = "canary-7f3a"


def _grep(db, needle):
    """Every user table whose rows, as text, contain the needle."""
    tables = [r[0] for r in db.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")]
    return [t for t in tables
            if db.execute(f'SELECT count(*) FROM "{t}" x WHERE x::text LIKE %s', (f"%{needle}%",)).fetchone()[0]]


def test_mem_19_thr_6_erasure_removes_every_trace_of_the_person(org, client, db):
    index_id = client.post("/indexes", headers=org.full, json={"name": "support"}).json()["id"]
    anna = bearer(org.key, subject=f"anna-{CANARY}")
    bob = bearer(org.key, subject="bob")
    assert client.post("/memory", headers=anna, json={"index_id": index_id, "type": "fact",
                                                      "text": f"Anna's secret {CANARY}"}).status_code == 201
    assert client.post("/memory", headers=org.full, json={"index_id": index_id, "type": "fact",
                                                         "text": "Shared rule stays"}).status_code == 201
    thread = client.post("/threads", headers=anna, json={"items": [
        {"type": "message", "role": "user", "content": f"hello {CANARY}"}]}).json()
    client.put(f"/threads/{thread['id']}/state", headers=anna, json={"state": {"note": CANARY}})
    item_id = client.get(f"/threads/{thread['id']}/items", headers=anna).json()["items"][0]["id"]
    note = client.put(f"/threads/{thread['id']}/items/{item_id}/metadata", headers=anna,
                      json={"metadata": {"mood": CANARY}})
    assert note.status_code in (200, 201), note.text
    bobs = client.post("/threads", headers=bob, json={"items": [
        {"type": "message", "role": "user", "content": "Bob's own words"}]}).json()
    assert len(_grep(db, CANARY)) >= 4

    erased = client.delete(f"/subjects/anna-{CANARY}", headers=org.admin)
    assert erased.status_code == 200, erased.text
    counts = erased.json()["counts"]
    assert counts["memory_records"] == 1 and counts["items"] == 1 and counts["notes"] == 1
    assert counts["working_states"] == 1
    assert _grep(db, CANARY) == []
    assert client.get(f"/threads/{thread['id']}", headers=org.full).status_code == 404
    assert client.get(f"/threads/{bobs['id']}", headers=bob).status_code == 200
    texts = [r["text"] for r in client.get(f"/memory?index_id={index_id}", headers=org.full).json()["data"]]
    assert texts == ["Shared rule stays"]
    assert "anna" not in str(db.execute("SELECT string_agg(t::text, ' ') FROM audit_events t").fetchone()[0])
