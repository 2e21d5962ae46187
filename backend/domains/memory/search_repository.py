"""SQL of memory search (MEM-13): candidates by words and by vectors, each scoped by the same WHERE clause as every
read (ARCHITECTURE rule 2), fused into one ranking."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pgvector.sqlalchemy import Vector
from sqlalchemy import ColumnElement, Float, Text, and_, bindparam, cast, func, select, text, union_all
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.asyncio import AsyncSession

from backend.access.scope import Scope
from backend.domains.memory.expressions import (
    R,
    all_of,
    filter_clauses,
    none_of,
    phrase_query,
    readable,
    record_columns,
    tsquery,
    word_query,
)
from backend.domains.memory.question import Question
from shared.schemas.memory import MemoryQuery

CANDIDATES = 200  # candidates by words, and by vectors per embedding setting


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
