"""SQL expressions over memory records: effective confidence (MEM-9), what a scope reads (ARCHITECTURE rule 2),
and the filters of `GET /memory`, shared by the memory, injection and export repositories.

Every value that changes from one request to the next is a named parameter (`bound=True` for the scope, the
`Filter` entries for the query), so the hot statements are built and compiled once per shape (house rule 12)
and only their values travel per request.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import (
    ColumnElement,
    DateTime,
    Float,
    Interval,
    Text,
    and_,
    bindparam,
    case,
    cast,
    exists,
    func,
    literal,
    literal_column,
    or_,
    true,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, TSQUERY
from sqlalchemy.sql.expression import UnaryExpression
from sqlalchemy.sql.operators import custom_op

from backend.access.policy_sql import SUBJECT_PARAM
from backend.access.scope import Scope
from backend.db.models import table_of
from backend.db.models_memory import MemoryRecord, MemoryVersion
from shared.schemas.memory import MemoryQuery

R = table_of(MemoryRecord)
V = table_of(MemoryVersion)
PARTNER = R.alias("partner")  # built once: a new alias copies every column, which cost most of a request
ORG_PARAM = "scope_org"


# An instant a read is evaluated at: the transaction's time (None), a given instant, or a clause holding one (a named
# parameter of a statement built once per shape).
At = datetime | ColumnElement[Any] | None


def evaluated_at(at: At) -> Any:
    """The moment a read is evaluated at: the transaction's time, or a given instant (the injection preview's `at`)."""
    if at is None:
        return func.now()
    if isinstance(at, ColumnElement):
        return at
    return bindparam(None, at, type_=DateTime(timezone=True))


# Halvings past this many are 0.5^1000 ≈ 1e-301, nothing to any reader; PostgreSQL's power() raises "underflow"
# from about 1075 on (a short half-life and an old record, or a preview's `at` far ahead), so the count stops here.
MAX_HALVINGS = 1000.0
# The longest age a confidence floor's range reaches back (about 2,700 years): any record is younger, and an instant
# as early as year 1 minus this stays inside PostgreSQL's timestamps, where a half-life of 1e9 days would not.
MAX_FLOOR_AGE = timedelta(days=1_000_000)


def similarity(distance: ColumnElement[Any]) -> ColumnElement[Any]:
    """Cosine similarity from pgvector's cosine distance, -1 (below every floor, last in every order) where it is
    NaN: the distance to a vector of zeros (a `hashing` vector of a text without a word) is NaN, which PostgreSQL
    ranks above every number, so such a record was a hit for every question and first in every relevance order."""
    return func.coalesce(func.nullif(1 - distance, literal_column("'NaN'::float8", Float)), -1.0)


def halved(age_days: ColumnElement[Any], half_life_days: float) -> ColumnElement[Any]:
    """0.5 ^ (age_days / half-life), the exponent capped at MAX_HALVINGS. The divisor is at least age / MAX_HALVINGS,
    so a half-life as small as 1e-308 days caps the exponent instead of overflowing the division (a float8 error);
    age / MAX_HALVINGS cannot overflow, and below that divisor the exponent would be capped anyway."""
    return func.power(0.5, func.least(age_days / func.greatest(half_life_days, age_days / MAX_HALVINGS),
                                      MAX_HALVINGS))


def effective_expr(half_lives: Mapping[str, float], table: Any = R, *, at: At = None) -> ColumnElement[Any]:
    """effective = confidence * 0.5 ^ (age_days / H) for types with a half-life; the stored value otherwise."""
    if not half_lives:
        return cast(table.c.confidence, Float)
    age_days = func.greatest(func.extract("epoch", evaluated_at(at) - table.c.updated_at), 0) / 86400.0
    whens = [(table.c.type == t, table.c.confidence * halved(age_days, h)) for t, h in sorted(half_lives.items())]
    return cast(case(*whens, else_=table.c.confidence), Float)


def _value(name: str | None, value: Any, type_: Any) -> Any:
    """A value in a clause: a named parameter (its value travels per request) or an anonymous one."""
    return bindparam(name, value, type_=type_) if name else literal(value, type_)


def min_confidence_clause(half_lives: Mapping[str, float], minimum: float, *, at: At = None,
                          name: str | None = None) -> ColumnElement[bool]:
    """effective >= minimum, written so that every branch is an index range (MEM-9, docs/decisions.md).

    A decaying type t with half-life H: stored confidence is at most 1, so effective >= m needs
    age <= H * log2(1/m), a range on (org_id, index_id, type, updated_at); the exact comparison then runs
    only on the rows inside it. Every other type keeps its stored value: the types that do not decay are the
    gaps between the decaying names, each a range on the same index's `type` column. So PostgreSQL can answer
    a selective filter with a BitmapOr of index ranges, and a large result by walking the primary key.
    `name` makes the minimum and the ages named parameters (`min_confidence_params` gives their values).
    """
    if minimum <= 0:
        return true()
    floor = _value(f"{name}_min" if name else None, minimum, Float)
    branches: list[ColumnElement[bool]] = []
    names = sorted(half_lives)
    for i, type_name in enumerate(names):
        h = half_lives[type_name]
        max_age = _value(f"{name}_age{i}" if name else None, floor_age(h, minimum), Interval)
        branches.append(and_(R.c.type == type_name, R.c.updated_at >= evaluated_at(at) - max_age,
                             effective_expr({type_name: h}, at=at) >= floor))
    lower: str | None = None
    for upper in [*names, None]:
        gap = [R.c.confidence >= floor]
        if lower is not None:
            gap.append(R.c.type > lower)
        if upper is not None:
            gap.append(R.c.type < upper)
        branches.append(and_(*gap))
        lower = upper
    return or_(*branches)


def min_confidence_params(half_lives: Mapping[str, float], minimum: float, name: str) -> dict[str, Any]:
    if minimum <= 0:
        return {}
    params: dict[str, Any] = {f"{name}_min": minimum}
    for i, type_name in enumerate(sorted(half_lives)):
        params[f"{name}_age{i}"] = floor_age(half_lives[type_name], minimum)
    return params


def floor_age(half_life_days: float, minimum: float) -> timedelta:
    """The age past which a confidence of at most 1 has decayed below `minimum`: H * log2(1/m), at most
    MAX_FLOOR_AGE (timedelta itself ends at 999,999,999 days)."""
    return timedelta(days=min(half_life_days * math.log2(1.0 / minimum), MAX_FLOOR_AGE.days))


# ---------------------------------------------------------------- what a scope reads

def _visible(scope: Scope, table: Any, bound: bool) -> ColumnElement[bool]:
    org = bindparam(ORG_PARAM, type_=Text) if bound else scope.org_id
    return and_(table.c.org_id == org, scope.index_clause(table.c.index_id),
                scope.visible("memory_record", "see", table.c.subject, table.c.labels, bound=bound),
                _owner_only_kept(scope, table, bound))


def _owner_only_kept(scope: Scope, table: Any, bound: bool) -> ColumnElement[bool]:
    """EXT-14: what maintenance wrote about a person (her lessons) is hers alone, whatever a colleague's policy
    grants; administrators still see it. A request naming nobody compares with NULL, so it sees none of it."""
    if scope.unrestricted:
        return true()
    subject = bindparam(SUBJECT_PARAM, type_=Text) if bound else literal(scope.subject_id, Text)
    return or_(table.c.source != literal_column("'maintenance'"), table.c.subject == subject)


def scope_params(scope: Scope) -> dict[str, Any]:
    """The values of `readable(scope, bound=True)` and `record_columns(…, bound=True)`."""
    return {ORG_PARAM: scope.org_id, **(scope.params() if not scope.unrestricted else {})}


def _partner(scope: Scope, column: Any, bound: bool) -> ColumnElement[Any]:
    """The partner's id only when the reader may see the partner (MEM-16, MEM-17)."""
    seen = exists().where(PARTNER.c.id == column, _visible(scope, PARTNER, bound)).correlate(R)
    # Most records have no partner: asking NULL first spares one subquery per row and partner column, which a
    # planner misled by stale statistics (a new organisation) ran as a scan of the organisation's records.
    return case((column.is_(None), None), (seen, column), else_=None)


