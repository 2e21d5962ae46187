"""SQL of conversation threads. Every read of a thread takes a Scope and applies it in SQL (house rule 2)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from psycopg.errors import ForeignKeyViolation
from sqlalchemy import (
    BigInteger,
    ColumnElement,
    Select,
    Text,
    and_,
    bindparam,
    delete,
    func,
    insert,
    literal,
    or_,
    select,
    text,
    true,
    update,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from backend.access.scope import Scope
from backend.db.models import Org, table_of
from backend.db.models_agents import Agent, AgentVersionRow
from backend.db.models_threads import (
    Thread,
    ThreadItem,
    ThreadItemNote,
    ThreadPseudonym,
    ThreadState,
    ThreadSummary,
)
from backend.db.models_turns import Response
from backend.db.prepared import Prepared, PreparedByShape
from backend.domains.threads.item_writes import append_items as append_items  # the threads domain's name for it
from backend.domains.turns import repository as turns_repo
from shared.schemas.threads import ThreadQuery

T = table_of(Thread)
I = table_of(ThreadItem)  # noqa: E741
N = table_of(ThreadItemNote)
S = table_of(ThreadState)
SUM = table_of(ThreadSummary)
PSEUDO = table_of(ThreadPseudonym)
ORGS = table_of(Org)
RESP = table_of(Response)
AGENTS = table_of(Agent)
AGENT_VERSIONS = table_of(AgentVersionRow)

T_META = T.c["metadata"]
N_META = N.c["metadata"]
ITEM_COLUMNS = (I.c.id, I.c.thread_id, I.c.position, I.c.type, I.c.role, I.c.subject, I.c.response_id, I.c.body,
                I.c.created_at)


def _json(value: Any) -> Any:
    return literal(value, JSONB)


def has_label(labels_col: Any, name: str, value: str) -> ColumnElement[bool]:
    """A label holds a string or a list of strings; containment covers both."""
    return or_(labels_col.op("@>")(_json({name: value})), labels_col.op("@>")(_json({name: [value]})))


def _counts_lateral() -> Any:
    """THR-2: message counts per role, computed when read, joined laterally so one statement serves a page."""
    def per(role: str) -> Any:
        return func.count().filter(I.c.role == role).label(f"count_{role}")

    return (select(per("user"), per("assistant"), per("developer"))
            .where(I.c.org_id == T.c.org_id, I.c.thread_id == T.c.id, I.c.type == "message")
            .lateral("counts"))


def _thread_select(scope: Scope, *, bound: bool = False) -> Select[Any]:
    """Threads the scope sees, with their counts and what it may do to them; with `bound`, the organisation and
    the person's values are parameters (`org_id` and `scope.params()`), so one statement serves a shape."""
    counts = _counts_lateral()
    org = bindparam("org_id", type_=Text) if bound else scope.org_id
    return (select(T, counts.c.count_user, counts.c.count_assistant, counts.c.count_developer,
                   scope.visible("thread", "write", T.c.subject, T.c.labels, bound=bound).label("can_write"),
                   scope.visible("thread", "delete", T.c.subject, T.c.labels, bound=bound).label("can_delete"))
            .select_from(T.join(counts, true()))
            .where(T.c.org_id == org, T.c.deleted_at.is_(None),
                   scope.visible("thread", "see", T.c.subject, T.c.labels, bound=bound)))


# ---------------------------------------------------------------- threads

async def insert_thread(db: AsyncSession, values: dict[str, Any]) -> None:
    await db.execute(insert(T).values(**values))


_thread_by_id = PreparedByShape()


async def get_thread(db: AsyncSession, scope: Scope, thread_id: str) -> dict[str, Any] | None:
    """A thread the scope sees (every turn that continues one reads it): one statement per policy shape."""
    statement = _thread_by_id.get(scope.shape, lambda: _thread_select(scope, bound=True).where(
        T.c.id == bindparam("thread_id", type_=Text)))
    return await statement.first(db, {"org_id": scope.org_id, "thread_id": thread_id, **scope.params()})


