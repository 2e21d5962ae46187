"""SQL of the injection builder: per section, a bounded number of candidates in rank order (INJ-4 … INJ-9).

Every query takes the request's Scope (ARCHITECTURE rule 2) and an explicit owner condition per section, so a
turn for a person never reaches another person's record even where the policy would let the request see it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pgvector.sqlalchemy import Vector
from sqlalchemy import (
    ColumnElement,
    DateTime,
    Float,
    Integer,
    Text,
    and_,
    bindparam,
    case,
    cast,
    func,
    literal,
    literal_column,
    not_,
    null,
    or_,
    select,
    union_all,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, TIMESTAMP
from sqlalchemy.ext.asyncio import AsyncSession

from backend.access.scope import Scope
from backend.db.prepared import Prepared, PreparedByShape
from backend.domains.memory.expressions import (
    ORG_PARAM,
    R,
    effective_expr,
    evaluated_at,
    halved,
    min_confidence_clause,
    min_confidence_params,
    readable,
    scope_params,
    similarity,
    tsquery,
    unexpired,
)

NOT_PERSONAL_OR_SHARED = ("commitment", "behaviour", "episode")  # types with sections of their own
SLACK = 50  # candidates fetched beyond a section's count, so the budget walk can skip long ones
HEAD = 2000  # records read by stored confidence to find the floor of the top candidates
EPISODE_HALF_LIFE_DAYS = 30.0


@dataclass(frozen=True)
class Selection:
    """What the block asks for: its store, the person (or nobody), and its filters."""

    index_id: str
    person: str | None
    types: Sequence[str]
    metadata: Mapping[str, Any]
    min_confidence: float | None
    at: datetime | None = None


@dataclass(frozen=True)
class Ranking:
    mode: str  # confidence | relevance | blend
    text_query: str | None  # an `or` of the turn's words, web-search syntax
    vector: list[float] | None
    model: str | None = None  # the index's embedding setting (fingerprint): only its vectors are compared


def or_query(text: str | None) -> str | None:
    """The turn's input as an `or` of its words, so relevance rewards any shared word (websearch syntax)."""
    if not text:
        return None
    words = re.findall(r"\w+", text)[:64]
    return " or ".join(words) if words else None


# The statement's per-call values, all named parameters: one statement serves every person, input and instant of
# the same shape (house rule 12). Everything else it holds is fixed by the shape (`_shape`).
PERSON = bindparam("inj_person", type_=Text)
INDEX = bindparam("inj_index", type_=Text)
AT = bindparam("inj_at", type_=DateTime(timezone=True))
TYPES = bindparam("inj_types", type_=ARRAY(Text))
METADATA = bindparam("inj_metadata", type_=JSONB)
QUERY = bindparam("inj_q", type_=Text)
VECTOR = bindparam("inj_vector", type_=Vector())
MODEL = bindparam("inj_model", type_=Text)
CONFIDENCE = "inj_conf"


def _bound(kind: str, position: int) -> Any:
    return bindparam(f"inj_{kind}{position}", type_=Integer)


def _at(sel: Selection) -> Any:
    return None if sel.at is None else AT


def _owner(section: str, person: str | None) -> ColumnElement[bool]:
    if section in ("behaviour", "about_this_person"):
        return R.c.subject == PERSON if person is not None else literal_column("false")
    if section == "organisation":
        return R.c.subject.is_(None)
    # commitments and past sessions: hers and the shared ones for a person; shared only for nobody
    if person is None:
        return R.c.subject.is_(None)
    return or_(R.c.subject == PERSON, R.c.subject.is_(None)) if section == "commitments" else R.c.subject == PERSON


def _const(value: str) -> Any:
    # Written into the SQL text, not bound, so the planner can match the partial indexes on these predicates.
    return literal_column("'" + value.replace("'", "''") + "'")


ACTIVE = R.c.status == _const("active")


# A commitment's due time as the open-commitment indexes hold it (migration 0006): due_at is always written with
# an offset (UTC, `Z`), so the function is immutable in practice and declared so.
COMMITMENT_DUE: ColumnElement[Any] = func.coremem_commitment_due(R.c.commitment, type_=TIMESTAMP(timezone=True))


def _section_kind(section: str) -> ColumnElement[bool]:
    if section == "commitments":
        return and_(R.c.type == _const("commitment"), R.c.commitment.op("->>")(_const("status")) == _const("open"))
    if section == "behaviour":
        return R.c.type == _const("behaviour")
    if section == "past_sessions":
        return R.c.type == _const("episode")
    return R.c.type.not_in([_const(t) for t in NOT_PERSONAL_OR_SHARED])


