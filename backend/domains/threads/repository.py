"""SQL of conversation threads. Every read of a thread takes a Scope and applies it in SQL (house rule 2)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg.types.json import Jsonb
from sqlalchemy import (
    ColumnElement,
    DateTime,
    Integer,
    Select,
    Text,
    and_,
    bindparam,
    case,
    cast,
    delete,
    func,
    insert,
    literal,
    literal_column,
    or_,
    select,
    text,
    true,
    tuple_,
    update,
)
from sqlalchemy.dialects.postgresql import JSONB, TSQUERY
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from backend.access.scope import Scope
from backend.db.models import Org, table_of
from backend.db.models_threads import Thread, ThreadItem, ThreadItemNote, ThreadState, ThreadSummary

T = table_of(Thread)
I = table_of(ThreadItem)  # noqa: E741
N = table_of(ThreadItemNote)
S = table_of(ThreadState)
SUM = table_of(ThreadSummary)
ORGS = table_of(Org)

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


def _thread_select(scope: Scope) -> Select[Any]:
    counts = _counts_lateral()
    return (select(T, counts.c.count_user, counts.c.count_assistant, counts.c.count_developer,
                   scope.visible("thread", "write", T.c.subject, T.c.labels).label("can_write"),
                   scope.visible("thread", "delete", T.c.subject, T.c.labels).label("can_delete"))
            .select_from(T.join(counts, true()))
            .where(T.c.org_id == scope.org_id, T.c.deleted_at.is_(None),
                   scope.visible("thread", "see", T.c.subject, T.c.labels)))


# ---------------------------------------------------------------- threads

async def insert_thread(db: AsyncSession, values: dict[str, Any]) -> None:
    await db.execute(insert(T).values(**values))


async def get_thread(db: AsyncSession, scope: Scope, thread_id: str) -> dict[str, Any] | None:
    row = (await db.execute(_thread_select(scope).where(T.c.id == thread_id))).first()
    return dict(row._mapping) if row else None


async def get_threads(db: AsyncSession, scope: Scope, thread_ids: Sequence[str]) -> list[dict[str, Any]]:
    query = _thread_select(scope).where(T.c.id.in_(list(thread_ids)))
    return [dict(r._mapping) for r in (await db.execute(query)).all()]


def _thread_filters(metadata: Sequence[tuple[str, str]], labels: Sequence[tuple[str, str]],
                    owner: str | bool | None) -> list[ColumnElement[bool]]:
    """`owner` False: any owner; None: shared threads; a string: that person's threads."""
    where: list[ColumnElement[bool]] = [T_META.op("@>")(_json({name: value})) for name, value in metadata]
    where += [has_label(T.c.labels, name, value) for name, value in labels]
    if owner is None:
        where.append(T.c.subject.is_(None))
    elif owner is not False:
        where.append(T.c.subject == owner)
    return where


async def thread_counts(db: AsyncSession, scope: Scope, *, metadata: Sequence[tuple[str, str]],
                        labels: Sequence[tuple[str, str]], owner: str | bool | None) -> dict[str, int]:
    """Threads `list_threads` would list (same WHERE), by owner kind and distinct owners, and their messages."""
    where = [T.c.org_id == scope.org_id, T.c.deleted_at.is_(None),
             scope.visible("thread", "see", T.c.subject, T.c.labels), *_thread_filters(metadata, labels, owner)]
    threads = (await db.execute(select(func.count(), func.count().filter(T.c.subject.is_(None)),
                                       func.count(func.distinct(T.c.subject))).where(*where))).one()
    seen = select(T.c.id).where(*where)

    def per(role: str) -> Any:
        return func.count().filter(I.c.role == role)

    messages = (await db.execute(select(per("user"), per("assistant"), per("developer")).where(
        I.c.org_id == scope.org_id, I.c.type == "message", I.c.thread_id.in_(seen)))).one()
    return {"threads": threads[0], "shared": threads[1], "people": threads[2], "user": messages[0],
            "assistant": messages[1], "developer": messages[2]}


