"""SQL of memory records. Every read takes a Scope and turns it into WHERE clauses (ARCHITECTURE rule 2)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from pgvector.sqlalchemy import Vector
from sqlalchemy import (
    BigInteger,
    Boolean,
    ColumnElement,
    DateTime,
    Float,
    Integer,
    Text,
    and_,
    bindparam,
    case,
    cast,
    delete,
    exists,
    func,
    insert,
    literal,
    null,
    or_,
    select,
    text,
    update,
)
from sqlalchemy.dialects import postgresql
from sqlalchemy.dialects.postgresql import ARRAY, JSONB
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from backend.access.scope import Scope
from backend.db.models import KnowledgeIndex, table_of
from backend.db.plan_mode import keep_plans_column
from backend.db.prepared import Prepared, PreparedByShape
from backend.domains.erasure import repository as erasure_repo
from backend.domains.memory import bulk
from backend.domains.memory.expressions import (
    ORG_PARAM,
    PLAIN_COLUMNS,
    R,
    V,
    filter_clauses,
    filters,
    label_has,
    readable,
    record_columns,
    scope_params,
)
from shared.schemas.memory import MemoryQuery

PRIORITY_RANK = {"critical": 0, "high": 1, "normal": 2, "low": 3}
VERSIONED = ("text", "metadata", "labels", "confidence", "tags", "priority", "expires_at", "status", "verified",
             "commitment")


# ---------------------------------------------------------------- reads

def _rows(result: Any) -> list[dict[str, Any]]:
    # Plain str keys: column names come back as SQLAlchemy's quoted_name, which msgspec does not take as str.
    return [{str(k): v for k, v in r._mapping.items()} for r in result.all()]


# The hot reads (one record, the records a write just made, a page of GET /memory) are built once per shape and
# run as driver SQL; the shape is what their SQL depends on, never a person's id or a filter's value.
_statements = PreparedByShape()


def _lives(half_lives: Mapping[str, float]) -> tuple[tuple[str, float], ...]:
    return tuple(sorted(half_lives.items()))


async def get(db: AsyncSession, scope: Scope, half_lives: Mapping[str, float], record_id: str, *,
              for_update: bool = False) -> dict[str, Any] | None:
    def build() -> Any:
        query = select(*record_columns(scope, half_lives, bound=True)).where(
            R.c.id == bindparam("record_id", type_=Text), *readable(scope, bound=True))
        return query.with_for_update(of=R) if for_update else query

    statement = _statements.get(("get", scope.shape, _lives(half_lives), for_update), build)
    return await statement.first(db, {**scope_params(scope), "record_id": record_id})


async def get_many(db: AsyncSession, scope: Scope, half_lives: Mapping[str, float],
                   ids: Sequence[str]) -> list[dict[str, Any]]:
    """Records just written by this request, whatever the reader may see of others (partners stay scoped)."""
    if not ids:
        return []

    def build() -> Any:
        return select(*record_columns(scope, half_lives, bound=True)).where(
            R.c.org_id == bindparam(ORG_PARAM, type_=Text), R.c.id == func.any(bindparam("ids", type_=ARRAY(Text))))

    statement = _statements.get(("get_many", scope.shape, _lives(half_lives)), build)
    rows = await statement.all(db, {**scope_params(scope), "ids": list(ids)})
    by_id = {r["id"]: r for r in rows}
    return [by_id[i] for i in ids if i in by_id]


async def list_page(db: AsyncSession, scope: Scope, half_lives: Mapping[str, float], f: MemoryQuery,
                    after_id: str | None, limit: int) -> list[dict[str, Any]]:
    """A page of `GET /memory`, newest first."""
    found = filters(f, half_lives)

    def build() -> Any:
        query = select(*record_columns(scope, half_lives, bound=True)).where(
            *readable(scope, bound=True), *[entry.clause() for entry in found])
        if after_id:
            query = query.where(R.c.id < bindparam("after_id", type_=Text))
        return query.order_by(R.c.id.desc()).limit(bindparam("limit", type_=Integer))

    shape = ("list", scope.shape, _lives(half_lives), tuple(entry.token for entry in found), bool(after_id))
    params = {**scope_params(scope), "after_id": after_id, "limit": limit}
    for entry in found:
        params.update(entry.params)
    return await _statements.get(shape, build).all(db, params)


def _build_counts(scope: Scope, found: Sequence[Any]) -> Any:
    """One statement: the live records grouped by (store, type, owner) as the stats index streams them (migration
    0017), summed per owner kind, with the distinct owners counted once from the same groups."""
    groups = (select(R.c.index_id, R.c.type, R.c.subject, func.count().label("n"))
              .where(*readable(scope, bound=True), *[entry.clause() for entry in found])
              .group_by(R.c.index_id, R.c.type, R.c.subject).cte("groups"))
    owners = select(groups.c.subject).where(groups.c.subject.is_not(None)).distinct().subquery("owners")
    people = select(func.count()).select_from(owners).scalar_subquery()
    shared = groups.c.subject.is_(None)
    return (select(groups.c.index_id, groups.c.type, shared.label("shared"),
                   cast(func.sum(groups.c.n), BigInteger).label("records"), people.label("people"))
            .group_by(groups.c.index_id, groups.c.type, shared)
            .order_by(groups.c.index_id, groups.c.type, shared))


async def counts(db: AsyncSession, scope: Scope, half_lives: Mapping[str, float],
                 f: MemoryQuery) -> tuple[list[dict[str, Any]], int]:
    """Records the scope reaches and the filters keep, counted per index, type and owner kind, and the number
    of distinct people among their owners: the same WHERE as `list_page`, so a count never shows more."""
    found = filters(f, half_lives)
    shape = ("counts", scope.shape, _lives(half_lives), tuple(entry.token for entry in found))
    params = scope_params(scope)
    for entry in found:
        params.update(entry.params)
    rows = await _statements.get(shape, lambda: _build_counts(scope, found)).all(db, params)
    people = int(rows[0]["people"]) if rows else 0  # no record counted, nobody owning one
    return [{k: v for k, v in r.items() if k != "people"} for r in rows], people


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


_BUMP_RECALL = Prepared(update(R).where(R.c.org_id == bindparam("org_id"),
                                        R.c.id == func.any(bindparam("ids", type_=ARRAY(Text))))
                        .values(recall_count=R.c.recall_count + 1))


async def bump_recall(db: AsyncSession, org_id: str, ids: Sequence[str]) -> None:
    """Recalls count but never restart the decay age (MEM-9): updated_at is left alone."""
    if ids:
        await _BUMP_RECALL.all(db, {"org_id": org_id, "ids": list(ids)})


_ADD_RECALLS = text("UPDATE memory_records AS r SET recall_count = r.recall_count + b.n"
                    " FROM unnest(CAST(:ids AS text[]), CAST(:ns AS integer[])) AS b(id, n)"
                    " WHERE r.org_id = :org_id AND r.id = b.id")


async def add_recalls(db: AsyncSession, org_id: str, counts: Mapping[str, int]) -> None:
    """Several recalls per record at once (recall_tally); ids in order, so two writers lock rows alike."""
    ids = sorted(counts)
    await db.execute(_ADD_RECALLS, {"org_id": org_id, "ids": ids, "ns": [counts[i] for i in ids]})


def _seen_partner(scope: Scope) -> ColumnElement[Any]:
    """A version's partner only when the reader may see it: the check `record_columns` makes for a record's own
    partners (MEM-16, MEM-17), so a contest partner shows in history wherever it shows on the record."""
    seen = exists().where(R.c.id == V.c.partner_id, *readable(scope)).correlate(V)
    return case((V.c.partner_id.is_(None), None), (seen, V.c.partner_id), else_=None)


async def versions(db: AsyncSession, scope: Scope, record_id: str) -> list[dict[str, Any]]:
    columns = [c for c in V.c if c.name != "partner_id"]
    query = (select(*columns, _seen_partner(scope).label("partner_id"))
             .where(V.c.org_id == scope.org_id, V.c.record_id == record_id).order_by(V.c.version))
    return _rows(await db.execute(query))


# ---------------------------------------------------------------- writes

IDX = table_of(KnowledgeIndex)
FRESH_COLUMNS = ("org_id", "id", "index_id", "subject", "type", "text", "norm_hash", "metadata", "labels", "confidence",
                 "source", "verified", "key", "tags", "priority", "expires_at", "commitment", "provenance",
                 "embedding", "embedding_model")
_COLUMN_TYPES: dict[str, Any] = {"metadata": JSONB, "labels": JSONB, "commitment": JSONB, "provenance": JSONB,
                                 "tags": ARRAY(Text), "confidence": Float, "verified": Boolean,
                                 "expires_at": DateTime(timezone=True)}
_VECTOR_TEXT = Vector().bind_processor(postgresql.dialect())  # a vector as pgvector's text form, None as None
_index_for_write = PreparedByShape()


def _index_for_write_query(scope: Scope) -> Any:
    org = bindparam("org_id", type_=Text)
    return (select(IDX, erasure_repo.locked_shared(org, bindparam("hashes", type_=ARRAY(Text))).label("locked"),
                   keep_plans_column().label("plans"))
            .where(IDX.c.org_id == org, IDX.c.id == bindparam("index_id", type_=Text), scope.index_clause(IDX.c.id)))


async def index_for_write(db: AsyncSession, scope: Scope, index_id: str, lock_hashes: Sequence[str]
                          ) -> dict[str, Any] | None:
    """The index a write goes to, if the scope reaches it, and, in the same round trip, the shared side of the
    erasure lock of each person the write names (MEM-19; `insert_fresh` then checks no erasure came first) and
    `let_key_checks_keep_plans` for the transaction's next statements."""
    statement = _index_for_write.get(scope.indexes, lambda: _index_for_write_query(scope))
    row = await statement.first(db, {"org_id": scope.org_id, "index_id": index_id, "hashes": list(lock_hashes)})
    if row is not None:
        del row["locked"], row["plans"]
    return row


