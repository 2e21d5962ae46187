"""Erasing a person (MEM-19): her records go, shared ones stay, nothing readable of her is left anywhere."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import pytest

from backend.domains.audit.service import subject_hash
from tests.helpers import assert_error, bearer
from tests.memory.conftest import Mem


def tables(db: Any) -> list[str]:
    return [r[0] for r in db.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'").fetchall()]


def rows_mentioning(db: Any, needle: str) -> dict[str, int]:
    found = {}
    for table in tables(db):
        count = db.execute(f'SELECT count(*) FROM "{table}" t WHERE t::text LIKE %s', (f"%{needle}%",)).fetchone()[0]
        if count:
            found[table] = count
    return found


def test_mem_19_erasure_leaves_no_trace_and_keeps_shared_records(mem: Mem, client: Any, db: Any,
                                                                 settings: Any, other_org: Any) -> None:
    canary = f"canary{uuid.uuid4().hex[:12]}"
    zoe = f"zoe-{canary}"
    as_zoe = bearer(mem.key, zoe)
    fact = mem.write(as_zoe, f"{canary} keeps bees", tags=[canary], metadata={"note": canary}, key=canary)
    mem.write(as_zoe, f"{canary} promised a jar of honey", type="commitment",
              commitment={"promised_to": canary})
    tool = mem.tool("write")
    client.post(tool, json={"arguments": {"type": "preference", "text": f"{canary} likes lime"}}, headers=as_zoe)
    client.post(tool, json={"arguments": {"type": "preference", "text": f"{canary} likes lime."}}, headers=as_zoe)
    old = json.loads(client.post(tool, json={"arguments": {"type": "fact", "text": f"{canary} lives in Ede"}},
                                 headers=as_zoe).json()["output"])["memory_id"]
    client.post(tool, json={"arguments": {"type": "fact", "text": f"{canary} lives in Delft", "replaces": old}},
                headers=as_zoe)
    client.patch(f"/memory/{fact['id']}", json={"text": f"{canary} keeps two hives"}, headers=as_zoe)
    shared = mem.write(mem.nobody, "Team lunch on Fridays.", labels={"participants": [zoe, "bob"]})
    shared_single = mem.write(mem.nobody, "Desk 4 is taken.", labels={"participants": zoe})
    contested = mem.write(mem.nobody, "The hives are on the roof.")
    db.execute("UPDATE memory_records SET contested = true, contested_with = %s WHERE id = %s",
               (fact["id"], contested["id"]))
    bobs = mem.write(mem.bob(), "Bob keeps a cat.")
    client.get("/memory", params={"subject": zoe, "index_id": mem.index_id}, headers=mem.admin)  # audited read
    reader_key = mem.org.make_key()["secret"]  # no memory_write: a denied, audited write of hers
    client.post("/memory", json={"index_id": mem.index_id, "type": "fact", "text": canary},
                headers=bearer(reader_key, zoe))
    assert rows_mentioning(db, canary), "the canary should be stored before erasure"

    # Who may erase: administrators, or a management key naming nobody; never a subject token.
    token = mem.org.subject_token(mem.key, zoe)
    assert_error(client.delete(f"/subjects/{zoe}", headers=bearer(token)), 403)
    assert_error(client.delete(f"/subjects/{zoe}", headers=as_zoe), 403)
    assert_error(client.delete(f"/subjects/{zoe}", headers=bearer(mem.key, "bob")), 403)
    no_management = mem.org.make_key(capabilities=["knowledge", "memory"])["secret"]
    assert_error(client.delete(f"/subjects/{zoe}", headers=bearer(no_management)), 403)

    elsewhere = client.delete(f"/subjects/{zoe}", headers=other_org.admin)  # another organisation's person
    assert elsewhere.status_code == 200 and elsewhere.json()["counts"]["memory_records"] == 0
    assert mem.list(mem.nobody, subject=zoe) != []

    response = client.delete(f"/subjects/{zoe}", headers=mem.admin)
    assert response.status_code == 200, response.text
    counts = response.json()["counts"]
    assert counts["memory_records"] == 5  # fact, commitment, preference (confirmed once), old and new fact
    assert counts["memory_versions"] == 8  # 2 + 1 + 2 + 2 + 1
    assert counts["memory_records_relabelled"] == 2
    assert rows_mentioning(db, canary) == {}
    assert rows_mentioning(db, zoe) == {}

    # Shared records stay, without her name; Bob's record is untouched; no route returns anything of hers.
    lunch = client.get(f"/memory/{shared['id']}", headers=mem.nobody).json()
    assert lunch["labels"] == {"participants": ["bob"]} and lunch["text"] == "Team lunch on Fridays."
    assert client.get(f"/memory/{shared_single['id']}", headers=mem.nobody).json()["labels"] == {}
    roof = client.get(f"/memory/{contested['id']}", headers=mem.nobody).json()
    assert roof["contested"] is False and roof["contested_with"] is None
    assert client.get(f"/memory/{bobs['id']}", headers=mem.bob()).status_code == 200
    assert mem.list(mem.nobody, subject=zoe) == []
    assert_error(client.get(f"/memory/{fact['id']}", headers=mem.nobody), 404)
    event = db.execute("SELECT actor_type, subject_hash, detail FROM audit_events WHERE action = 'subject.erased' "
                       "AND org_id = %s", (mem.org.org_id,)).fetchone()
    assert event[0] == "admin" and event[1] == subject_hash(settings.secret, mem.org.org_id, zoe)
    assert event[2] == {"counts": counts}
    # Erasing again finds nothing; a management key naming nobody may do it too.
    again = client.delete(f"/subjects/{zoe}", headers=mem.nobody)
    assert again.status_code == 200 and again.json()["counts"]["memory_records"] == 0


def test_mem_19_work_that_began_before_the_erasure_cannot_write_her_back(mem: Mem, client: Any, db: Any,
                                                                         settings: Any, database_url: str) -> None:
    """A transaction that started before the erasure and writes for her afterwards is refused (409)."""
    from backend.domains.memory import writes
    from backend.errors import Conflict
    from shared.schemas.memory import MemoryCreate
    from tests.helpers import as_request

    person = f"late-{uuid.uuid4().hex[:8]}"
    mem.write(bearer(mem.key, person), "written before")

    async def scenario(ctx: Any) -> str:
        item = await writes.prepare(ctx, MemoryCreate(index_id=mem.index_id, type="fact", text="written after"),
                                    source="api")
        # The erasure commits while this transaction is open.
        erased = await asyncio.to_thread(client.delete, f"/subjects/{person}", headers=mem.admin)
        assert erased.status_code == 200, erased.text
        with pytest.raises(Conflict) as refused:
            await writes.write(ctx, [item])
        return refused.value.code

    assert as_request(database_url, settings, mem.key, person, scenario) == "subject_erased"

    # The one-statement write of POST /memory (record, version and erasure check together) refuses her too.
    again = f"late-{uuid.uuid4().hex[:8]}"
    mem.write(bearer(mem.key, again), "written before")

    async def single(ctx: Any) -> str:
        erased = await asyncio.to_thread(client.delete, f"/subjects/{again}", headers=mem.admin)
        assert erased.status_code == 200, erased.text
        with pytest.raises(Conflict) as refused:
            await writes.create(ctx, MemoryCreate(index_id=mem.index_id, type="fact", text="written after"))
        return refused.value.code

    assert as_request(database_url, settings, mem.key, again, single) == "subject_erased"
    assert mem.list(mem.nobody, subject=again) == []
    assert mem.list(mem.nobody, subject=person) == []
    # A request that starts after the erasure may write for the same id again: it is a new start.
    assert mem.write(bearer(mem.key, person), "a new start")["subject"] == person


def test_mem_19_a_write_waiting_for_an_erasure_in_progress_sees_it_once_it_commits(
        mem: Mem, db: Any, settings: Any, database_url: str) -> None:
    """The guard takes the person's lock and reads the erasures in one call (migration 0020). The reading must see
    an erasure that committed while the lock waited for it: one statement doing both would read with a snapshot
    taken before the wait, and write her back."""
    import psycopg

    from backend.domains.erasure import guard
    from backend.errors import Conflict
    from tests.helpers import as_request

    person = f"waiting-{uuid.uuid4().hex[:8]}"
    hashed = subject_hash(settings.secret, mem.org.org_id, person)
    waited: list[float] = []

    async def scenario(ctx: Any) -> str:
        # This transaction has begun (the credential was read). Now an erasure of her starts: it holds her lock
        # and has written its row, uncommitted.
        erasure = await psycopg.AsyncConnection.connect(db.info.dsn)
        await erasure.execute("SELECT pg_advisory_xact_lock(hashtextextended('subject:' || %s || ':' || %s, 0))",
                              (mem.org.org_id, hashed))
        await erasure.execute("INSERT INTO erased_subjects (org_id, subject_hash, erased_at) "
                              "VALUES (%s, %s, clock_timestamp())", (mem.org.org_id, hashed))

        async def commit_later() -> None:
            await asyncio.sleep(0.3)
            await erasure.commit()
            await erasure.close()

        finishing = asyncio.create_task(commit_later())
        started = asyncio.get_running_loop().time()
        try:
            with pytest.raises(Conflict) as refused:
                await guard.refuse_if_erased(ctx.db, ctx.org_id, ctx.settings.secret, [person])
        finally:
            await finishing
        waited.append(asyncio.get_running_loop().time() - started)
        return refused.value.code

    assert as_request(database_url, settings, mem.key, person, scenario) == "subject_erased"
    assert waited[0] >= 0.25  # it did wait for the erasure's lock