async def list_threads(db: AsyncSession, scope: Scope, *, metadata: Sequence[tuple[str, str]],
                       labels: Sequence[tuple[str, str]], owner: str | bool | None, after_id: str | None,
                       descending: bool, limit: int) -> list[dict[str, Any]]:
    """`owner` False: any owner; None: shared threads; a string: that person's threads."""
    query = _thread_select(scope).where(*_thread_filters(metadata, labels, owner))
    if after_id is not None:
        query = query.where(T.c.id < after_id if descending else T.c.id > after_id)
    query = query.order_by(T.c.id.desc() if descending else T.c.id.asc()).limit(limit)
    return [dict(r._mapping) for r in (await db.execute(query)).all()]


async def update_thread(db: AsyncSession, org_id: str, thread_id: str, values: dict[str, Any]) -> datetime:
    result = await db.execute(update(T).where(T.c.org_id == org_id, T.c.id == thread_id)
                              .values(**values, updated_at=func.now()).returning(T.c.updated_at))
    updated_at: datetime = result.scalar_one()
    return updated_at


async def reserve_positions(db: AsyncSession, org_id: str, thread_id: str, count: int
                            ) -> tuple[int, datetime] | None:
    """THR-4: take `count` positions; the row lock orders concurrent appenders until their transactions end.
    None when the thread was deleted since it was read."""
    row = (await db.execute(
        update(T).where(T.c.org_id == org_id, T.c.id == thread_id, T.c.deleted_at.is_(None))
        .values(last_position=T.c.last_position + count, updated_at=func.clock_timestamp())
        .returning(T.c.last_position, T.c.updated_at))).first()
    return (int(row[0]) - count + 1, row[1]) if row else None


async def tombstone(db: AsyncSession, org_id: str, thread_id: str) -> None:
    """THR-6: remove the content and keep the id, owner and times for the responses that name the thread."""
    await db.execute(delete(SUM).where(SUM.c.org_id == org_id, SUM.c.thread_id == thread_id))
    await db.execute(delete(S).where(S.c.org_id == org_id, S.c.thread_id == thread_id))
    await db.execute(delete(N).where(N.c.org_id == org_id, N.c.thread_id == thread_id))
    await db.execute(delete(I).where(I.c.org_id == org_id, I.c.thread_id == thread_id))
    await db.execute(update(T).where(T.c.org_id == org_id, T.c.id == thread_id)
                     .values({"metadata": {}, "labels": {}, "deleted_at": func.now(), "updated_at": func.now()}))


# ---------------------------------------------------------------- items

