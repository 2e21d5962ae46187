"""SQL of memory search (MEM-13): candidates by words and by vectors, each scoped by the same WHERE clause as every
read (ARCHITECTURE rule 2), fused into one ranking."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pgvector.sqlalchemy import Vector
from sqlalchemy import (
    ColumnElement,
    Float,
    Integer,
    Text,
    and_,
    bindparam,
    case,
    cast,
    func,
    literal,
    select,
    text,
    union_all,
)
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.asyncio import AsyncSession

from backend.access.scope import Scope
from backend.db.prepared import Prepared
from backend.domains.memory.expressions import (
    ORG_PARAM,
    Filter,
    R,
    all_of,
    any_of,
    filters,
    none_of,
    phrase_query,
    readable,
    record_columns,
    scope_params,
    similarity,
    tsquery,
    word_query,
)
from backend.domains.memory.question import Question
from shared.schemas.memory import MemoryQuery

# Candidates by words, and by vectors per embedding setting: the page asked for, at least 100 (max 200, the
# largest page): the HNSW beam (`ef_search`) is the candidate count, and a wide beam is what a search costs.
MIN_CANDIDATES = 100
# A person with this many records of her own is not ranked exactly (that reads every one of them: 0.35 s for
# 121k at 1M records) but through the HNSW index over the whole store, with this wider beam, so that enough of
# her records survive the scope (bench/results/vector.md: recall@10 0.97 for 121k of 1M records).
MANY_OWN = 1000
WIDE_BEAM = 400


def _rows(result: Any) -> list[dict[str, Any]]:
    return [{str(k): v for k, v in r._mapping.items()} for r in result.all()]


@dataclass(frozen=True)
class QueryVector:
    """The query embedded by one embedding setting, for the indexes that share it."""

    index_ids: tuple[str, ...]
    vector: list[float]
    model: str  # the setting's fingerprint: only vectors made with it are compared


@dataclass
class Fusion:
    """How search blends full text with vectors (MEM-13; docs/decisions.md has the measurements)."""

    # "rrf": reciprocal rank fusion; "rrf_share": the same with the words' term scaled by the text score (the
    # part of the question's weight the record holds); "weighted": a weighted sum of the two scores
    method: str = "rrf_share"
    rrf_k: int = 10  # rank offset of reciprocal rank fusion
    text_weight: float = 0.3  # the weighted sum's share of the text score
    # The similarity below which a provider's vector says nothing (each model has its own scale): a record that
    # shares no word with the question is a hit only above it. `hashing` is lexical noise below 0.25.
    floors: dict[str, float] = field(default_factory=lambda: {"local": 0.0})
    default_floor: float = 0.25

    def floor(self, model: str) -> float:
        return self.floors.get(model.split("/", 1)[0], self.default_floor)


FUSION = Fusion()


def _nearest(where: list[ColumnElement[bool]], n: int, dims: int, reach: str) -> Any:
    """The nearest records of one embedding setting's indexes (parameters `v{n}_*`) to its query vector that reach
    the provider's floor, with their rank; vectors of another model than the setting's are never compared.

    An HNSW scan returns at most `hnsw.ef_search` rows before the scope is applied (pgvector 0.6 has no iterative
    scans), so over the whole store a person whose records are a small part of it gets few or none of hers. So
    for a request naming a person (`reach` "person") her own records are also ranked exactly (by the owner index;
    `+ 0` keeps the planner off HNSW) and the lists merged; and when she can read only her own records and the
    shared ones (`reach` "own_and_shared", the default policy) the shared ones come from the HNSW index over the
    shared records alone (migration 0018), which the scope filters nothing out of. `reach` "store": one scan.
    A person with many records of her own (`reach` "many_own") takes the whole store's index with a wider beam
    (`WIDE_BEAM`) beside the shared records' one, instead of ranking all of hers.
    """
    qv = cast(bindparam(f"v{n}_vector", type_=Vector()), Vector(dims))
    distance = cast(R.c.embedding, Vector(dims)).op("<=>", return_type=Float)(qv)
    comparable = [*where, R.c.index_id == func.any(bindparam(f"v{n}_indexes", type_=ARRAY(Text))),
                  func.vector_dims(R.c.embedding) == dims, R.c.embedding_model == bindparam(f"v{n}_model", type_=Text)]
    found = select(R.c.id.label("id"), similarity(distance).label("similarity")).where(*comparable)
    candidates = bindparam("candidates", type_=Integer)
    shared = found.where(R.c.subject.is_(None)).order_by(distance).limit(candidates)
    whole = found.order_by(distance).limit(candidates)
    own = (found.where(R.c.subject == bindparam("vector_owner", type_=Text))
           .order_by(distance + 0).limit(candidates))
    lists = {"store": [whole], "person": [whole, own], "own_and_shared": [shared, own],
             "many_own": [whole, shared]}[reach]
    return _ranked(lists, n)


def _ranked(lists: list[Any], n: int) -> Any:
    """The lists merged, each record once with its best similarity, ranked; below the provider's floor left out."""
    both = union_all(*[select(part.subquery()) for part in lists]).subquery() if len(lists) > 1 else \
        lists[0].subquery()
    nearest = select(both.c.id, func.max(both.c.similarity).label("similarity")).group_by(both.c.id).subquery()
    return select(nearest.c.id, nearest.c.similarity,
                  func.row_number().over(order_by=(nearest.c.similarity.desc(), nearest.c.id)).label("vec_rank")
                  ).where(nearest.c.similarity >= bindparam(f"v{n}_floor", type_=Float))