HIDDEN = frozenset({"embedding", "embedding_model", "search", "norm_hash", "contested_with", "replaces", "replaced_by"})
PLAIN_COLUMNS = tuple(c for c in R.c if c.name not in HIDDEN)


def record_columns(scope: Scope, half_lives: Mapping[str, float], *, bound: bool = False) -> list[Any]:
    return [
        *PLAIN_COLUMNS,
        effective_expr(half_lives).label("effective_confidence"),
        _partner(scope, R.c.contested_with, bound).label("contested_with"),
        _partner(scope, R.c.replaces, bound).label("replaces"),
        _partner(scope, R.c.replaced_by, bound).label("replaced_by"),
    ]


def readable(scope: Scope, *, bound: bool = False) -> list[ColumnElement[bool]]:
    return [_visible(scope, R, bound)]


def unexpired(at: At = None) -> ColumnElement[bool]:
    return or_(R.c.expires_at.is_(None), R.c.expires_at > evaluated_at(at))


def active_now() -> list[ColumnElement[bool]]:
    return [R.c.status == "active", unexpired()]


# ---------------------------------------------------------------- the filters of GET /memory

def label_has(column: Any, name: str, value: str, param: str | None = None) -> ColumnElement[bool]:
    """A label holds a string or a list of strings; containment covers both."""
    as_string = _value(f"{param}_s" if param else None, {name: value}, JSONB)
    as_list = _value(f"{param}_l" if param else None, {name: [value]}, JSONB)
    return or_(column.op("@>")(as_string), column.op("@>")(as_list))


def _spelled(value: str) -> Any:
    """The number or boolean a filter value spells (`n:5` also matches the number 5), else None."""
    try:
        parsed = json.loads(value)
    except ValueError:
        return None
    if isinstance(parsed, float) and not math.isfinite(parsed):
        return None  # `1e999`: no JSON number equals it
    return None if parsed is None or isinstance(parsed, str) else parsed


