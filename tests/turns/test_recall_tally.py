"""INJ-8: a turn's recall counts are added up in the serving process and written together (backend/domains/memory/
recall_tally.py), not in the turn's own transaction."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
from litestar.testing import TestClient
from sqlalchemy.engine import make_url

from backend.app import create_app
from backend.config import Settings
from backend.db.engine import make_engine, make_sessionmaker
from backend.domains.memory import recall_tally
from tests.helpers import Org, eventually
from tests.turns.conftest import anna, turn


def _records(client: Any, org: Org) -> tuple[list[str], str]:
    """Two records of anna's, and a key whose turns inject them."""
    index_id = client.post("/indexes", headers=org.full, json={"name": "support"}).json()["id"]
    ids = []
    for text in ("Has a dog named Rex", "Answer in Dutch"):
        created = client.post("/memory", headers=anna(org), json={"index_id": index_id, "type": "fact", "text": text})
        assert created.status_code == 201, created.text
        ids.append(created.json()["id"])
    return ids, str(org.make_key(memory={"injection": {"index_id": index_id}})["secret"])


def _counts(db: Any) -> dict[str, int]:
    return {r[0]: r[1] for r in db.execute("SELECT id, recall_count FROM memory_records")}


def test_inj_8_turns_counts_wait_for_their_interval_and_a_stopping_server_writes_them(
        client: Any, org: Org, scripted: Any, db: Any, settings: Settings, database_url: str) -> None:
    ids, key = _records(client, org)
    patient = settings.with_overrides(recall_flush_seconds=3600)
    with TestClient(create_app(patient, database_url)) as server:
        first = turn(server, anna(org, key), input="Hello")
        turn(server, anna(org, key), input="Again", thread_id=first["thread_id"])
        assert "Has a dog named Rex" in scripted.messages(1)[0]["content"]  # both records were injected
        assert _counts(db) == {ids[0]: 0, ids[1]: 0}  # the turns have committed; their counts wait
    assert _counts(db) == {ids[0]: 2, ids[1]: 2}  # written as the server stopped, two turns in one statement


def test_inj_8_a_turn_that_fails_counts_nothing(client: Any, org: Org, scripted: Any, db: Any) -> None:
    _, key = _records(client, org)
    scripted.fail(500).fail(500).fail(500)
    failed = turn(client, anna(org, key), input="Hello")
    assert failed["status"] == "failed"
    scripted.reset()
    turn(client, anna(org, key), input="Hello again")
    assert eventually(lambda: set(_counts(db).values()) == {1})


def test_inj_8_a_refused_write_keeps_its_counts_for_the_next_one(client: Any, org: Org, db: Any,
                                                                   database_url: str) -> None:
    ids, _ = _records(client, org)
    db.execute("CREATE FUNCTION refuse_recalls() RETURNS trigger LANGUAGE plpgsql AS "
               "$$ BEGIN RAISE EXCEPTION 'recall counts refused by the test'; END $$")
    db.execute("CREATE TRIGGER refuse_recalls BEFORE UPDATE OF recall_count ON memory_records "
               "FOR EACH ROW EXECUTE FUNCTION refuse_recalls()")

    async def count_while_refused() -> None:
        engine = make_engine(database_url, pool_size=1)
        try:
            async with make_sessionmaker(engine)() as session:
                recall_tally.add(session, org.org_id, [ids[0], ids[1], ids[0]], after_seconds=0.05)
            await asyncio.sleep(0.5)  # due several times, refused each time
            assert recall_tally.waiting(engine) == {org.org_id: {ids[0]: 2, ids[1]: 1}}
            db.execute("DROP TRIGGER refuse_recalls ON memory_records")
            for _ in range(100):
                if not recall_tally.waiting(engine):
                    break
                await asyncio.sleep(0.05)
            assert recall_tally.waiting(engine) == {}
        finally:
            await recall_tally.settle()
            await engine.dispose()

    asyncio.run(count_while_refused())
    assert _counts(db) == {ids[0]: 2, ids[1]: 1}


def test_inj_8_counts_being_written_still_wait_and_a_stopping_server_waits_for_their_write(
        client: Any, org: Org, db: Any, database_url: str) -> None:
    ids, _ = _records(client, org)
    plain = make_url(database_url).set(drivername="postgresql").render_as_string(hide_password=False)
    holder = psycopg.connect(plain)  # holds anna's records' rows, so the write waits for them
    holder.execute("SELECT id FROM memory_records FOR UPDATE")

    async def stop_while_writing() -> None:
        engine = make_engine(database_url, pool_size=1)
        try:
            async with make_sessionmaker(engine)() as session:
                recall_tally.add(session, org.org_id, [ids[0], ids[1]], after_seconds=0.01)
            await asyncio.sleep(0.3)  # the write has taken the counts and waits for the rows
            assert recall_tally.waiting(engine) == {org.org_id: {ids[0]: 1, ids[1]: 1}}
            asyncio.get_running_loop().call_later(0.3, holder.rollback)  # the rows free up while the server stops
            await recall_tally.settle()
            assert _counts(db) == {ids[0]: 1, ids[1]: 1}  # settle returned after the busy write, not before
            assert recall_tally.waiting(engine) == {}
        finally:
            await engine.dispose()

    try:
        asyncio.run(stop_while_writing())
    finally:
        holder.close()
