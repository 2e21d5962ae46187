"""SQL of memory records. Every read takes a Scope and turns it into WHERE clauses (ARCHITECTURE rule 2)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from pgvector.sqlalchemy import Vector
from sqlalchemy import (
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
    func,
    insert,
    literal,
    null,
    or_,
    select,
    text,
    union_all,
    update,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from backend.access.scope import Scope
from backend.db.models import KnowledgeIndex, table_of
from backend.db.prepared import Prepared
from backend.domains.erasure import repository as erasure_repo
from backend.domains.memory.expressions import (
    ORG_PARAM,
    PLAIN_COLUMNS,
    R,
    V,
    active_now,
    all_of,
    filter_clauses,
    filters,
    label_has,
    none_of,
    phrase_query,
    readable,
    record_columns,
    scope_params,
    tsquery,
    word_query,
)
from backend.domains.memory.question import Question
from shared.schemas.memory import MemoryQuery

PRIORITY_RANK = {"critical": 0, "high": 1, "normal": 2, "low": 3}
CANDIDATES = 200
VERSIONED = ("text", "metadata", "labels", "confidence", "tags", "priority", "expires_at", "status", "verified",
             "commitment")


# ---------------------------------------------------------------- reads

def _rows(result: Any) -> list[dict[str, Any]]:
    # Plain str keys: column names come back as SQLAlchemy's quoted_name, which msgspec does not take as str.
    return [{str(k): v for k, v in r._mapping.items()} for r in result.all()]


# The hot reads (one record, the records a write just made, a page of GET /memory) are built once per shape and
# run as driver SQL; the shape is what their SQL depends on, never a person's id or a filter's value.
_statements: OrderedDict[tuple[Any, ...], Prepared] = OrderedDict()
_STATEMENTS_KEPT = 512


def _statement(shape: tuple[Any, ...], build: Callable[[], Any]) -> Prepared:
    found = _statements.get(shape)
    if found is None:
        found = _statements[shape] = Prepared(build())
        if len(_statements) > _STATEMENTS_KEPT:
            _statements.popitem(last=False)
    else:
        _statements.move_to_end(shape)
    return found


def _lives(half_lives: Mapping[str, float]) -> tuple[tuple[str, float], ...]:
    return tuple(sorted(half_lives.items()))


async def get(db: AsyncSession, scope: Scope, half_lives: Mapping[str, float], record_id: str, *,
              for_update: bool = False) -> dict[str, Any] | None:
    def build() -> Any:
        query = select(*record_columns(scope, half_lives, bound=True)).where(
            R.c.id == bindparam("record_id", type_=Text), *readable(scope, bound=True))
        return query.with_for_update(of=R) if for_update else query

    statement = _statement(("get", scope.shape, _lives(half_lives), for_update), build)
    return await statement.first(db, {**scope_params(scope), "record_id": record_id})


async def get_many(db: AsyncSession, scope: Scope, half_lives: Mapping[str, float],
                   ids: Sequence[str]) -> list[dict[str, Any]]:
    """Records just written by this request, whatever the reader may see of others (partners stay scoped)."""
    if not ids:
        return []

    def build() -> Any:
        return select(*record_columns(scope, half_lives, bound=True)).where(
            R.c.org_id == bindparam(ORG_PARAM, type_=Text), R.c.id == func.any(bindparam("ids", type_=ARRAY(Text))))

    statement = _statement(("get_many", scope.shape, _lives(half_lives)), build)
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
    return await _statement(shape, build).all(db, params)


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
    model: str  # the setting's fingerprint: only vectors made with it are compared


@dataclass
class Fusion:
    """How search blends full text with vectors (MEM-13; docs/decisions.md has the measurements)."""

    method: str = "rrf"  # "rrf": reciprocal rank fusion; "weighted": a weighted sum of the two scores
    rrf_k: int = 60  # rank offset of reciprocal rank fusion
    text_weight: float = 0.3  # the weighted sum's share of the text score
    # The similarity below which a provider's vector says nothing (each model has its own scale): a record that
    # shares no word with the question is a hit only above it. `hashing` is lexical noise below 0.25.
    floors: dict[str, float] = field(default_factory=lambda: {"local": 0.0})
    default_floor: float = 0.25

    def floor(self, model: str) -> float:
        return self.floors.get(model.split("/", 1)[0], self.default_floor)


FUSION = Fusion()


def _nearest(where: list[ColumnElement[bool]], query: QueryVector, floor: float) -> Any:
    """The nearest records of these indexes to the query vector (the HNSW index of its dimensions serves it)
    that reach the provider's floor, with their rank; vectors of another model than the setting's are never
    compared."""
    dims = len(query.vector)
    qv = cast(bindparam(None, query.vector, type_=Vector()), Vector(dims))
    distance = cast(R.c.embedding, Vector(dims)).op("<=>", return_type=Float)(qv)
    nearest = (select(R.c.id.label("id"), (1 - distance).label("similarity"))
               .where(*where, R.c.index_id.in_(query.index_ids), func.vector_dims(R.c.embedding) == dims,
                      R.c.embedding_model == query.model)
               .order_by(distance).limit(CANDIDATES).subquery())
    return select(nearest.c.id, nearest.c.similarity,
                  func.row_number().over(order_by=nearest.c.similarity.desc()).label("vec_rank")
                  ).where(nearest.c.similarity >= floor)


def _text_hits(where: list[ColumnElement[bool]], question: Question) -> Any | None:
    """Up to CANDIDATES records by their words (MEM-13), with their rank.

    Plain words are alternatives: a record needs one of them. Each word weighs ln(1 + matched / having it) among
    the records that match the question, and a record scores the share of the question's weight it holds (0.9)
    plus a tenth of its proximity rank; so the more of the question's words a record has, and the rarer they are,
    the higher it ranks. Phrases must match and exclusions must not. The words travel as one array, so the
    statement is the same for any number of them.
    """
    required = [phrase_query(bindparam(f"q_p{i}", p, type_=Text)) for i, p in enumerate(question.phrases)]
    if not required and question.words:
        required = [tsquery(bindparam("q_any", " or ".join(question.words), type_=Text))]
    required += [none_of(phrase_query(bindparam(f"q_x{i}", x, type_=Text))) for i, x in enumerate(question.excluded)]
    if not required:
        return None
    match = all_of(required)
    matched = (select(R.c.id, R.c.search, func.ts_rank_cd(R.c.search, match, 32).label("cd"))
               .where(*where, R.c.search.op("@@")(match)).cte("matched"))
    if question.words:
        word = (func.unnest(bindparam("q_words", list(question.words), type_=ARRAY(Text)))
                .table_valued("word", with_ordinality="term").render_derived().alias("w"))
        term_query = word_query(word.c.word)
        terms = select(word.c.term, term_query.label("q")).where(func.numnode(term_query) > 0).cte("terms")
        held_terms = (select(matched.c.id, terms.c.term)
                      .select_from(matched.join(terms, matched.c.search.op("@@")(terms.c.q))).cte("held_terms"))
        matched_count = select(func.count()).select_from(matched).scalar_subquery()
        weights = (select(held_terms.c.term, func.ln(1.0 + cast(matched_count, Float) / cast(func.count(), Float))
                          .label("weight")).group_by(held_terms.c.term).cte("weights"))
        total = select(func.sum(weights.c.weight)).scalar_subquery()
        held = (select(held_terms.c.id, func.sum(weights.c.weight).label("held"))
                .select_from(held_terms.join(weights, held_terms.c.term == weights.c.term))
                .group_by(held_terms.c.id).subquery("held"))
        score: Any = (0.9 * func.coalesce(held.c.held / func.nullif(total, 0), 0) + 0.1 * matched.c.cd)
        scored = select(matched.c.id, cast(score, Float).label("text_score")).select_from(
            matched.outerjoin(held, held.c.id == matched.c.id))
    else:
        scored = select(matched.c.id, cast(matched.c.cd, Float).label("text_score"))
    ranked = scored.subquery("scored")
    best = (select(ranked.c.id, ranked.c.text_score)
            .order_by(ranked.c.text_score.desc(), ranked.c.id.desc()).limit(CANDIDATES).subquery())
    return select(best.c.id, best.c.text_score,
                  func.row_number().over(order_by=(best.c.text_score.desc(), best.c.id.desc())).label("text_rank"))


async def search(db: AsyncSession, scope: Scope, half_lives: Mapping[str, float], f: MemoryQuery,
                 question: Question, vectors: Sequence[QueryVector], limit: int) -> list[dict[str, Any]]:
    """Full-text hits fused with the nearest vectors of each embedding setting (MEM-13); every candidate set
    is scoped in SQL by the same WHERE clause."""
    where = [*readable(scope), *filter_clauses(f, half_lives)]
    by_words = _text_hits(where, question)
    if by_words is None and not vectors:
        return []
    fusion = FUSION
    if not vectors:
        assert by_words is not None
        text_hits = by_words.subquery("text_hits")
        hits = select(text_hits.c.id, text_hits.c.text_score.label("score")).subquery("hits")
    else:
        # An HNSW scan returns at most ef_search rows (pgvector 0.6): let it offer every candidate we take.
        await db.execute(text(f"SET LOCAL hnsw.ef_search = {CANDIDATES}"))
        nearest = [_nearest(where, query, fusion.floor(query.model)).subquery() for query in vectors]
        vec_hits = (nearest[0] if len(nearest) == 1 else
                    union_all(*[select(n) for n in nearest]).subquery()).alias("vec_hits")
        similarity = func.greatest(func.coalesce(vec_hits.c.similarity, 0), 0)
        scale = (fusion.rrf_k + 1) / 2.0  # so that first in both lists scores 1
        if by_words is None:
            if fusion.method == "rrf":
                score = scale / (fusion.rrf_k + vec_hits.c.vec_rank)
            else:
                score = (1 - fusion.text_weight) * similarity
            hits = select(vec_hits.c.id, score.label("score")).subquery("hits")
        else:
            text_hits = by_words.subquery("text_hits")
            joined = text_hits.join(vec_hits, text_hits.c.id == vec_hits.c.id, full=True)
            hit_id = func.coalesce(text_hits.c.id, vec_hits.c.id)
            if fusion.method == "rrf":
                score = (func.coalesce(scale / (fusion.rrf_k + text_hits.c.text_rank), 0)
                         + func.coalesce(scale / (fusion.rrf_k + vec_hits.c.vec_rank), 0))
            else:
                score = (fusion.text_weight * func.coalesce(text_hits.c.text_score, 0)
                         + (1 - fusion.text_weight) * similarity)
            hits = select(hit_id.label("id"), score.label("score")).select_from(joined).subquery("hits")
    query = (select(*record_columns(scope, half_lives), cast(hits.c.score, Float).label("score"))
             .select_from(R.join(hits, and_(R.c.org_id == scope.org_id, R.c.id == hits.c.id)))
             .order_by(hits.c.score.desc(), R.c.id.desc()).limit(limit))
    return _rows(await db.execute(query))


async def versions(db: AsyncSession, org_id: str, record_id: str) -> list[dict[str, Any]]:
    query = select(V).where(V.c.org_id == org_id, V.c.record_id == record_id).order_by(V.c.version)
    return _rows(await db.execute(query))


# ---------------------------------------------------------------- writes

IDX = table_of(KnowledgeIndex)
FRESH_COLUMNS = ("org_id", "id", "index_id", "subject", "type", "text", "norm_hash", "metadata", "labels", "confidence",
                 "source", "verified", "key", "tags", "priority", "expires_at", "commitment", "provenance")
_COLUMN_TYPES: dict[str, Any] = {"metadata": JSONB, "labels": JSONB, "commitment": JSONB, "provenance": JSONB,
                                 "tags": ARRAY(Text), "confidence": Float, "verified": Boolean,
                                 "expires_at": DateTime(timezone=True)}
_index_for_write: dict[frozenset[str] | None, Prepared] = {}


async def index_for_write(db: AsyncSession, scope: Scope, index_id: str, lock_hashes: Sequence[str]
                          ) -> dict[str, Any] | None:
    """The index a write goes to, if the scope reaches it, and, in the same round trip, the shared side of the
    erasure lock of each person the write names (MEM-19; `insert_fresh` then checks no erasure came first)."""
    statement = _index_for_write.get(scope.indexes)
    if statement is None:
        if len(_index_for_write) > 512:
            _index_for_write.clear()
        org = bindparam("org_id", type_=Text)
        statement = _index_for_write[scope.indexes] = Prepared(
            select(IDX, erasure_repo.locked_shared(org, bindparam("hashes", type_=ARRAY(Text))).label("locked"))
            .where(IDX.c.org_id == org, IDX.c.id == bindparam("index_id", type_=Text), scope.index_clause(IDX.c.id)))
    row = await statement.first(db, {"org_id": scope.org_id, "index_id": index_id, "hashes": list(lock_hashes)})
    if row is not None:
        row.pop("locked")
    return row


def _build_insert_fresh() -> Any:
    """One record and its first history version in one statement, refused (no row) when a person it names was
    erased since this transaction began; answers the record as `record_columns` reads a record just written."""
    org = bindparam("org_id", type_=Text)
    values: Any = select(*[bindparam(name, type_=_COLUMN_TYPES.get(name, Text)) for name in FRESH_COLUMNS]).where(
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
    params.update({"hashes": list(people_hashes), "actor_type": actor_type, "actor_id": actor_id})
    return await _INSERT_FRESH.first(db, params)



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
    named = label_has(R.c.labels, "participants", subject_id)
    relabelled = await db.execute(update(R).where(R.c.org_id == org_id, named)
                                  .values(labels=_without_participant(R.c.labels, subject_id)).returning(R.c.id))
    await db.execute(update(V).where(V.c.org_id == org_id, label_has(V.c.labels, "participants", subject_id))
                     .values(labels=_without_participant(V.c.labels, subject_id)))
    return {"memory_records": records, "memory_versions": version_count,
            "memory_records_relabelled": len(relabelled.all())}