async def get_threads(db: AsyncSession, scope: Scope, thread_ids: Sequence[str]) -> list[dict[str, Any]]:
    query = _thread_select(scope).where(T.c.id.in_(list(thread_ids)))
    return [dict(r._mapping) for r in (await db.execute(query)).all()]


def _thread_filters(f: ThreadQuery, owner: str | bool | None) -> list[ColumnElement[bool]]:
    """`owner` False: any owner; None: shared threads; a string: that person's threads."""
    where: list[ColumnElement[bool]] = [T_META.op("@>")(_json({name: value}))
                                        for name, _, value in (p.partition(":") for p in f.metadata)]
    where += [has_label(T.c.labels, name, value) for name, _, value in (p.partition(":") for p in f.label)]
    if owner is None:
        where.append(T.c.subject.is_(None))
    elif owner is not False:
        where.append(T.c.subject == owner)
    return where


async def thread_counts(db: AsyncSession, scope: Scope, f: ThreadQuery, owner: str | bool | None) -> dict[str, int]:
    """Threads `list_threads` would list (same WHERE), by owner kind and distinct owners, and their messages."""
    where = [T.c.org_id == scope.org_id, T.c.deleted_at.is_(None),
             scope.visible("thread", "see", T.c.subject, T.c.labels), *_thread_filters(f, owner)]
    threads = (await db.execute(select(func.count(), func.count().filter(T.c.subject.is_(None)),
                                       func.count(func.distinct(T.c.subject))).where(*where))).one()
    seen = select(T.c.id).where(*where)

    def per(role: str) -> Any:
        return func.count().filter(I.c.role == role)

    messages = (await db.execute(select(per("user"), per("assistant"), per("developer")).where(
        I.c.org_id == scope.org_id, I.c.type == "message", I.c.thread_id.in_(seen)))).one()
    return {"threads": threads[0], "shared": threads[1], "people": threads[2], "user": messages[0],
            "assistant": messages[1], "developer": messages[2]}


async def list_threads(db: AsyncSession, scope: Scope, f: ThreadQuery, *, owner: str | bool | None,
                       after_id: str | None, descending: bool, limit: int) -> list[dict[str, Any]]:
    """`owner` False: any owner; None: shared threads; a string: that person's threads."""
    query = _thread_select(scope).where(*_thread_filters(f, owner))
    if after_id is not None:
        query = query.where(T.c.id < after_id if descending else T.c.id > after_id)
    query = query.order_by(T.c.id.desc() if descending else T.c.id.asc()).limit(limit)
    return [dict(r._mapping) for r in (await db.execute(query)).all()]


async def update_thread(db: AsyncSession, org_id: str, thread_id: str, values: dict[str, Any]) -> datetime | None:
    """The new `updated_at`; None, writing nothing, when the thread was deleted (or its owner erased) since it was
    read: the row lock waits for that transaction, then the row no longer matches."""
    result = await db.execute(update(T).where(T.c.org_id == org_id, T.c.id == thread_id, T.c.deleted_at.is_(None))
                              .values(**values, updated_at=func.now()).returning(T.c.updated_at))
    updated_at: datetime | None = result.scalar_one_or_none()
    return updated_at


async def tombstone(db: AsyncSession, org_id: str, thread_id: str) -> bool:
    """THR-6: remove the content and keep the id, owner and times for the responses that name the thread.
    The row is marked first: a summary job holding it (compaction) finishes before, or sees the deletion. False,
    removing nothing, when another request deleted the thread (or erased its owner) since it was read."""
    marked = await db.execute(update(T).where(T.c.org_id == org_id, T.c.id == thread_id, T.c.deleted_at.is_(None))
                              .values({"metadata": {}, "labels": {}, "deleted_at": func.now(),
                                       "updated_at": func.now()}).returning(T.c.id))
    if marked.first() is None:
        return False
    await db.execute(delete(SUM).where(SUM.c.org_id == org_id, SUM.c.thread_id == thread_id))
    # The tombstone row stays, so the cascade would not fire: the placeholders' real values go here (TRN-10).
    await db.execute(delete(PSEUDO).where(PSEUDO.c.org_id == org_id, PSEUDO.c.thread_id == thread_id))
    await db.execute(delete(S).where(S.c.org_id == org_id, S.c.thread_id == thread_id))
    await db.execute(delete(N).where(N.c.org_id == org_id, N.c.thread_id == thread_id))
    await db.execute(delete(I).where(I.c.org_id == org_id, I.c.thread_id == thread_id))
    await turns_repo.forget_thread(db, org_id, thread_id)
    return True


