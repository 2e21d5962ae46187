"""SQL of memory records. Every read takes a Scope and turns it into WHERE clauses (ARCHITECTURE rule 2)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from pgvector.sqlalchemy import Vector
from sqlalchemy import (
    ColumnElement,
    DateTime,
    Float,
    and_,
    bindparam,
    case,
    cast,
    delete,
    exists,
    func,
    insert,
    literal,
    or_,
    select,
    text,
    true,
    union_all,
    update,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from backend.access.scope import Scope
from backend.db.models import table_of
from backend.db.models_memory import MemoryRecord, MemoryVersion
from shared.schemas.memory import MemoryQuery

R = table_of(MemoryRecord)
V = table_of(MemoryVersion)

PRIORITY_RANK = {"critical": 0, "high": 1, "normal": 2, "low": 3}
# A record that shares no word with the question is a hit only when its vector is at least this close.
MIN_VECTOR_SIMILARITY = 0.25
CANDIDATES = 200
VERSIONED = ("text", "metadata", "labels", "confidence", "tags", "priority", "expires_at", "status", "verified",
             "commitment")


# ---------------------------------------------------------------- expressions

def evaluated_at(at: datetime | None) -> Any:
    """The moment a read is evaluated at: the transaction's time, or a given instant (the injection preview's `at`)."""
    return func.now() if at is None else bindparam(None, at, type_=DateTime(timezone=True))


def effective_expr(half_lives: Mapping[str, float], table: Any = R, *, at: datetime | None = None
                   ) -> ColumnElement[Any]:
    """effective = confidence * 0.5 ^ (age_days / H) for types with a half-life; the stored value otherwise."""
    if not half_lives:
        return cast(table.c.confidence, Float)
    age_days = func.greatest(func.extract("epoch", evaluated_at(at) - table.c.updated_at), 0) / 86400.0
    whens = [(table.c.type == t, table.c.confidence * func.power(0.5, age_days / h))
             for t, h in sorted(half_lives.items())]
    return cast(case(*whens, else_=table.c.confidence), Float)


def min_confidence_clause(half_lives: Mapping[str, float], minimum: float, *, at: datetime | None = None
                          ) -> ColumnElement[bool]:
    """effective >= minimum, written so that every branch is an index range (MEM-9, docs/decisions.md).

    A decaying type t with half-life H: stored confidence is at most 1, so effective >= m needs
    age <= H * log2(1/m), a range on (org_id, index_id, type, updated_at); the exact comparison then runs
    only on the rows inside it. Every other type keeps its stored value: the types that do not decay are the
    gaps between the decaying names, each a range on the same index's `type` column. So PostgreSQL can answer
    a selective filter with a BitmapOr of index ranges, and a large result by walking the primary key.
    """
    if minimum <= 0:
        return true()
    branches: list[ColumnElement[bool]] = []
    names = sorted(half_lives)
    for type_name in names:
        h = half_lives[type_name]
        max_age = timedelta(days=h * math.log2(1.0 / minimum))
        branches.append(and_(R.c.type == type_name, R.c.updated_at >= evaluated_at(at) - literal(max_age),
                             effective_expr({type_name: h}, at=at) >= minimum))
    lower: str | None = None
    for upper in [*names, None]:
        gap = [R.c.confidence >= minimum]
        if lower is not None:
            gap.append(R.c.type > lower)
        if upper is not None:
            gap.append(R.c.type < upper)
        branches.append(and_(*gap))
        lower = upper
    return or_(*branches)


def _visible(scope: Scope, table: Any) -> ColumnElement[bool]:
    return and_(table.c.org_id == scope.org_id, scope.index_clause(table.c.index_id),
                scope.visible("memory_record", "see", table.c.subject, table.c.labels))


def _partner(scope: Scope, column: Any) -> ColumnElement[Any]:
    """The partner's id only when the reader may see the partner (MEM-16, MEM-17)."""
    p = R.alias("partner")
    seen = exists().where(p.c.id == column, _visible(scope, p)).correlate(R)
    return case((seen, column), else_=None)