def _fresh_value(name: str) -> Any:
    if name == "embedding":  # sent as pgvector's text form (_VECTOR_TEXT)
        return cast(bindparam(name, type_=Text), Vector())
    return bindparam(name, type_=_COLUMN_TYPES.get(name, Text))


def _build_insert_fresh() -> Any:
    """One record and its first history version in one statement, refused (no row) when a person it names was
    erased since this transaction began; answers the record as `record_columns` reads a record just written."""
    org = bindparam("org_id", type_=Text)
    values: Any = select(*[_fresh_value(name) for name in FRESH_COLUMNS]).where(
        erasure_repo.not_erased_since_now(org, bindparam("hashes", type_=ARRAY(Text))))
    rec = insert(R).from_select(list(FRESH_COLUMNS), values).returning(*PLAIN_COLUMNS).cte("rec")
    version = insert(V).from_select(
        ["org_id", "record_id", "version", "at", "action", "actor_type", "actor_id", "partner_id", *VERSIONED],
        select(rec.c.org_id, rec.c.id, rec.c.version, func.clock_timestamp(), literal("created"),
               bindparam("actor_type", type_=Text), bindparam("actor_id", type_=Text), null(),
               *[rec.c[name] for name in VERSIONED])).cte("version")
    # Just written: no age, so the effective confidence is the stored one, and no partner yet.
    return (select(*rec.c, cast(rec.c.confidence, Float).label("effective_confidence"),
                   null().label("contested_with"), null().label("replaces"), null().label("replaced_by"))
            .add_cte(version))