def _reach(scope: Scope, many_own: bool) -> str:
    """Which vector lists a search of this scope takes (`_nearest`)."""
    if scope.subject_id is None:
        return "store"
    if many_own:
        return "many_own"
    return "own_and_shared" if scope.reads_own_and_shared_only("memory_record") else "person"


# The HNSW beam for the transaction, and whether the person has `MANY_OWN` records or more in the indexes searched
# (one round trip): an HNSW scan returns at most `ef_search` rows (pgvector 0.6), so the beam is the candidate
# count, wider for her.
_BEAM = text(
    "SELECT set_config('hnsw.ef_search', (CASE WHEN CAST(:owner AS text) IS NOT NULL AND (SELECT count(*) FROM "
    "(SELECT 1 FROM memory_records WHERE org_id = :org AND subject = :owner AND index_id = ANY(:indexes) "
    "LIMIT :many) AS hers) >= :many THEN :wide ELSE :narrow END)::text, true)"
).bindparams(bindparam("indexes", type_=ARRAY(Text)))


def _constraints(question: Question) -> list[Any]:
    """What every hit must satisfy, whether found by its words or by its vector: the required groups (one term of
    each: `"phrases"`, and terms joined to them by `or`) and the exclusions."""
    def term(i: int, j: int, negated: bool) -> Any:
        query = phrase_query(bindparam(f"q_p{i}_{j}", type_=Text))
        return none_of(query) if negated else query

    groups = [any_of([term(i, j, t.negated) for j, t in enumerate(group)]) for i, group in enumerate(question.required)]
    return groups + [none_of(phrase_query(bindparam(f"q_x{i}", type_=Text))) for i in range(len(question.excluded))]