def record_columns(scope: Scope, half_lives: Mapping[str, float]) -> list[Any]:
    hidden = {"embedding", "search", "norm_hash", "contested_with", "replaces", "replaced_by"}
    cols: list[Any] = [c for c in R.c if c.name not in hidden]
    return [
        *cols,
        effective_expr(half_lives).label("effective_confidence"),
        _partner(scope, R.c.contested_with).label("contested_with"),
        _partner(scope, R.c.replaces).label("replaces"),
        _partner(scope, R.c.replaced_by).label("replaced_by"),
    ]


def readable(scope: Scope) -> list[ColumnElement[bool]]:
    return [_visible(scope, R)]


def unexpired(at: datetime | None = None) -> ColumnElement[bool]:
    return or_(R.c.expires_at.is_(None), R.c.expires_at > evaluated_at(at))


def active_now() -> list[ColumnElement[bool]]:
    return [R.c.status == "active", unexpired()]


def _jsonb(value: Any) -> Any:
    return bindparam(None, value, type_=JSONB)


def _label_has(column: Any, name: str, value: str) -> ColumnElement[bool]:
    return or_(column.op("@>")(_jsonb({name: value})), column.op("@>")(_jsonb({name: [value]})))


def _metadata_has(name: str, value: str) -> ColumnElement[bool]:
    options = [R.c.metadata.op("@>")(_jsonb({name: value}))]
    try:  # `n:5` also matches the number 5, `flag:true` the boolean
        parsed = json.loads(value)
    except ValueError:
        parsed = None
    if isinstance(parsed, float) and not math.isfinite(parsed):
        parsed = None  # `1e999`: no JSON number equals it
    if parsed is not None and not isinstance(parsed, str):
        options.append(R.c.metadata.op("@>")(_jsonb({name: parsed})))
    return or_(*options)


def tsquery(q: str) -> Any:
    return func.websearch_to_tsquery(literal("simple").op("::")(text("regconfig")), q)


def _pairs(values: list[str]) -> list[tuple[str, str]]:
    """`name:value` filters, already checked by the service (reads.check_filters)."""
    return [(name, value) for name, _, value in (v.partition(":") for v in values)]


def filter_clauses(f: MemoryQuery, half_lives: Mapping[str, float]) -> list[ColumnElement[bool]]:
    where: list[ColumnElement[bool]] = []
    if f.index_id is not None:
        where.append(R.c.index_id == f.index_id)
    if f.type:
        where.append(R.c.type.in_(f.type))
    if f.subject is not None:
        where.append(R.c.subject == f.subject)
    if f.shared:
        where.append(R.c.subject.is_(None))
    where += [_metadata_has(k, v) for k, v in _pairs(f.metadata)]
    where += [_label_has(R.c.labels, k, v) for k, v in _pairs(f.label)]
    tags = [t.strip().lower() for t in f.tag if t.strip()]
    if tags:
        where.append(R.c.tags.contains(tags))
    if f.min_confidence is not None:
        where.append(min_confidence_clause(half_lives, f.min_confidence))
    if f.after is not None:
        where.append(R.c.created_at >= f.after)
    if f.before is not None:
        where.append(R.c.created_at < f.before)
    if not f.include_expired:
        where.append(unexpired())
    if not f.include_replaced:
        where.append(R.c.status == "active")
    if f.q:
        where.append(R.c.search.op("@@")(tsquery(f.q)))
    return where


# ---------------------------------------------------------------- reads

def _rows(result: Any) -> list[dict[str, Any]]:
    # Plain str keys: column names come back as SQLAlchemy's quoted_name, which msgspec does not take as str.
    return [{str(k): v for k, v in r._mapping.items()} for r in result.all()]


async def get(db: AsyncSession, scope: Scope, half_lives: Mapping[str, float], record_id: str, *,
              for_update: bool = False) -> dict[str, Any] | None:
    query = select(*record_columns(scope, half_lives)).where(R.c.id == record_id, *readable(scope))
    if for_update:
        query = query.with_for_update(of=R)
    rows = _rows(await db.execute(query))
    return rows[0] if rows else None


