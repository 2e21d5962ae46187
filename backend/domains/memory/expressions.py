"""SQL expressions over memory records: effective confidence (MEM-9), what a scope reads (ARCHITECTURE rule 2),
and the filters of `GET /memory`, shared by the memory, injection and export repositories."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import (
    ColumnElement,
    DateTime,
    Float,
    and_,
    bindparam,
    case,
    cast,
    exists,
    func,
    literal,
    or_,
    text,
    true,
)
from sqlalchemy.dialects.postgresql import JSONB

from backend.access.scope import Scope
from backend.db.models import table_of
from backend.db.models_memory import MemoryRecord, MemoryVersion
from shared.schemas.memory import MemoryQuery

R = table_of(MemoryRecord)
V = table_of(MemoryVersion)


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


def label_has(column: Any, name: str, value: str) -> ColumnElement[bool]:
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
    where += [label_has(R.c.labels, k, v) for k, v in _pairs(f.label)]
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
