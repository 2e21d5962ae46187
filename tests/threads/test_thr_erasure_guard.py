"""MEM-19 for threads: work that began before a person was erased never writes her back.

Each scenario opens a transaction as the API would for Anna, lets `DELETE /subjects/anna` commit while it is
open, then tries a write of hers: a new thread, items in another thread, a note, a working state; and a write by
someone else that adds her id to a thread's participants. Every one is refused with 409 `subject_erased` and
leaves nothing of hers.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from backend import contexts
from backend.db.engine import make_engine, make_sessionmaker
from backend.domains.threads import service
from backend.errors import Conflict
from shared.schemas.threads import MessageIn, ThreadCreate, ThreadPatch
from tests.helpers import Org, bearer
from tests.threads.util import msg, new_thread

OPEN_THREADS = {"indexes": ["*"], "settings": {}, "rules": [
    {"id": "threads", "effect": "permit", "kind": "thread"},
    {"id": "records", "effect": "permit", "kind": "memory_record"}]}


def _late(database_url: str, settings: Any, key: str, subject: str | None, client: Any, org: Org, person: str,
          write: Callable[[Any], Awaitable[Any]]) -> str:
    """Open a transaction for `subject`, erase `person` from another connection, then run `write`."""

    async def go() -> str:
        engine = make_engine(database_url, pool_size=1)
        try:
            async with make_sessionmaker(engine)() as session, session.begin():
                ctx = await contexts.for_credential(session, settings, authorization=f"Bearer {key}",
                                                    subject_header=json.dumps({"id": subject}) if subject else None)
                ctx.require_threads()
                erased = await asyncio.to_thread(client.delete, f"/subjects/{person}", headers=org.admin)
                assert erased.status_code == 200, erased.text
                with pytest.raises(Conflict) as refused:
                    await write(ctx)
                return refused.value.code
        finally:
            await engine.dispose()

    return asyncio.run(go())


def _traces(db: Any, person: str) -> list[str]:
    found = []
    for table, column in (("threads", "subject"), ("thread_items", "subject"), ("thread_item_notes", "author")):
        if db.execute(f"SELECT count(*) FROM {table} WHERE {column} = %s", (person,)).fetchone()[0]:
            found.append(table)
    if db.execute("SELECT count(*) FROM threads WHERE labels::text LIKE %s", (f"%{person}%",)).fetchone()[0]:
        found.append("labels")
    return found


def test_mem_19_late_thread_writes_of_an_erased_person_are_refused(client, org, db, database_url, settings):
    key = org.make_key(policy=OPEN_THREADS)["secret"]
    shared = new_thread(client, bearer(key), items=[msg("user", "a shared question")])
    item_id = shared["items"][0]["id"]
    writes: dict[str, Callable[[Any], Awaitable[Any]]] = {
        "new thread": lambda ctx: service.create_thread(ctx, ThreadCreate(items=[MessageIn(
            role="user", content="hello")])),
        "items elsewhere": lambda ctx: service.append_items(ctx, shared["id"], [MessageIn(
            role="user", content="me again")]),
        "note": lambda ctx: service.put_note(ctx, shared["id"], item_id, {"mood": "fine"}),
    }
    for name, write in writes.items():
        person = f"anna-{name.replace(' ', '-')}"
        assert new_thread(client, bearer(key, person), items=[msg("user", "before")])["subject"] == person
        assert _late(database_url, settings, key, person, client, org, person, write) == "subject_erased", name
        assert _traces(db, person) == [], name

    person = "anna-state"
    assert new_thread(client, bearer(key, person), items=[msg("user", "mine")])
    state = _late(database_url, settings, key, person, client, org, person,
                  lambda ctx: service.write_state(ctx, shared["id"], replace={"note": person}))
    assert state == "subject_erased"
    assert db.execute("SELECT count(*) FROM thread_states WHERE thread_id = %s", (shared["id"],)).fetchone()[0] == 0

    # A write by someone else that would name her again: her id added to a thread's participants.
    person = "anna-relabelled"
    assert new_thread(client, bearer(key, person), items=[msg("user", "mine")])
    relabel = _late(database_url, settings, key, None, client, org, person,
                    lambda ctx: service.patch_thread(ctx, shared["id"], ThreadPatch(
                        labels={"participants": [person, "bob"]})))
    assert relabel == "subject_erased"
    assert _traces(db, person) == []