async def get_many(db: AsyncSession, scope: Scope, half_lives: Mapping[str, float],
                   ids: Sequence[str]) -> list[dict[str, Any]]:
    """Records just written by this request, whatever the reader may see of others (partners stay scoped)."""
    if not ids:
        return []
    query = select(*record_columns(scope, half_lives)).where(R.c.org_id == scope.org_id, R.c.id.in_(list(ids)))
    by_id = {r["id"]: r for r in _rows(await db.execute(query))}
    return [by_id[i] for i in ids if i in by_id]


async def list_page(db: AsyncSession, scope: Scope, half_lives: Mapping[str, float], f: MemoryQuery,
                    after_id: str | None, limit: int) -> list[dict[str, Any]]:
    query = select(*record_columns(scope, half_lives)).where(*readable(scope), *filter_clauses(f, half_lives))
    if after_id:
        query = query.where(R.c.id < after_id)
    return _rows(await db.execute(query.order_by(R.c.id.desc()).limit(limit)))


async def counts(db: AsyncSession, scope: Scope, half_lives: Mapping[str, float],
                 f: MemoryQuery) -> tuple[list[dict[str, Any]], int]:
    """Records the scope reaches and the filters keep, counted per index, type and owner kind, and the number
    of distinct people among their owners: the same WHERE as `list_page`, so a count never shows more."""
    where = [*readable(scope), *filter_clauses(f, half_lives)]
    shared = R.c.subject.is_(None).label("shared")
    grouped = (select(R.c.index_id, R.c.type, shared, func.count().label("records")).where(*where)
               .group_by(R.c.index_id, R.c.type, shared).order_by(R.c.index_id, R.c.type, shared))
    people = select(func.count(func.distinct(R.c.subject))).where(*where)
    return _rows(await db.execute(grouped)), int((await db.execute(people)).scalar_one())


async def expiring(db: AsyncSession, scope: Scope, half_lives: Mapping[str, float], f: MemoryQuery, window: timedelta,
                   after: tuple[datetime, str] | None, limit: int) -> list[dict[str, Any]]:
    query = select(*record_columns(scope, half_lives)).where(
        *readable(scope), *filter_clauses(f, half_lives), R.c.expires_at.is_not(None),
        R.c.expires_at > func.now(), R.c.expires_at <= func.now() + literal(window))
    if after is not None:
        query = query.where(or_(R.c.expires_at > after[0], and_(R.c.expires_at == after[0], R.c.id > after[1])))
    return _rows(await db.execute(query.order_by(R.c.expires_at, R.c.id).limit(limit)))


def _priority_rank() -> ColumnElement[Any]:
    return case(*[(R.c.priority == p, r) for p, r in PRIORITY_RANK.items()], else_=9)


async def recall(db: AsyncSession, scope: Scope, half_lives: Mapping[str, float], f: MemoryQuery,
                 limit: int) -> tuple[list[dict[str, Any]], int, int]:
    """Records for the recall text (critical first, then most recent) and the verified/total counts."""
    where = [*readable(scope), *filter_clauses(f, half_lives)]
    query = (select(*record_columns(scope, half_lives)).where(*where)
             .order_by(_priority_rank(), R.c.updated_at.desc(), R.c.id.desc()).limit(limit))
    rows = _rows(await db.execute(query))
    counted = (await db.execute(select(func.count(), func.count().filter(R.c.verified)).where(*where))).one()
    return rows, int(counted[0]), int(counted[1])


async def bump_recall(db: AsyncSession, org_id: str, ids: Sequence[str]) -> None:
    """Recalls count but never restart the decay age (MEM-9): updated_at is left alone."""
    if ids:
        await db.execute(update(R).where(R.c.org_id == org_id, R.c.id.in_(list(ids)))
                         .values(recall_count=R.c.recall_count + 1))


@dataclass(frozen=True)
class QueryVector:
    """The query embedded by one embedding setting, for the indexes that share it."""

    index_ids: tuple[str, ...]
    vector: list[float]


def _nearest(where: list[ColumnElement[bool]], query: QueryVector) -> Any:
    """The nearest records of these indexes to the query vector (the HNSW index of its dimensions serves it)."""
    dims = len(query.vector)
    qv = cast(bindparam(None, query.vector, type_=Vector()), Vector(dims))
    distance = cast(R.c.embedding, Vector(dims)).op("<=>", return_type=Float)(qv)
    return (select(R.c.id.label("id"), (1 - distance).label("similarity"))
            .where(*where, R.c.index_id.in_(query.index_ids), func.vector_dims(R.c.embedding) == dims)
            .order_by(distance).limit(CANDIDATES))


