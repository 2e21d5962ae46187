"""THR-6 deletion (content gone, tombstone kept) and erasing a person from threads."""

from __future__ import annotations

import asyncio

from backend.db.engine import make_engine, make_sessionmaker
from backend.db.tenant import use_org
from backend.domains.threads.repository import erase_subject as erase_subject_threads
from tests.helpers import assert_error, bearer
from tests.threads.util import append, group_policy, msg, new_thread

THREAD_TABLES = ("threads", "thread_items", "thread_item_notes", "thread_states", "thread_summaries")


def _summary(db, org_id: str, thread_id: str, text: str) -> None:
    db.execute("INSERT INTO thread_summaries (org_id, id, thread_id, from_position, to_position, level, model, text) "
               "VALUES (%s, %s, %s, 1, 2, 1, 'helper', %s)", (org_id, f"sum_{thread_id[4:]}", thread_id, text))


def test_thr_6_delete_removes_content_and_keeps_a_tombstone(client, org, db):
    key = bearer(org.key)
    thread = new_thread(client, key, metadata={"dossier": "4711"}, labels={"department": "payroll"},
                        items=[msg("user", "geheim bericht"), msg("assistant", "geheim antwoord")])
    other = new_thread(client, key, items=[msg("user", "blijft staan")])
    tid = thread["id"]
    client.put(f"/threads/{tid}/items/{thread['items'][0]['id']}/metadata", json={"metadata": {"k": "geheim"}},
               headers=key)
    client.put(f"/threads/{tid}/state", json={"state": {"goal": "geheim"}}, headers=key)
    _summary(db, org.org_id, tid, "geheime samenvatting")

    assert client.delete(f"/threads/{tid}", headers=key).status_code == 204
    for url in (f"/threads/{tid}", f"/threads/{tid}/items", f"/threads/{tid}/state", f"/threads/{tid}/summaries",
                f"/threads/{tid}/items/{thread['items'][0]['id']}"):
        assert_error(client.get(url, headers=key), 404)
    assert_error(client.delete(f"/threads/{tid}", headers=key), 404)
    assert_error(client.post(f"/threads/{tid}/items", json={"items": [msg("user", "x")]}, headers=key), 404)
    assert [t["id"] for t in client.get("/threads", headers=key).json()["data"]] == [other["id"]]

    tombstone = db.execute("SELECT subject, metadata, labels, deleted_at IS NOT NULL FROM threads WHERE id = %s",
                           (tid,)).fetchone()
    assert tombstone == (None, {}, {}, True)
    for table in THREAD_TABLES[1:]:
        assert db.execute(f"SELECT count(*) FROM {table} WHERE thread_id = %s", (tid,)).fetchone()[0] == 0
    for table in THREAD_TABLES:
        assert db.execute(f"SELECT count(*) FROM {table} t WHERE t::text LIKE '%%geheim%%'").fetchone()[0] == 0
    assert db.execute("SELECT count(*) FROM thread_items WHERE thread_id = %s", (other["id"],)).fetchone()[0] == 1
    event = db.execute("SELECT actor_type, outcome FROM audit_events WHERE action = 'thread.deleted' "
                       "AND object_id = %s", (tid,)).fetchone()
    assert event == ("key", "allowed")