async def insert_items(db: AsyncSession, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    result = await db.execute(insert(I).values(rows).returning(*ITEM_COLUMNS))
    return sorted((dict(r._mapping) for r in result.all()), key=lambda r: r["position"])


async def list_items(db: AsyncSession, org_id: str, thread_id: str, *, after: int | None, descending: bool,
                     limit: int) -> list[dict[str, Any]]:
    query = select(*ITEM_COLUMNS).where(I.c.org_id == org_id, I.c.thread_id == thread_id)
    if after is not None:
        query = query.where(I.c.position < after if descending else I.c.position > after)
    query = query.order_by(I.c.position.desc() if descending else I.c.position.asc()).limit(limit)
    return [dict(r._mapping) for r in (await db.execute(query)).all()]


async def get_item(db: AsyncSession, org_id: str, thread_id: str, item_id: str) -> dict[str, Any] | None:
    query = select(*ITEM_COLUMNS).where(I.c.org_id == org_id, I.c.thread_id == thread_id, I.c.id == item_id)
    row = (await db.execute(query)).first()
    return dict(row._mapping) if row else None


# ---------------------------------------------------------------- notes (THR-8)

async def put_note(db: AsyncSession, org_id: str, thread_id: str, item_id: str, author: str,
                   metadata: dict[str, Any]) -> dict[str, Any]:
    stmt = pg_insert(N).values(org_id=org_id, item_id=item_id, author=author, thread_id=thread_id,
                                   **{"metadata": metadata})
    stmt = stmt.on_conflict_do_update(index_elements=[N.c.org_id, N.c.item_id, N.c.author],
                                      set_={"metadata": stmt.excluded["metadata"], "updated_at": func.now()})
    row = (await db.execute(stmt.returning(N))).one()
    return dict(row._mapping)


async def list_notes(db: AsyncSession, org_id: str, item_id: str, author: str | None) -> list[dict[str, Any]]:
    query = select(N).where(N.c.org_id == org_id, N.c.item_id == item_id)
    if author is not None:
        query = query.where(N.c.author == author)
    return [dict(r._mapping) for r in (await db.execute(query.order_by(N.c.author))).all()]


async def delete_note(db: AsyncSession, org_id: str, item_id: str, author: str) -> bool:
    result = await db.execute(delete(N).where(N.c.org_id == org_id, N.c.item_id == item_id, N.c.author == author)
                              .returning(N.c.item_id))
    return result.first() is not None


def _spelled(value: str) -> list[Any]:
    if value in ("true", "false"):
        return [value == "true"]
    try:
        number = float(value)
    except ValueError:
        return []
    if number != number or number in (float("inf"), float("-inf")):
        return []
    return [int(number)] if number.is_integer() else [number]


# ---------------------------------------------------------------- working state (THR-11, THR-12)

async def get_state(db: AsyncSession, org_id: str, thread_id: str, *, lock: bool = False) -> dict[str, Any] | None:
    query = select(S).where(S.c.org_id == org_id, S.c.thread_id == thread_id)
    if lock:
        query = query.with_for_update()
    row = (await db.execute(query)).first()
    return dict(row._mapping) if row else None


async def lock_state(db: AsyncSession, org_id: str, thread_id: str) -> dict[str, Any]:
    """The state row, created empty at version 0 if absent, locked until the transaction ends."""
    await db.execute(pg_insert(S).values(org_id=org_id, thread_id=thread_id, state={}, version=0, size=2)
                     .on_conflict_do_nothing(index_elements=[S.c.org_id, S.c.thread_id]))
    state = await get_state(db, org_id, thread_id, lock=True)
    assert state is not None
    return state


async def write_state(db: AsyncSession, org_id: str, thread_id: str, state: dict[str, Any], version: int,
                      size: int) -> dict[str, Any]:
    stmt = pg_insert(S).values(org_id=org_id, thread_id=thread_id, state=state, version=version, size=size)
    stmt = stmt.on_conflict_do_update(index_elements=[S.c.org_id, S.c.thread_id],
                                      set_={"state": state, "version": version, "size": size,
                                            "updated_at": func.now()})
    return dict((await db.execute(stmt.returning(S))).one()._mapping)


# ---------------------------------------------------------------- summaries (THR-13)

async def list_summaries(db: AsyncSession, org_id: str, thread_id: str, after: str | None,
                         limit: int) -> list[dict[str, Any]]:
    query = select(SUM).where(SUM.c.org_id == org_id, SUM.c.thread_id == thread_id)
    if after is not None:
        query = query.where(SUM.c.id > after)
    query = query.order_by(SUM.c.id).limit(limit)
    return [dict(r._mapping) for r in (await db.execute(query)).all()]


async def insert_summary(db: AsyncSession, values: dict[str, Any]) -> dict[str, Any]:
    return dict((await db.execute(insert(SUM).values(**values).returning(SUM))).one()._mapping)


# ---------------------------------------------------------------- erasure of a person

async def erase_subject(db: AsyncSession, org_id: str, subject_id: str) -> dict[str, int]:
    """Her threads (tombstones too), her items elsewhere, her notes anywhere, and her id in thread labels."""
    own = select(T.c.id).where(T.c.org_id == org_id, T.c.subject == subject_id)
    counts: dict[str, int] = {}

    async def count(stmt: Any) -> int:
        return len((await db.execute(stmt)).all())

    counts["working_states"] = await count(delete(S).where(S.c.org_id == org_id, S.c.thread_id.in_(own))
                                           .returning(S.c.thread_id))
    counts["summaries"] = await count(delete(SUM).where(SUM.c.org_id == org_id, SUM.c.thread_id.in_(own))
                                      .returning(SUM.c.id))
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


# ---------------------------------------------------------------- search (THR-7, THR-8)

REGCONFIG: Any = literal_column("'simple'::regconfig")


def tsquery(query: Any) -> Any:
    return func.websearch_to_tsquery(REGCONFIG, query if isinstance(query, ColumnElement) else literal(query))


async def search_items(db: AsyncSession, scope: Scope, *, query: str | None, headline_options: str,
                       upper: datetime | None, upper_id: str | None, fixed_lower: datetime | None,
                       from_: datetime | None, window_days: int, thread_id: str | None,
                       thread_metadata: Sequence[tuple[str, str]], role: str | None, note_author: str | None,
                       note_pairs: Sequence[tuple[str, str]], limit: int,
                       built_from_policy: dict[str, Any] | None = None) -> tuple[dict[str, Any] | None,
                                                                                 list[dict[str, Any]]]:
    """One page of hits in one fixed slice of history, in one statement (see `search_statement`).

    Returns the slice (`lower`, the organisation's `tz`, whether `older` messages exist) and the hits.
    `built_from_policy`: the organisation policy `scope` was built from when it was not read in this
    transaction; the statement then finds hits only if that is still the organisation's policy, and the
    slice is None when it is not (the caller reads the policy and searches again).
    """
    variants = [[{name: value}] + [{name: spelled} for spelled in _spelled(value)] for name, value in note_pairs]
    shape = SearchShape(
        scope=(scope.unrestricted, scope.rules, scope.requester.subject_id,
               tuple(sorted((k, tuple(v)) for k, v in scope.requester.attributes.items()))),
        query=query is not None, upper=upper is not None, upper_id=upper_id is not None,
        fixed_lower=fixed_lower is not None, from_=from_ is not None, window_days=window_days,
        thread_id=thread_id is not None, thread_metadata=len(thread_metadata), role=role is not None,
        note_author=note_author is not None, note_variants=tuple(len(v) for v in variants),
        check_policy=built_from_policy is not None)
    params: dict[str, Any] = {
        "org_id": scope.org_id, "q": query, "hl": headline_options, "upper": upper, "upper_id": upper_id,
        "fixed_lower": fixed_lower, "from_": from_, "thread_id": thread_id, "role": role,
        "note_author": note_author, "limit": limit, "policy": built_from_policy,
        **{f"tm{i}": {name: value} for i, (name, value) in enumerate(thread_metadata)},
        **{f"np{i}_{j}": v for i, options in enumerate(variants) for j, v in enumerate(options)},
    }
    compiled = search_statement(shape, scope)
    bound = {**compiled.constants, **{k: v for k, v in params.items() if k in compiled.names}}
    for name in compiled.json_names:
        bound[name] = Jsonb(bound[name])
    connection = await db.connection()
    rows = (await connection.exec_driver_sql(compiled.sql, bound)).mappings().all()
    if not rows or not rows[0]["current"]:  # no such organisation, or its policy is no longer `built_from_policy`
        return None, []
    first = rows[0]  # the outer join always yields the slice row
    window = {"lower": first["lower"], "tz": first["tz"], "older": bool(first["older"])}
    return window, [dict(r) for r in rows if r["id"] is not None]


@dataclass(frozen=True)
class SearchShape:
    """What decides the search statement's structure; the values travel as bound parameters."""

    scope: Any
    query: bool
    upper: bool
    upper_id: bool
    fixed_lower: bool
    from_: bool
    window_days: int
    thread_id: bool
    thread_metadata: int
    role: bool
    note_author: bool
    note_variants: tuple[int, ...]
    check_policy: bool = False


@dataclass(frozen=True)
class CompiledSearch:
    """The search statement as the driver takes it: SQL text with %(name)s placeholders."""

    sql: str
    names: frozenset[str]  # the parameters a call supplies
    constants: dict[str, Any]  # values the statement itself carries (the scope's literals)
    json_names: frozenset[str]  # parameters the driver must send as jsonb


_statements: OrderedDict[SearchShape, CompiledSearch] = OrderedDict()
_STATEMENT_CACHE_SIZE = 512


def search_statement(shape: SearchShape, scope: Scope) -> CompiledSearch:
    """Building and compiling this statement costs milliseconds of Python, and handing SQLAlchemy a statement
    still costs a few tenths of one per call, so each shape (per policy and person) is compiled once and runs
    as driver SQL."""
    cached = _statements.get(shape)
    if cached is not None:
        _statements.move_to_end(shape)
        return cached
    statement = _build_search(shape, scope)
    compiled = statement.compile(dialect=psycopg_dialect())
    binds = compiled.binds.values()
    supplied = frozenset(b.key for b in binds if not b.unique)  # named by _build_search; the rest are literals
    entry = CompiledSearch(
        sql=compiled.string, names=supplied,
        constants={name: value for name, value in compiled.params.items() if name not in supplied},
        json_names=frozenset(b.key for b in binds if b.key in supplied and isinstance(b.type, JSONB)))
    _statements[shape] = entry
    if len(_statements) > _STATEMENT_CACHE_SIZE:
        _statements.popitem(last=False)
    return entry


def psycopg_dialect() -> Any:
    from sqlalchemy.dialects.postgresql.psycopg import PGDialect_psycopg

    return PGDialect_psycopg()


def _build_search(shape: SearchShape, scope: Scope) -> Any:
    """The slice runs from the start of the day `window_days - 1` days before the newest message older than
    the cursor (in the organisation's time zone) up to the cursor, so an empty stretch of history costs one
    page, not one page per week. Its probes use the (org_id, created_at) index, never a scan.

    One statement, one round trip: a materialised `bounds` row reads the organisation's row once (its time
    zone, and with `check_policy` whether its policy is still the one the scope was built from), computes the
    slice with the two index probes, and feeds the lateral page of hits; ts_headline runs on the page only."""
    org_id = bindparam("org_id", type_=Text)
    upper = bindparam("upper", type_=DateTime(timezone=True))
    from_ = bindparam("from_", type_=DateTime(timezone=True))
    thread_id = bindparam("thread_id", type_=Text)

    def history(*extra: ColumnElement[bool]) -> list[ColumnElement[bool]]:
        conds = [I.c.org_id == org_id, I.c.text.isnot(None), *extra]
        if shape.from_:
            conds.append(I.c.created_at >= from_)
        if shape.thread_id:
            conds.append(I.c.thread_id == thread_id)
        return conds

    tz = ORGS.c.timezone
    if shape.fixed_lower:
        lower_expr: Any = bindparam("fixed_lower", type_=DateTime(timezone=True))
    else:
        newest = select(func.max(I.c.created_at)).where(
            *history(*([I.c.created_at < upper] if shape.upper else []))).scalar_subquery()
        day = func.date_trunc(literal_column("'day'"), func.timezone(tz, newest))
        lower_expr = func.timezone(tz, day - literal_column(f"interval '{int(shape.window_days) - 1} days'"))
        if shape.from_:
            lower_expr = func.greatest(lower_expr, from_)
    current: Any = (ORGS.c.policy == bindparam("policy", type_=JSONB)) if shape.check_policy else true()
    # OFFSET 0 keeps `org` a subquery of its own, so `lower` is computed once rather than again inside `older`.
    org = (select(lower_expr.label("lower"), tz.label("tz"), current.label("current"))
           .where(ORGS.c.id == org_id).offset(literal_column("0")).subquery("org"))
    older = select(func.max(I.c.created_at)).where(*history(I.c.created_at < org.c.lower)).scalar_subquery()
    bounds = (select(org.c.lower, org.c.tz, org.c.current, older.isnot(None).label("older"))
              .cte("bounds").prefix_with("MATERIALIZED"))

    tsq = tsquery(bindparam("q", type_=Text)) if shape.query else None
    columns: list[Any] = [I.c.id, I.c.thread_id, I.c.type, I.c.role, I.c.subject, I.c.created_at, I.c.text]
    conds = [I.c.org_id == org_id, I.c.text.isnot(None), I.c.created_at >= bounds.c.lower]
    if scope.sees_every("thread", "see") and not shape.thread_metadata:
        # Nothing about the thread can filter: deleting a thread deletes its items in the same transaction
        # (`tombstone`), so there is no join to threads. Besides its cost, the join made the planner walk the
        # slice for an `or` of rare words rather than use the GIN index (ten times slower).
        source: Any = I
    else:
        source = I.join(T, and_(T.c.org_id == I.c.org_id, T.c.id == I.c.thread_id))
        conds += [T.c.deleted_at.is_(None), scope.visible("thread", "see", T.c.subject, T.c.labels)]
    if shape.check_policy:
        conds.insert(0, bounds.c.current)
    if tsq is not None:
        conds.append(I.c.tsv.op("@@")(tsq))
    if shape.upper:
        conds.append(I.c.created_at <= upper)
        conds.append(tuple_(I.c.created_at, I.c.id) < tuple_(upper, bindparam("upper_id", type_=Text))
                     if shape.upper_id else I.c.created_at < upper)
    if shape.thread_id:
        conds.append(I.c.thread_id == thread_id)
    for i in range(shape.thread_metadata):
        conds.append(T_META.op("@>")(bindparam(f"tm{i}", type_=JSONB)))
    if shape.role:
        conds.append(I.c.role == bindparam("role", type_=Text))
    if shape.note_author:
        source = source.join(N, and_(N.c.org_id == I.c.org_id, N.c.item_id == I.c.id,
                                     N.c.author == bindparam("note_author", type_=Text)))
        # A `k:v` pair matches the string v and the number or boolean it spells (`stars:2` finds 2 and "2").
        for i, count in enumerate(shape.note_variants):
            conds.append(or_(*[N_META.op("@>")(bindparam(f"np{i}_{j}", type_=JSONB)) for j in range(count)]))
        columns += [N_META.label("note"), N.c.author.label("note_author")]
    hits = (select(*columns).select_from(source).where(*conds)
            .order_by(I.c.created_at.desc(), I.c.id.desc()).limit(bindparam("limit", type_=Integer))
            .lateral("hits"))
    outer: list[Any] = [bounds.c.lower, bounds.c.tz, bounds.c.older, bounds.c.current,
                        *(c for c in hits.c if tsq is None or c.key != "text")]
    if tsq is not None:
        # Excluded words never match a hit, but ts_headline would mark them; mark the wanted words only.
        # The snippet replaces the text, so the text itself does not travel back.
        tree = func.querytree(tsq)
        wanted = case((tree == literal_column("'T'"), tsq), else_=cast(tree, TSQUERY))
        outer.append(func.ts_headline(REGCONFIG, hits.c.text, wanted, bindparam("hl", type_=Text)).label("headline"))
    return (select(*outer).select_from(bounds.outerjoin(hits, true()))
            .order_by(hits.c.created_at.desc(), hits.c.id.desc()))


async def raw_search(db: AsyncSession, org_id: str, query: str, limit: int) -> list[Any]:
    """The plain tsquery a developer would write by hand; the benchmark's baseline."""
    statement = (select(I.c.id, I.c.thread_id, I.c.created_at)
                 .where(I.c.org_id == org_id, I.c.tsv.op("@@")(tsquery(query)))
                 .order_by(I.c.created_at.desc()).limit(limit))
    return list((await db.execute(statement)).all())