async def search(db: AsyncSession, scope: Scope, half_lives: Mapping[str, float], f: MemoryQuery, q: str,
                 vectors: Sequence[QueryVector], limit: int) -> list[dict[str, Any]]:
    """Full-text hits blended with the nearest vectors of each embedding setting (MEM-13); every candidate set
    is scoped in SQL."""
    where = [*readable(scope), *filter_clauses(f, half_lives)]
    query_ts = tsquery(q)
    text_score = func.ts_rank_cd(R.c.search, query_ts, 32)
    text_hits = (select(R.c.id.label("id"), text_score.label("text_score"))
                 .where(*where, R.c.search.op("@@")(query_ts))
                 .order_by(text_score.desc(), R.c.id.desc()).limit(CANDIDATES).subquery("text_hits"))
    if not vectors:
        score: ColumnElement[Any] = text_hits.c.text_score
        hits = select(text_hits.c.id, score.label("score")).subquery("hits")
    else:
        # An HNSW scan returns at most ef_search rows (pgvector 0.6): let it offer every candidate we take.
        await db.execute(text(f"SET LOCAL hnsw.ef_search = {CANDIDATES}"))
        nearest = [_nearest(where, query).subquery() for query in vectors]
        vec_hits = (nearest[0] if len(nearest) == 1 else
                    union_all(*[select(n) for n in nearest]).subquery()).alias("vec_hits")
        joined = text_hits.join(vec_hits, text_hits.c.id == vec_hits.c.id, full=True)
        hit_id = func.coalesce(text_hits.c.id, vec_hits.c.id)
        similarity = func.coalesce(vec_hits.c.similarity, 0)
        score = 0.5 * func.coalesce(text_hits.c.text_score, 0) + 0.5 * func.greatest(similarity, 0)
        hits = (select(hit_id.label("id"), score.label("score")).select_from(joined)
                .where(or_(text_hits.c.id.is_not(None), similarity >= MIN_VECTOR_SIMILARITY)).subquery("hits"))
    query = (select(*record_columns(scope, half_lives), cast(hits.c.score, Float).label("score"))
             .select_from(R.join(hits, and_(R.c.org_id == scope.org_id, R.c.id == hits.c.id)))
             .order_by(hits.c.score.desc(), R.c.id.desc()).limit(limit))
    return _rows(await db.execute(query))


async def versions(db: AsyncSession, org_id: str, record_id: str) -> list[dict[str, Any]]:
    query = select(V).where(V.c.org_id == org_id, V.c.record_id == record_id).order_by(V.c.version)
    return _rows(await db.execute(query))


# ---------------------------------------------------------------- writes

async def find_by_key(db: AsyncSession, org_id: str, index_id: str, subject: str | None, type_: str,
                      key: str) -> dict[str, Any] | None:
    owner = R.c.subject.is_(None) if subject is None else R.c.subject == subject
    query = (select(R.c.id, R.c.subject, R.c.labels)
             .where(R.c.org_id == org_id, R.c.index_id == index_id, owner, R.c.type == type_, R.c.key == key)
             .with_for_update())
    rows = _rows(await db.execute(query))
    return rows[0] if rows else None


async def insert_keyed(db: AsyncSession, row: dict[str, Any]) -> bool:
    """Insert a keyed record unless another transaction just wrote the same key (then False)."""
    stmt = (pg_insert(R).values(**row)
            .on_conflict_do_nothing(index_elements=["org_id", "index_id", "subject", "type", "key"],
                                    index_where=R.c.key.is_not(None))
            .returning(R.c.id))
    return (await db.execute(stmt)).first() is not None


async def find_same_words(db: AsyncSession, org_id: str, index_id: str, subject: str | None, type_: str,
                          norm_hash: str) -> str | None:
    owner = R.c.subject.is_(None) if subject is None else R.c.subject == subject
    query = (select(R.c.id).where(R.c.org_id == org_id, R.c.index_id == index_id, R.c.norm_hash == norm_hash,
                                  owner, R.c.type == type_, *active_now())
             .order_by(R.c.id).limit(1).with_for_update())
    row = (await db.execute(query)).first()
    return str(row[0]) if row else None


