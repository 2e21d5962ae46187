"""The SQL that appends items to a thread (THR-3, THR-4): the threads domain's, and a turn's, whose accepting insert
and closing update carry its items in the same statement (`append_ctes`). Apart from threads.repository, which
imports the turns' repository (a thread's deletion forgets its responses), so that the turns' repository can import
this."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from psycopg.types.json import Jsonb
from sqlalchemy import BigInteger, Text, bindparam, column, text
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.ext.asyncio import AsyncSession

from backend.db.prepared import Prepared

# Items of a request arrive as arrays, one element per item, in order; `n` counts from 1. Their positions follow
# the thread's last one and their times are a microsecond apart, so time order (search) agrees with position order
# within a request.
_ITEMS = """unnest(CAST(:ids AS text[]), CAST(:types AS text[]), CAST(:roles AS text[]), CAST(:subjects AS text[]),
           CAST(:response_ids AS text[]), CAST(:bodies AS jsonb[]), CAST(:texts AS text[]))
    WITH ORDINALITY AS item(id, type, role, subject, response_id, body, text, n)"""
_INSERTED = """INSERT INTO thread_items (org_id, thread_id, position, id, type, role, subject, response_id, body, text,
                          created_at)
SELECT :org_id, :thread_id, {first} + item.n - 1, item.id, item.type, item.role, item.subject, item.response_id,
       item.body, item.text, {at} + (item.n - 1) * interval '1 microsecond'
FROM {source}
RETURNING id, thread_id, position, type, role, subject, response_id, body, created_at"""
_ITEM_BINDS = (bindparam("org_id", type_=Text), bindparam("thread_id", type_=Text),
               bindparam("count", type_=BigInteger))
# THR-4: the thread's row lock (the UPDATE) orders concurrent appenders until their transactions end; a deleted
# thread takes no positions, so nothing is inserted.
_TAKEN = ("UPDATE threads SET last_position = last_position + :count, updated_at = clock_timestamp() "
          "WHERE org_id = :org_id AND id = :thread_id AND deleted_at IS NULL "
          "RETURNING last_position - :count + 1 AS first, updated_at")
_INSERTED_AFTER_TAKEN = _INSERTED.format(first="taken.first", at="taken.updated_at", source="taken, " + _ITEMS)
_APPEND = Prepared(text(f"WITH taken AS ({_TAKEN})\n{_INSERTED_AFTER_TAKEN}").bindparams(*_ITEM_BINDS))
# A new thread with its first `count` positions taken, for the items that open it.
_OPENED = ("INSERT INTO threads (org_id, id, subject, labels, metadata, last_position, updated_at) "
           "VALUES (:org_id, :thread_id, :thread_owner, CAST(:thread_labels AS jsonb), "
           "CAST(:thread_metadata AS jsonb), :count, clock_timestamp()) RETURNING 1 AS first, updated_at")
_THREAD_BINDS = (bindparam("thread_owner", type_=Text), bindparam("thread_labels", type_=JSONB),
                 bindparam("thread_metadata", type_=JSONB))


def append_ctes(*, new_thread: bool = False) -> tuple[Any, Any]:
    """`append_items` as two CTEs of another statement, for a write that also keeps items (a turn's accepting
    insert and its closing update): a round trip fewer. The first, `taken`, takes the thread's next positions, or
    with `new_thread` inserts the thread with its first positions taken (`thread_owner`, `thread_labels` and
    `thread_metadata` then name its owner, labels and metadata); the second, `items_in`, inserts the items there
    and returns them as `append_items` does. They take `append_params`. A deleted thread takes no positions, and
    an empty `items_in` shows it."""
    binds = (*_ITEM_BINDS, *_THREAD_BINDS) if new_thread else _ITEM_BINDS
    taken = text(_OPENED if new_thread else _TAKEN).bindparams(*binds).columns(
        column("first"), column("updated_at")).cte("taken")
    inserted = text(_INSERTED_AFTER_TAKEN).columns(column("position")).cte("items_in")
    return taken, inserted


def append_params(org_id: str, thread_id: str, rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    return {"org_id": org_id, "thread_id": thread_id, "count": len(rows), **_item_arrays(rows)}


def _item_arrays(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    return {"ids": [r["id"] for r in rows], "types": [r["type"] for r in rows], "roles": [r["role"] for r in rows],
            "subjects": [r["subject"] for r in rows], "response_ids": [r["response_id"] for r in rows],
            "bodies": [Jsonb(r["body"]) for r in rows], "texts": [r["text"] for r in rows]}


async def append_items(db: AsyncSession, org_id: str, thread_id: str, rows: Sequence[dict[str, Any]]
                       ) -> list[dict[str, Any]] | None:
    """Insert `rows` (id, type, role, subject, response_id, body, text) at the thread's next positions, taken in
    the same statement. In position order; None when the thread was deleted since it was read."""
    found = await _APPEND.all(db, append_params(org_id, thread_id, rows))
    if rows and not found:
        return None
    return sorted(found, key=lambda r: r["position"])