# ---------------------------------------------------------------- items

def _list_items(bounded: bool, descending: bool) -> Prepared:
    query = select(*ITEM_COLUMNS).where(I.c.org_id == bindparam("org_id", type_=Text),
                                        I.c.thread_id == bindparam("thread_id", type_=Text))
    if bounded:
        after = bindparam("after", type_=BigInteger)
        query = query.where(I.c.position < after if descending else I.c.position > after)
    order = I.c.position.desc() if descending else I.c.position.asc()
    return Prepared(query.order_by(order).limit(bindparam("limit", type_=BigInteger)))


# By (after a position, newest first): a turn reads its history with one of these.
_LIST_ITEMS = {(bounded, descending): _list_items(bounded, descending)
               for bounded in (False, True) for descending in (False, True)}


async def list_items(db: AsyncSession, org_id: str, thread_id: str, *, after: int | None, descending: bool,
                     limit: int) -> list[dict[str, Any]]:
    return await _LIST_ITEMS[after is not None, descending].all(
        db, {"org_id": org_id, "thread_id": thread_id, "after": after, "limit": limit})


async def get_item(db: AsyncSession, org_id: str, thread_id: str, item_id: str) -> dict[str, Any] | None:
    query = select(*ITEM_COLUMNS).where(I.c.org_id == org_id, I.c.thread_id == thread_id, I.c.id == item_id)
    row = (await db.execute(query)).first()
    return dict(row._mapping) if row else None


# ---------------------------------------------------------------- notes (THR-8)

async def put_note(db: AsyncSession, org_id: str, thread_id: str, item_id: str, author: str,
                   metadata: dict[str, Any]) -> dict[str, Any] | None:
    """The note; None, writing nothing, when the item or its thread is gone since they were read.

    Written only on an item of a live thread. A deletion that commits while this statement waits (on the note it
    removes, or in the item's key check) fails the key check: the savepoint turns that into None. One that commits
    after it removes the note with the item (the key's cascade). No row lock is taken beyond those, so the order
    stays the deleters' (notes, then items) and nothing deadlocks with them."""
    live_item = (select(I.c.org_id, I.c.id, literal(author, Text), I.c.thread_id, _json(metadata))
                 .select_from(I.join(T, and_(T.c.org_id == I.c.org_id, T.c.id == I.c.thread_id)))
                 .where(I.c.org_id == org_id, I.c.thread_id == thread_id, I.c.id == item_id,
                        T.c.deleted_at.is_(None)))
    stmt = pg_insert(N).from_select(["org_id", "item_id", "author", "thread_id", "metadata"], live_item)
    stmt = stmt.on_conflict_do_update(index_elements=[N.c.org_id, N.c.item_id, N.c.author],
                                      set_={"metadata": stmt.excluded["metadata"], "updated_at": func.now()})
    try:
        async with db.begin_nested():
            row = (await db.execute(stmt.returning(N))).first()
    except IntegrityError as error:
        if not isinstance(error.orig, ForeignKeyViolation):
            raise
        return None
    return None if row is None else dict(row._mapping)


async def list_notes(db: AsyncSession, org_id: str, item_id: str, author: str | None) -> list[dict[str, Any]]:
    query = select(N).where(N.c.org_id == org_id, N.c.item_id == item_id)
    if author is not None:
        query = query.where(N.c.author == author)
    return [dict(r._mapping) for r in (await db.execute(query.order_by(N.c.author))).all()]


