"""Threads with turns for the compaction tests: client items go through the API (their `response_id` is null);
the items of turns are written through the threads repository with the turn's response id, as a turn would."""

from __future__ import annotations

import asyncio
from typing import Any

from sqlalchemy import text

from backend.db.engine import make_engine, make_sessionmaker
from backend.domains.compaction import CompactionSettings, History, history, schedule
from backend.domains.compaction import repository as compaction_repo
from backend.domains.compaction.turns import turn_starts
from backend.domains.threads import repository as threads
from backend.ids import new_id
from tests.helpers import in_transaction
from tests.threads.util import append, msg, new_thread

__all__ = ["append", "call", "in_transaction", "msg", "new_thread", "output", "turn", "write_turn"]
# Rows of thread_items this transaction read, by PostgreSQL's own count.
_READ = text("SELECT COALESCE(seq_tup_read, 0) + COALESCE(idx_tup_fetch, 0) FROM pg_stat_xact_user_tables "
             "WHERE relname = 'thread_items'")


def call(name: str, arguments: str = "{}", call_id: str = "c1") -> dict[str, Any]:
    return {"type": "function_call", "call_id": call_id, "name": name, "arguments": arguments}


def output(text: str, call_id: str = "c1") -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": text}


def turn(n: int) -> list[dict[str, Any]]:
    """A plain turn: the person's message and the answer."""
    return [msg("user", f"question {n}"), msg("assistant", f"answer {n}")]


async def _write(db: Any, org_id: str, thread_id: str, items: list[dict[str, Any]], response_id: str,
                 subject: str | None) -> list[dict[str, Any]]:
    rows = []
    for item in items:
        body = {k: v for k, v in item.items() if k != "type"}
        text = body.get("content") if item["type"] == "message" else None
        rows.append({"id": new_id("itm"), "type": item["type"], "role": item.get("role"), "subject": subject,
                     "response_id": response_id, "body": body, "text": text if isinstance(text, str) else None})
    written = await threads.append_items(db, org_id, thread_id, rows)
    assert written is not None
    return written


def write_turn(database_url: str, org_id: str, thread_id: str, items: list[dict[str, Any]], *,
               response_id: str | None = None, subject: str | None = None) -> list[dict[str, Any]]:
    """Items a turn wrote (all carrying its response id), committed."""
    rid = response_id or new_id("resp")
    return in_transaction(database_url, lambda db: _write(db, org_id, thread_id, items, rid, subject))


def write_turns(database_url: str, org_id: str, thread_id: str, first: int, last: int) -> None:
    async def go(db: Any) -> None:
        for n in range(first, last + 1):
            await _write(db, org_id, thread_id, turn(n), new_id("resp"), None)

    in_transaction(database_url, go)


def fetched_rows(database_url: str, work: Any) -> tuple[Any, int]:
    """`work(session)`'s result and how many thread_items rows the transaction read (PostgreSQL's own count)."""
    async def go() -> tuple[Any, int]:
        engine = make_engine(database_url, pool_size=1, app_role=False)
        try:
            async with make_sessionmaker(engine)() as db, db.begin():
                result = await work(db)
                read = (await db.execute(_READ)).scalar_one()
                return result, int(read)
        finally:
            await engine.dispose()

    return asyncio.run(go())


def turns_of(database_url: str, org_id: str, thread_id: str) -> list[int]:
    """Where the thread's turns start, counted over its stored items."""
    rows = in_transaction(database_url, lambda db: compaction_repo.light_items(db, org_id, thread_id, 0))
    return turn_starts(rows)


def history_of(database_url: str, org_id: str, thread_id: str, settings: CompactionSettings | None = None,
               **options: Any) -> History:
    return in_transaction(database_url, lambda db: history(db, org_id, thread_id, settings or CompactionSettings(),
                                                           **options))


def schedule_job(database_url: str, org_id: str, thread_id: str, key_id: str | None,
                 settings: CompactionSettings | None = None, model_id: str = "scripted") -> bool:
    """What a turn does once it committed: queue the summary job (in a transaction of its own here)."""
    return in_transaction(database_url, lambda db: schedule(db, org_id, thread_id, settings or CompactionSettings(),
                                                            key_id, model_id))