def _filters(sel: Selection, half_lives: Mapping[str, float]) -> list[ColumnElement[bool]]:
    where: list[ColumnElement[bool]] = []
    if sel.types:
        where.append(R.c.type == func.any(TYPES))
    if sel.metadata:
        where.append(R.c.metadata.op("@>")(METADATA))
    if sel.min_confidence and sel.min_confidence > 0:
        where.append(min_confidence_clause(half_lives, sel.min_confidence, at=_at(sel), name=CONFIDENCE))
    return where


def _relevance(ranking: Ranking) -> ColumnElement[Any]:
    """Similarity to the turn's input in [0, 1] (INJ-8): a record's cosine similarity (clamped) when the store embeds
    and the record holds a vector of the index's setting; otherwise, as on a store without vectors, the full-text
    rank of the input's words (stems, no stop words), which `ts_rank_cd(…, 32)` keeps in [0, 1) too. So a record
    written moments ago, not embedded yet, still ranks by its words, on the same scale."""
    words: Any = func.ts_rank_cd(R.c.search, tsquery(QUERY), 32) if ranking.text_query else literal(0.0)
    if ranking.vector is None:
        return cast(words, Float)
    dims = len(ranking.vector)
    cosine = similarity(cast(R.c.embedding, Vector(dims)).op("<=>", return_type=Float)(cast(VECTOR, Vector(dims))))
    comparable = and_(func.vector_dims(R.c.embedding) == dims, R.c.embedding_model == MODEL)
    return cast(case((comparable, func.greatest(cosine, 0)), else_=words), Float)


def _columns(half_lives: Mapping[str, float], sel: Selection) -> list[Any]:
    # No relevance column: it only orders (`_order`); returned, it was ranked for every row read, even unordered.
    return [R.c.id, R.c.subject, R.c.type, R.c.text, R.c.contested, R.c.commitment, R.c.episode, R.c.provenance,
            R.c.recall_count, R.c.created_at, R.c.updated_at,
            effective_expr(half_lives, at=_at(sel)).label("effective_confidence")]


def _order(section: str, half_lives: Mapping[str, float], sel: Selection, ranking: Ranking,
           relevance: ColumnElement[Any]) -> list[Any]:
    effective = effective_expr(half_lives, at=_at(sel))
    if section == "commitments":
        return [COMMITMENT_DUE.asc().nulls_last(), effective.desc(), R.c.id.asc()]
    if section == "behaviour":
        return [R.c.created_at.desc(), R.c.id.desc()]
    if section == "past_sessions":
        age_days = func.greatest(func.extract("epoch", evaluated_at(_at(sel)) - R.c.created_at), 0) / 86400.0
        recency = halved(age_days, EPISODE_HALF_LIFE_DAYS)
        has_input = ranking.vector is not None or bool(ranking.text_query)
        score = 0.7 * relevance + 0.3 * recency if has_input else recency
        return [score.desc(), R.c.id.asc()]
    ties = [R.c.recall_count.desc(), R.c.id.asc()]
    if ranking.mode == "relevance" and (ranking.vector is not None or ranking.text_query):
        return [relevance.desc(), effective.desc(), *ties]
    if ranking.mode == "blend" and (ranking.vector is not None or ranking.text_query):
        return [(0.5 * effective + 0.5 * relevance).desc(), effective.desc(), *ties]
    return [effective.desc(), *ties]


def _reachable(scope: Scope, section: str, person: str | None) -> list[ColumnElement[bool]]:
    """The scope's clause with the owner the section pins written in: its owner tests fold to constants under
    custom plans and only its label tests stay, so the planner reads the section's ranked index range instead
    of OR-ing bitmaps of the person's and the shared records."""
    owner: Any = None
    if section == "organisation":
        owner = null()
    elif section in ("behaviour", "about_this_person") and person is not None:
        owner = PERSON
    if owner is None:
        return readable(scope, bound=True)
    return _readable_as(scope, owner)


def _readable_as(scope: Scope, owner: Any) -> list[ColumnElement[bool]]:
    """`readable(scope)` for rows whose owner the caller's WHERE fixes to `owner` (a constant or the person)."""
    return [R.c.org_id == bindparam(ORG_PARAM, type_=Text), scope.index_clause(R.c.index_id),
            scope.visible("memory_record", "see", owner, R.c.labels, bound=True)]