async def delete_note(db: AsyncSession, org_id: str, item_id: str, author: str) -> bool:
    result = await db.execute(delete(N).where(N.c.org_id == org_id, N.c.item_id == item_id, N.c.author == author)
                              .returning(N.c.item_id))
    return result.first() is not None


# ---------------------------------------------------------------- working state (THR-11, THR-12)

_GET_STATE = select(S).where(S.c.org_id == bindparam("org_id", type_=Text),
                             S.c.thread_id == bindparam("thread_id", type_=Text))
_STATE = {False: Prepared(_GET_STATE), True: Prepared(_GET_STATE.with_for_update())}  # by `lock`


async def get_state(db: AsyncSession, org_id: str, thread_id: str, *, lock: bool = False) -> dict[str, Any] | None:
    return await _STATE[lock].first(db, {"org_id": org_id, "thread_id": thread_id})


# THR-6: a state write holds the live thread's row, as an append does, until its transaction ends: a deletion waits
# for it, or it waits for the deletion, sees the row marked and writes nothing (the tombstone row stays, so the
# state's key check would not refuse it).
_STATE_OPENED = Prepared(text(
    "WITH live AS (SELECT org_id, id FROM threads WHERE org_id = :org_id AND id = :thread_id "
    "AND deleted_at IS NULL FOR NO KEY UPDATE), "
    "opened AS (INSERT INTO thread_states (org_id, thread_id, state, version, size) "
    "SELECT org_id, id, CAST('{}' AS jsonb), 0, 2 FROM live ON CONFLICT (org_id, thread_id) DO NOTHING) "
    "SELECT count(*) AS live FROM live").bindparams(bindparam("org_id", type_=Text),
                                                    bindparam("thread_id", type_=Text)))


async def lock_live_state(db: AsyncSession, org_id: str, thread_id: str) -> dict[str, Any] | None:
    """The state row, created empty at version 0 if absent, locked (with the thread's row) until the transaction
    ends; None, writing nothing, when the thread was deleted (or its owner erased) since it was read."""
    opened = await _STATE_OPENED.first(db, {"org_id": org_id, "thread_id": thread_id})
    if not opened or not opened["live"]:
        return None
    return await get_state(db, org_id, thread_id, lock=True)


async def write_state(db: AsyncSession, org_id: str, thread_id: str, state: dict[str, Any], version: int,
                      size: int) -> dict[str, Any]:
    stmt = pg_insert(S).values(org_id=org_id, thread_id=thread_id, state=state, version=version, size=size)
    stmt = stmt.on_conflict_do_update(index_elements=[S.c.org_id, S.c.thread_id],
                                      set_={"state": state, "version": version, "size": size,
                                            "updated_at": func.now()})
    return dict((await db.execute(stmt.returning(S))).one()._mapping)


def _agent_schema() -> Prepared:
    """The thread's agent: the one its latest turn naming an agent named (whatever that turn's status). Its
    schema is its current version's, the one its next turn enforces; a deleted agent has none (no fallback to an
    earlier agent)."""
    org, thread = bindparam("org_id", type_=Text), bindparam("thread_id", type_=Text)
    latest = (select(RESP.c.agent_id)
              .where(RESP.c.org_id == org, RESP.c.thread_id == thread, RESP.c.agent_id.is_not(None))
              .order_by(RESP.c.created_at.desc(), RESP.c.id.desc()).limit(1).scalar_subquery())
    current = and_(AGENT_VERSIONS.c.org_id == AGENTS.c.org_id, AGENT_VERSIONS.c.agent_id == AGENTS.c.id,
                   AGENT_VERSIONS.c.version == AGENTS.c.version)
    return Prepared(select(AGENT_VERSIONS.c.working_state_schema).select_from(AGENTS.join(AGENT_VERSIONS, current))
                    .where(AGENTS.c.org_id == org, AGENTS.c.id == latest, AGENTS.c.deleted_at.is_(None)))