_INSERT_FRESH = Prepared(_build_insert_fresh())


async def insert_fresh(db: AsyncSession, values: Mapping[str, Any], *, actor_type: str, actor_id: str | None,
                       people_hashes: Sequence[str]) -> dict[str, Any] | None:
    """Write one new record with its history version; None when a person it names was erased meanwhile."""
    params = {name: values[name] for name in FRESH_COLUMNS}
    params["embedding"] = _VECTOR_TEXT(params["embedding"])  # driver SQL takes no SQLAlchemy bind processing
    params.update({"hashes": list(people_hashes), "actor_type": actor_type, "actor_id": actor_id})
    return await _INSERT_FRESH.first(db, params)



async def find_by_key(db: AsyncSession, scope: Scope, index_id: str, subject: str | None, type_: str,
                      key: str) -> dict[str, Any] | None:
    """The record a keyed write would change, with `seen`: whether the scope's policy lets the writer see it. A
    key is unique whoever may see its record, so the record is found either way; the writer decides on `seen`."""
    owner = R.c.subject.is_(None) if subject is None else R.c.subject == subject
    seen = scope.visible("memory_record", "see", R.c.subject, R.c.labels).label("seen")
    query = (select(R.c.id, R.c.subject, R.c.labels, R.c.commitment, R.c.status, R.c.replaced_by, seen)
             .where(R.c.org_id == scope.org_id, R.c.index_id == index_id, owner, R.c.type == type_, R.c.key == key)
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


async def insert_records(db: AsyncSession, rows: list[dict[str, Any]]) -> None:
    if bulk.suits(rows):
        await bulk.insert(db, rows)
    elif rows:
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
    ).where(R.c.org_id == org_id, R.c.id == func.any(bindparam("ids", list(ids), type_=ARRAY(Text))))
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
    named = label_has(R.c.labels, "participants", subject_id)
    relabelled = await db.execute(update(R).where(R.c.org_id == org_id, named)
                                  .values(labels=_without_participant(R.c.labels, subject_id)).returning(R.c.id))
    await db.execute(update(V).where(V.c.org_id == org_id, label_has(V.c.labels, "participants", subject_id))
                     .values(labels=_without_participant(V.c.labels, subject_id)))
    return {"memory_records": records, "memory_versions": version_count,
            "memory_records_relabelled": len(relabelled.all())}