def _section_query(scope: Scope, half_lives: Mapping[str, float], sel: Selection, section: str, ranking: Ranking,
                   position: int) -> Any:
    if section == "commitments" and sel.person is not None:
        return _commitments_of_person(scope, half_lives, sel, ranking, position)
    relevance = _relevance(ranking)
    order = _order(section, half_lives, sel, ranking, relevance)
    where = [*_reachable(scope, section, sel.person), R.c.index_id == INDEX, ACTIVE, unexpired(_at(sel)),
             _owner(section, sel.person), _section_kind(section), *_filters(sel, half_lives)]
    by_confidence = section in ("about_this_person", "organisation") and not (
        ranking.mode != "confidence" and (ranking.vector is not None or ranking.text_query))
    if by_confidence:
        where.append(R.c.confidence >= _confidence_floor(half_lives, sel, where, position))
    return (select(*_columns(half_lives, sel), literal(position).label("section_position"),
                   func.row_number().over(order_by=order).label("rank"))
            .where(*where).order_by(*order).limit(_bound("bound", position)).subquery(f"s{position}"))


def _commitments_of_person(scope: Scope, half_lives: Mapping[str, float], sel: Selection, ranking: Ranking,
                           position: int) -> Any:
    """Her open commitments and the shared ones, soonest due first: the best `bound` of each, then of both.

    Hers and the shared ones are two ranges of the open-commitment indexes, each already in due order, so
    each branch stops after `bound` rows (an incremental sort breaks ties on due). One query over
    `subject = person OR subject IS NULL` had to sort every shared open commitment of the store instead.
    """
    relevance = _relevance(ranking)
    order = _order("commitments", half_lives, sel, ranking, relevance)
    bound = _bound("bound", position)
    branches = []
    for owner, owner_is in ((PERSON, R.c.subject == PERSON), (null(), R.c.subject.is_(None))):
        where = [*_readable_as(scope, owner), R.c.index_id == INDEX, ACTIVE, unexpired(_at(sel)), owner_is,
                 _section_kind("commitments"), *_filters(sel, half_lives)]
        branch = (select(*_columns(half_lives, sel), COMMITMENT_DUE.label("due"))
                  .where(*where).order_by(*order).limit(bound).subquery())
        branches.append(select(branch))
    both = union_all(*branches).subquery("commitments")
    outer_order = [both.c.due.asc().nulls_last(), both.c.effective_confidence.desc(), both.c.id.asc()]
    return (select(*[c for c in both.c if c.key != "due"], literal(position).label("section_position"),
                   func.row_number().over(order_by=outer_order).label("rank"))
            .order_by(*outer_order).limit(bound).subquery(f"s{position}"))


def _confidence_floor(half_lives: Mapping[str, float], sel: Selection, where: list[ColumnElement[bool]],
                      position: int) -> ColumnElement[Any]:
    """A stored-confidence floor that keeps the top `bound` records by effective confidence, exactly.

    Decay never raises a confidence (effective <= stored). Take the HEAD records with the highest stored
    confidence (an index range) and let t be the `bound`-th best effective confidence among them: at least
    `bound` records reach t, and every record whose effective confidence reaches t has a stored confidence of
    at least t. So ranking only the records with stored confidence >= t gives the same top `bound` as ranking
    them all, while PostgreSQL reads an index range instead of sorting a whole store's shared records.
    """
    head = (select(effective_expr(half_lives, at=_at(sel)).label("eff")).where(*where)
            .order_by(R.c.confidence.desc()).limit(_bound("head", position)).subquery())
    floor = (select(head.c.eff).order_by(head.c.eff.desc()).offset(_bound("floor", position)).limit(1)
             .scalar_subquery())
    return select(func.coalesce(floor, 0.0)).scalar_subquery()  # own subquery: leakproof under RLS (decisions)


def _bound_params(bounds: Mapping[str, int], sections: Sequence[str]) -> dict[str, int]:
    return {f"inj_{kind}{i}": value for i, section in enumerate(sections) for kind, value in (
        ("bound", bounds[section]), ("head", max(HEAD, bounds[section])), ("floor", bounds[section] - 1))}


# Statements by shape: what their SQL depends on (the scope's shape, the half-lives, the sections asked for, which
# filters and inputs are present), never a person's id, a filter's value, the input or a bound.
_statements = PreparedByShape(kept=256)


def _shape(scope: Scope, half_lives: Mapping[str, float], sel: Selection, sections: Sequence[str],
           ranking: Ranking) -> tuple[Any, ...]:
    return ("candidates", scope.shape, tuple(sorted(half_lives.items())), tuple(sections), sel.person is None,
            bool(sel.types), bool(sel.metadata), bool(sel.min_confidence and sel.min_confidence > 0),
            sel.at is None, ranking.mode, bool(ranking.text_query),
            None if ranking.vector is None else len(ranking.vector))


def candidates_statement(scope: Scope, half_lives: Mapping[str, float], sel: Selection, sections: Sequence[str],
                         ranking: Ranking) -> Prepared:
    def build() -> Any:
        parts = [_section_query(scope, half_lives, sel, s, ranking, i) for i, s in enumerate(sections)]
        union = union_all(*[select(p) for p in parts]).subquery("candidates")
        return select(union).order_by(union.c.section_position, union.c.rank)

    return _statements.get(_shape(scope, half_lives, sel, sections, ranking), build)