_AGENT_SCHEMA = _agent_schema()


async def agent_state_schema(db: AsyncSession, org_id: str, thread_id: str) -> dict[str, Any] | None:
    """THR-11: the `working_state_schema` of the thread's agent, None when it has none (or no live agent)."""
    row = await _AGENT_SCHEMA.first(db, {"org_id": org_id, "thread_id": thread_id})
    return None if row is None else row["working_state_schema"]


# ---------------------------------------------------------------- summaries (THR-13)

async def list_summaries(db: AsyncSession, org_id: str, thread_id: str, after: str | None,
                         limit: int) -> list[dict[str, Any]]:
    query = select(SUM).where(SUM.c.org_id == org_id, SUM.c.thread_id == thread_id)
    if after is not None:
        query = query.where(SUM.c.id > after)
    query = query.order_by(SUM.c.id).limit(limit)
    return [dict(r._mapping) for r in (await db.execute(query)).all()]


# ---------------------------------------------------------------- erasure of a person

async def erase_subject(db: AsyncSession, org_id: str, subject_id: str) -> dict[str, int]:
    """Her threads (tombstones too), her items elsewhere, her notes anywhere, and her id in thread labels."""
    own = select(T.c.id).where(T.c.org_id == org_id, T.c.subject == subject_id)
    counts: dict[str, int] = {}

    async def count(stmt: Any) -> int:
        return len((await db.execute(stmt)).all())

    counts["working_states"] = await count(delete(S).where(S.c.org_id == org_id, S.c.thread_id.in_(own))
                                           .returning(S.c.thread_id))
    # In others' threads, the summaries from her first item on hold her words and count turns she started.
    hers = (select(I.c.thread_id, func.min(I.c.position).label("first"))
            .where(I.c.org_id == org_id, I.c.subject == subject_id).group_by(I.c.thread_id).subquery())
    covering = select(SUM.c.id).join(hers, and_(SUM.c.thread_id == hers.c.thread_id,
                                                SUM.c.to_position >= hers.c.first)).where(SUM.c.org_id == org_id)
    counts["summaries"] = await count(delete(SUM).where(SUM.c.org_id == org_id, or_(
        SUM.c.thread_id.in_(own), SUM.c.id.in_(covering))).returning(SUM.c.id))
    counts["notes"] = await count(delete(N).where(N.c.org_id == org_id, or_(
        N.c.author == subject_id, N.c.thread_id.in_(own),
        N.c.item_id.in_(select(I.c.id).where(I.c.org_id == org_id, I.c.subject == subject_id)))).returning(N.c.item_id))
    counts["items"] = await count(delete(I).where(I.c.org_id == org_id, or_(
        I.c.subject == subject_id, I.c.thread_id.in_(own))).returning(I.c.id))
    counts["threads"] = await count(delete(T).where(T.c.org_id == org_id, T.c.subject == subject_id)
                                    .returning(T.c.id))
    # Her id as a label value (a `participants` list, say) is personal data too.
    holds_her = text("EXISTS (SELECT 1 FROM jsonb_each(threads.labels) AS e(name, value) "
                     "WHERE e.value = to_jsonb(CAST(:who AS text)) "
                     "OR e.value @> jsonb_build_array(CAST(:who AS text)))").bindparams(who=subject_id)
    labelled = (await db.execute(select(T.c.id, T.c.labels).where(T.c.org_id == org_id, holds_her))).all()
    for thread_id, labels in labelled:
        await db.execute(update(T).where(T.c.org_id == org_id, T.c.id == thread_id)
                         .values(labels=_without_value(labels, subject_id)))
    counts["labelled_threads"] = len(labelled)
    return counts


def _without_value(labels: dict[str, Any], value: str) -> dict[str, Any]:
    kept: dict[str, Any] = {}
    for name, held in labels.items():
        if isinstance(held, list):
            rest = [v for v in held if v != value]
            if rest:
                kept[name] = rest
        elif held != value:
            kept[name] = held
    return kept