async def insert_records(db: AsyncSession, rows: list[dict[str, Any]]) -> None:
    if rows:
        await db.execute(insert(R), rows)


async def update_record(db: AsyncSession, org_id: str, record_id: str, values: Mapping[str, Any],
                        *, touch: bool, bump: bool) -> None:
    """Change a record; `touch` restarts the decay age (a write or confirmation, not a recall or verify),
    `bump` starts a new history version."""
    changes = dict(values)
    if touch:
        changes["updated_at"] = func.now()
    if bump:
        changes["version"] = R.c.version + 1
    await db.execute(update(R).where(R.c.org_id == org_id, R.c.id == record_id).values(**changes))


async def snapshot_versions(db: AsyncSession, org_id: str, ids: Sequence[str], *, action: str, actor_type: str,
                            actor_id: str | None, partner_id: str | None = None) -> None:
    """Append one history version per record, copying what it says now (MEM-17)."""
    if not ids:
        return
    source = select(
        R.c.org_id, R.c.id, R.c.version, func.clock_timestamp(), literal(action), literal(actor_type),
        literal(actor_id), literal(partner_id), *[R.c[c] for c in VERSIONED],
    ).where(R.c.org_id == org_id, R.c.id.in_(list(ids)))
    columns = ["org_id", "record_id", "version", "at", "action", "actor_type", "actor_id", "partner_id", *VERSIONED]
    await db.execute(insert(V).from_select(columns, source))


async def confirm(db: AsyncSession, org_id: str, record_id: str) -> None:
    """One more confirmation: restarts the decay age and starts a new version."""
    await update_record(db, org_id, record_id, {"confirmations": R.c.confirmations + 1,
                                                "last_confirmed_at": func.now()}, touch=True, bump=True)


async def delete_record(db: AsyncSession, org_id: str, record_id: str) -> None:
    await db.execute(update(R).where(R.c.org_id == org_id, R.c.contested_with == record_id)
                     .values(contested=False, contested_with=None))
    await db.execute(delete(R).where(R.c.org_id == org_id, R.c.id == record_id))


# ---------------------------------------------------------------- erasure (MEM-19)

def _without_participant(column: Any, subject_id: str) -> Any:
    """The labels with `subject_id` taken out of `participants` (a string or a list)."""
    values = column["participants"]
    remaining = func.coalesce(
        select(func.jsonb_agg(text("v"))).select_from(func.jsonb_array_elements_text(values).alias("v"))
        .where(text("v <> :who").bindparams(who=subject_id)).scalar_subquery(), func.jsonb_build_array())
    return case(
        (func.jsonb_typeof(values) == "array", column.op("||")(func.jsonb_build_object("participants", remaining))),
        else_=column.op("-")(literal("participants")),
    )


async def erase_subject(db: AsyncSession, org_id: str, subject_id: str) -> dict[str, int]:
    """Delete every record the person owns (with its versions), and her id from `participants` labels."""
    mine = select(R.c.id).where(R.c.org_id == org_id, R.c.subject == subject_id)
    version_count = int((await db.execute(
        select(func.count()).select_from(V).where(V.c.org_id == org_id, V.c.record_id.in_(mine)))).scalar_one())
    await db.execute(update(R).where(R.c.org_id == org_id, R.c.contested_with.in_(mine))
                     .values(contested=False, contested_with=None))
    deleted = await db.execute(delete(R).where(R.c.org_id == org_id, R.c.subject == subject_id).returning(R.c.id))
    records = len(deleted.all())
    named = _label_has(R.c.labels, "participants", subject_id)
    relabelled = await db.execute(update(R).where(R.c.org_id == org_id, named)
                                  .values(labels=_without_participant(R.c.labels, subject_id)).returning(R.c.id))
    await db.execute(update(V).where(V.c.org_id == org_id, _label_has(V.c.labels, "participants", subject_id))
                     .values(labels=_without_participant(V.c.labels, subject_id)))
    return {"memory_records": records, "memory_versions": version_count,
            "memory_records_relabelled": len(relabelled.all())}