def candidates_params(scope: Scope, half_lives: Mapping[str, float], sel: Selection, bounds: Mapping[str, int],
                      sections: Sequence[str], ranking: Ranking) -> dict[str, Any]:
    params: dict[str, Any] = {
        **scope_params(scope), "inj_person": sel.person, "inj_index": sel.index_id, "inj_at": sel.at,
        "inj_types": list(sel.types), "inj_metadata": dict(sel.metadata), "inj_q": ranking.text_query,
        "inj_vector": ranking.vector, "inj_model": ranking.model, **_bound_params(bounds, sections)}
    if sel.min_confidence and sel.min_confidence > 0:
        params |= min_confidence_params(half_lives, sel.min_confidence, CONFIDENCE)
    return params


async def candidates(db: AsyncSession, scope: Scope, half_lives: Mapping[str, float], sel: Selection,
                     bounds: Mapping[str, int], ranking: Ranking) -> dict[str, list[dict[str, Any]]]:
    """Per section, at most `bounds[section]` rows that pass every filter, best first: one statement, one trip.
    Planned serially in a build (`plan_mode.serial_plans_column`, set by the build's first statement)."""
    sections = [s for s, bound in bounds.items() if bound > 0]
    if not sections:
        return {}
    statement = candidates_statement(scope, half_lives, sel, sections, ranking)
    params = candidates_params(scope, half_lives, sel, bounds, sections, ranking)
    found: dict[str, list[dict[str, Any]]] = {s: [] for s in sections}
    for row in await statement.all(db, {name: params[name] for name in statement.names}):
        found[sections[row["section_position"]]].append(row)
    return found


def _filtered_query(scope: Scope, half_lives: Mapping[str, float], sel: Selection, section: str,
                    position: int) -> Any:
    checks: list[tuple[ColumnElement[bool], str]] = [
        (and_(R.c.expires_at.is_not(None), R.c.expires_at <= evaluated_at(_at(sel))), "expired"),
        (R.c.status != _const("active"), "replaced"),
    ]
    if sel.types:
        checks.append((R.c.type != func.all(TYPES), "filtered_by_type"))
    if sel.metadata:
        checks.append((not_(R.c.metadata.op("@>")(METADATA)), "filtered_by_metadata"))
    if sel.min_confidence:
        minimum = bindparam("inj_min", type_=Float)
        checks.append((effective_expr(half_lives, at=_at(sel)) < minimum, "below_min_confidence"))
    reason = case(*checks, else_=None)
    return (select(R.c.id, R.c.type, reason.label("reason"), literal(position).label("section_position"))
            .where(*readable(scope, bound=True), R.c.index_id == INDEX, _owner(section, sel.person),
                   _section_kind(section), or_(*[condition for condition, _ in checks]),
                   R.c.id != func.all(bindparam("inj_seen", type_=ARRAY(Text))))
            .limit(bindparam("inj_reasons", type_=Integer)).subquery(f"f{position}"))


async def filtered_out(db: AsyncSession, scope: Scope, half_lives: Mapping[str, float], sel: Selection,
                       sections: Sequence[str], bound: int, exclude: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
    """For the previewer: per section, up to `bound` records the person reaches that a filter kept out.

    Only the reasons that can apply are asked for (expired and replaced always; type, metadata and confidence
    when the block sets them), and no order is imposed, so PostgreSQL stops at the bound: the expired and
    replaced branches are partial-index ranges, so a store with nothing left out answers in milliseconds. One
    statement for every section, built once per shape.
    """
    if not sections:
        return {}
    shape = ("filtered", scope.shape, tuple(sorted(half_lives.items())), tuple(sections), sel.person is None,
             bool(sel.types), bool(sel.metadata), bool(sel.min_confidence), sel.at is None)
    statement = _statements.get(shape, lambda: union_all(*[select(_filtered_query(scope, half_lives, sel, s, i))
                                                            for i, s in enumerate(sections)]))
    params = {**scope_params(scope), "inj_person": sel.person, "inj_index": sel.index_id, "inj_at": sel.at,
              "inj_types": list(sel.types), "inj_metadata": dict(sel.metadata), "inj_min": sel.min_confidence,
              "inj_seen": list(exclude), "inj_reasons": bound}
    found: dict[str, list[dict[str, Any]]] = {s: [] for s in sections}
    for row in await statement.all(db, {name: params[name] for name in statement.names}):
        found[sections[row["section_position"]]].append(row)
    return found