def _text_hits(where: list[ColumnElement[bool]], question: Question) -> Any | None:
    """Up to `candidates` records by their words (MEM-13), with their rank.

    Plain words are alternatives: a record needs one of them. Each word weighs ln(1 + matched / having it) among
    the records that match the question, and a record's share is the part of the question's weight it holds; so
    the more of the question's words a record has, and the rarer they are, the higher it ranks. The best
    `candidates` by share then score 0.9 × share + 0.1 × their proximity rank (`ts_rank_cd`). Phrases must match
    and exclusions must not. The words travel as one array, so the statement is the same for any number of them.
    """
    required = _constraints(question)
    if not question.required and question.words:
        required.append(tsquery(bindparam("q_any", type_=Text)))
    if not required:
        return None
    match = all_of(required)
    matched = select(R.c.id, R.c.search).where(*where, R.c.search.op("@@")(match)).cte("matched")
    if question.words:
        word = (func.unnest(bindparam("q_words", type_=ARRAY(Text)))
                .table_valued("word", with_ordinality="term").render_derived().alias("w"))
        term_query = word_query(word.c.word)
        # Materialised: each word's query is made once, not once per record it is tested against.
        terms = (select(word.c.term, term_query.label("q")).where(func.numnode(term_query) > 0)
                 .cte("terms").prefix_with("MATERIALIZED"))
        held_terms = (select(matched.c.id, terms.c.term)
                      .select_from(matched.join(terms, matched.c.search.op("@@")(terms.c.q))).cte("held_terms"))
        matched_count = select(func.count()).select_from(matched).scalar_subquery()
        weights = (select(held_terms.c.term, func.ln(1.0 + cast(matched_count, Float) / cast(func.count(), Float))
                          .label("weight")).group_by(held_terms.c.term).cte("weights"))
        total = select(func.sum(weights.c.weight)).scalar_subquery()
        held = (select(held_terms.c.id, func.sum(weights.c.weight).label("held"))
                .select_from(held_terms.join(weights, held_terms.c.term == weights.c.term))
                .group_by(held_terms.c.id).subquery("held"))
        share: Any = func.coalesce(held.c.held / func.nullif(total, 0), 0)
        shared = (select(matched.c.id, matched.c.search, cast(share, Float).label("share"))
                  .select_from(matched.outerjoin(held, held.c.id == matched.c.id)).subquery("shared"))
    else:
        shared = select(matched.c.id, matched.c.search, literal(0.0, Float).label("share")).subquery("shared")
    # The proximity rank is computed for the best candidates by share only: it parses each record's positions.
    best = (select(shared).order_by(shared.c.share.desc(), shared.c.id.desc())
            .limit(bindparam("candidates", type_=Integer)).subquery("best"))
    score = cast(0.9 * best.c.share + 0.1 * func.ts_rank_cd(best.c.search, match, 32), Float)
    scored = select(best.c.id, score.label("text_score")).subquery("scored")
    return select(scored.c.id, scored.c.text_score,
                  func.row_number().over(order_by=(scored.c.text_score.desc(), scored.c.id.desc()))
                  .label("text_rank"))


def _statement(scope: Scope, half_lives: Mapping[str, float], found: list[Filter], question: Question,
               dims: Sequence[int], fusion: Fusion, many_own: bool) -> Any:
    where = [*readable(scope, bound=True), *[entry.clause() for entry in found]]
    by_words = _text_hits(where, question)
    if not dims:
        assert by_words is not None
        text_hits = by_words.subquery("text_hits")
        hits = select(text_hits.c.id, text_hits.c.text_score.label("score")).subquery("hits")
    else:
        # A record found by its vector obeys the question's phrases and exclusions too (web-search meaning).
        constraints = _constraints(question)
        vector_where = [*where, R.c.search.op("@@")(all_of(constraints))] if constraints else where
        nearest = [_nearest(vector_where, n, d, _reach(scope, many_own)).subquery() for n, d in enumerate(dims)]
        vec_hits = (nearest[0] if len(nearest) == 1 else
                    union_all(*[select(n) for n in nearest]).subquery()).alias("vec_hits")
        similarity = func.greatest(func.coalesce(vec_hits.c.similarity, 0), 0)
        scale = (fusion.rrf_k + 1) / 2.0  # so that first in both lists scores 1
        if by_words is None:
            if fusion.method in ("rrf", "rrf_share"):
                score: Any = scale / (fusion.rrf_k + vec_hits.c.vec_rank)
            else:
                score = (1 - fusion.text_weight) * similarity
            hits = select(vec_hits.c.id, score.label("score")).subquery("hits")
        else:
            text_hits = by_words.subquery("text_hits")
            joined = text_hits.join(vec_hits, text_hits.c.id == vec_hits.c.id, full=True)
            # CASE, not COALESCE: under row-level security the records are fetched by this id through their
            # primary key only if the join condition counts as leakproof, and PostgreSQL deems no COALESCE so
            # (it then read the whole table: 60 ms instead of 6 at 200k records).
            hit_id = case((text_hits.c.id.is_not(None), text_hits.c.id), else_=vec_hits.c.id)
            if fusion.method in ("rrf", "rrf_share"):
                by_text: Any = scale / (fusion.rrf_k + text_hits.c.text_rank)
                if fusion.method == "rrf_share":
                    by_text = by_text * text_hits.c.text_score
                score = (func.coalesce(by_text, 0) + func.coalesce(scale / (fusion.rrf_k + vec_hits.c.vec_rank), 0))
            else:
                score = (fusion.text_weight * func.coalesce(text_hits.c.text_score, 0)
                         + (1 - fusion.text_weight) * similarity)
            hits = select(hit_id.label("id"), score.label("score")).select_from(joined).subquery("hits")
    org = bindparam(ORG_PARAM, type_=Text)
    return (select(*record_columns(scope, half_lives, bound=True), cast(hits.c.score, Float).label("score"))
            .select_from(R.join(hits, and_(R.c.org_id == org, R.c.id == hits.c.id)))
            .order_by(hits.c.score.desc(), R.c.id.desc()).limit(bindparam("limit", type_=Integer)))