# The two text search configurations of migration 0010: English and Dutch stems, neither language's stop words.
LANGUAGES = ("coremem_en", "coremem_nl")


def _config(name: str) -> Any:
    return literal_column(f"'{name}'::regconfig")


def _either(function: Any, value: Any) -> Any:
    """`function(config, value)` in both languages, or-ed: a record's vector holds both stemmings."""
    en, nl = (function(_config(name), value, type_=TSQUERY) for name in LANGUAGES)
    return en.op("||", return_type=TSQUERY)(nl)


def tsquery(q: Any) -> Any:
    """Web-search syntax (every word, "phrases", or, -exclusion) over stems without stop words."""
    return _either(func.websearch_to_tsquery, q)


def word_query(word: Any) -> Any:
    """One plain word (or hyphenated word) as a query: its English or its Dutch stem; empty for a stop word."""
    return _either(func.plainto_tsquery, word)


def phrase_query(phrase: Any) -> Any:
    return _either(func.phraseto_tsquery, phrase)


def all_of(queries: list[Any]) -> Any:
    return _joined("&&", queries)


def any_of(queries: list[Any]) -> Any:
    return _joined("||", queries)


def _joined(operator: str, queries: list[Any]) -> Any:
    out = queries[0]
    for query in queries[1:]:
        out = out.op(operator, return_type=TSQUERY)(query)
    return out


def none_of(query: Any) -> Any:
    """`!! query`: rows without it."""
    return UnaryExpression(query, operator=custom_op("!!"), type_=TSQUERY)


def _pairs(values: list[str]) -> list[tuple[str, str]]:
    """`name:value` filters, already checked by the service (reads.check_filters)."""
    return [(name, value) for name, _, value in (v.partition(":") for v in values)]


@dataclass(frozen=True, slots=True)
class Filter:
    """One filter: what its SQL depends on (`token`), the clause (its values as named parameters) and the values."""

    token: Any
    clause: Callable[[], ColumnElement[bool]]
    params: dict[str, Any]


def filters(f: MemoryQuery, half_lives: Mapping[str, float]) -> list[Filter]:
    """The filters of `f`, each written once: for statements built per request (`filter_clauses`) and for those
    built once per shape (the tokens are the shape, the params the values)."""
    out: list[Filter] = []

    def add(token: Any, clause: Callable[[], ColumnElement[bool]], **params: Any) -> None:
        out.append(Filter(token, clause, params))

    if f.index_id is not None:
        add("index", lambda: R.c.index_id == bindparam("f_index", f.index_id, type_=Text), f_index=f.index_id)
    if f.type:
        add("type", lambda: R.c.type == func.any(bindparam("f_types", list(f.type), type_=ARRAY(Text))),
            f_types=list(f.type))
    if f.subject is not None:
        add("subject", lambda: R.c.subject == bindparam("f_subject", f.subject, type_=Text), f_subject=f.subject)
    if f.shared:
        add("shared", lambda: R.c.subject.is_(None))
    for i, (name, value) in enumerate(_pairs(f.metadata)):
        spelled = _spelled(value)
        params = {f"f_meta{i}_s": {name: value}, **({f"f_meta{i}_n": {name: spelled}} if spelled is not None else {})}

        def metadata_clause(params: dict[str, Any] = params) -> ColumnElement[bool]:
            return or_(*[R.c.metadata.op("@>")(bindparam(key, doc, type_=JSONB)) for key, doc in params.items()])

        add(("metadata", len(params)), metadata_clause, **params)
    for i, (name, value) in enumerate(_pairs(f.label)):
        def label_clause(name: str = name, value: str = value, param: str = f"f_label{i}") -> ColumnElement[bool]:
            return label_has(R.c.labels, name, value, param)

        add("label", label_clause, **{f"f_label{i}_s": {name: value}, f"f_label{i}_l": {name: [value]}})
    tags = [t.strip().lower() for t in f.tag if t.strip()]
    if tags:
        add("tags", lambda: R.c.tags.op("@>")(bindparam("f_tags", tags, type_=ARRAY(Text))), f_tags=tags)
    if f.min_confidence is not None and f.min_confidence > 0:
        minimum = f.min_confidence
        add("min", lambda: min_confidence_clause(half_lives, minimum, name="f_conf"),
            **min_confidence_params(half_lives, minimum, "f_conf"))
    if f.after is not None:
        add("after", lambda: R.c.created_at >= bindparam("f_after", f.after, type_=DateTime(timezone=True)),
            f_after=f.after)
    if f.before is not None:
        add("before", lambda: R.c.created_at < bindparam("f_before", f.before, type_=DateTime(timezone=True)),
            f_before=f.before)
    if not f.include_expired:
        add("unexpired", unexpired)
    if not f.include_replaced:
        add("active", lambda: R.c.status == "active")
    if f.q:
        add("q", lambda: R.c.search.op("@@")(tsquery(bindparam("f_q", f.q, type_=Text))), f_q=f.q)
    return out


def filter_clauses(f: MemoryQuery, half_lives: Mapping[str, float]) -> list[ColumnElement[bool]]:
    return [entry.clause() for entry in filters(f, half_lives)]