def test_thr_6_erasing_a_person_removes_her_threads_items_notes_and_state(client, org, other_org, settings,
                                                                        database_url, db):
    client.app.state.settings = settings.with_overrides(threads_group_reach_by_rule=True)
    key = org.make_key(name="group", policy=group_policy())["secret"]
    anna, bob = bearer(key, "anna"), bearer(key, "bob")
    annas = new_thread(client, anna, metadata={"note": "CANARY-ANNA-META"},
                       items=[msg("user", "CANARY-ANNA-1 mijn eigen gesprek")])
    client.put(f"/threads/{annas['id']}/state", json={"state": {"goal": "CANARY-ANNA-STATE"}}, headers=anna)
    _summary(db, org.org_id, annas["id"], "CANARY-ANNA-SUMMARY")
    deleted = new_thread(client, anna, items=[msg("user", "CANARY-ANNA-TOMBSTONE")])
    client.delete(f"/threads/{deleted['id']}", headers=anna)
    bobs = new_thread(client, bob, labels={"participants": ["anna", "bob"]},
                      items=[msg("user", "BOB-KEEP vraag van Bob")])
    her_item = append(client, anna, bobs["id"], msg("user", "CANARY-ANNA-2 in Bobs gesprek"))[0]
    bob_after = append(client, bob, bobs["id"], msg("assistant", "BOB-KEEP antwoord"))[0]
    bob_item = bobs["items"][0]["id"]
    client.put(f"/threads/{bobs['id']}/items/{bob_item}/metadata", json={"metadata": {"x": "CANARY-ANNA-3"}},
               headers=anna)
    client.put(f"/threads/{bobs['id']}/items/{bob_item}/metadata", json={"metadata": {"x": "BOB-KEEP-NOTE"}},
               headers=bob)
    client.put(f"/threads/{bobs['id']}/items/{her_item['id']}/metadata", json={"metadata": {"x": "on-her-item"}},
               headers=bob)
    client.put(f"/threads/{bobs['id']}/state", json={"state": {"goal": "BOB-KEEP-STATE"}}, headers=bob)
    # Through another key of the organisation she is the same person.
    second_key = org.make_key(name="second")["secret"]
    other = new_thread(client, bearer(second_key, "anna"), items=[msg("user", "CANARY-ANNA-OTHER-KEY")])

    # In another organisation, an `anna` is another person.
    elsewhere = new_thread(client, bearer(other_org.key, "anna"), items=[msg("user", "OTHER-ORG-ANNA")])

    async def erase() -> dict[str, int]:
        engine = make_engine(database_url, pool_size=1)
        try:
            async with make_sessionmaker(engine)() as session:
                await use_org(session, org.org_id)  # row-level security: as the erasure's request sets it
                async with session.begin():
                    return await erase_subject_threads(session, org.org_id, "anna")
        finally:
            await engine.dispose()

    counts = asyncio.run(erase())
    assert counts == {"working_states": 1, "summaries": 1, "notes": 2, "items": 3, "threads": 3,
                      "labelled_threads": 1}
    for table in THREAD_TABLES:
        assert db.execute(f"SELECT count(*) FROM {table} t WHERE t::text LIKE '%%CANARY-ANNA%%'").fetchone()[0] == 0
        assert db.execute(f"SELECT count(*) FROM {table} t WHERE t::text LIKE '%%\"anna\"%%' AND org_id = %s",
                          (org.org_id,)).fetchone()[0] == 0
    assert db.execute("SELECT count(*) FROM thread_items WHERE subject = 'anna' AND org_id = %s",
                      (org.org_id,)).fetchone()[0] == 0
    assert client.get(f"/threads/{elsewhere['id']}/items", headers=bearer(other_org.key)).json()["items"][0][
        "content"] == "OTHER-ORG-ANNA"

    # Bob's thread, his items, his own note and his state stay; the participants label loses Anna only.
    kept = client.get(f"/threads/{bobs['id']}", headers=bob).json()
    assert kept["labels"] == {"participants": ["bob"]}
    items = client.get(f"/threads/{bobs['id']}/items", headers=bob).json()["items"]
    assert [i["id"] for i in items] == [bob_item, bob_after["id"]]
    notes = client.get(f"/threads/{bobs['id']}/items/{bob_item}/metadata", headers=bearer(key)).json()["data"]
    assert [(n["by"], n["metadata"]) for n in notes] == [("bob", {"x": "BOB-KEEP-NOTE"})]
    assert client.get(f"/threads/{bobs['id']}/state", headers=bob).json()["state"] == {"goal": "BOB-KEEP-STATE"}
    # The same id erased again finds nothing more.
    assert set(asyncio.run(erase()).values()) == {0}
    assert_error(client.get(f"/threads/{other['id']}", headers=bearer(second_key)), 404)