_statements: OrderedDict[tuple[Any, ...], Prepared] = OrderedDict()
_STATEMENTS_KEPT = 256


async def search(db: AsyncSession, scope: Scope, half_lives: Mapping[str, float], f: MemoryQuery,
                 question: Question, vectors: Sequence[QueryVector], limit: int) -> list[dict[str, Any]]:
    """Full-text hits fused with the nearest vectors of each embedding setting (MEM-13); every candidate set
    is scoped in SQL by the same WHERE clause. Built and compiled once per shape (house rule 12): the scope's
    and the filters' shape, the question's (Question.shape), each setting's
    dimensions; the person, the words, the vectors and the filters' values are parameters."""
    if question.empty and not vectors:
        return []
    found = filters(f, half_lives)
    fusion = FUSION
    candidates = max(limit, MIN_CANDIDATES)
    many_own = False
    if vectors:
        searched = sorted({index_id for v in vectors for index_id in v.index_ids})
        beam = await db.execute(_BEAM, {"owner": scope.subject_id, "org": scope.org_id, "indexes": searched,
                                        "many": MANY_OWN, "wide": max(candidates, WIDE_BEAM), "narrow": candidates})
        many_own = int(beam.scalar_one()) > candidates  # the wide beam is wider than the largest page
    dims = tuple(len(v.vector) for v in vectors)
    lives = tuple(sorted(half_lives.items()))
    shape = ("search", scope.shape, lives, tuple(e.token for e in found), question.shape, dims, fusion.method,
             fusion.rrf_k, fusion.text_weight, many_own)
    statement = _statements.get(shape)
    if statement is None:
        statement = _statements[shape] = Prepared(_statement(scope, half_lives, found, question, dims, fusion,
                                                             many_own))
        if len(_statements) > _STATEMENTS_KEPT:
            _statements.popitem(last=False)
    else:
        _statements.move_to_end(shape)
    params: dict[str, Any] = {**scope_params(scope), "limit": limit, "candidates": candidates,
                              "q_any": " or ".join(question.words), "q_words": list(question.words),
                              "vector_owner": scope.subject_id}
    params.update({f"q_p{i}_{j}": t.text for i, group in enumerate(question.required) for j, t in enumerate(group)})
    params.update({f"q_x{i}": x for i, x in enumerate(question.excluded)})
    for entry in found:
        params.update(entry.params)
    for n, query in enumerate(vectors):
        params.update({f"v{n}_vector": query.vector, f"v{n}_indexes": list(query.index_ids),
                       f"v{n}_model": query.model, f"v{n}_floor": fusion.floor(query.model)})
    return await statement.all(db, {name: value for name, value in params.items() if name in statement.names})
