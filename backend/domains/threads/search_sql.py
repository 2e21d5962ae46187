"""The message search statement (THR-7, THR-8): one statement per shape, compiled once, run as driver SQL.

A page reads one fixed slice of history; the statement finds the slice and the page of hits in one round trip.
The policy is a bound clause (backend/access/policy.py `bound=True`), so one statement serves every person of
the same policy and shape; the person's id and attributes travel as parameters.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ColumnElement,
    DateTime,
    Integer,
    Text,
    and_,
    bindparam,
    func,
    literal,
    literal_column,
    or_,
    select,
    true,
    tuple_,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.ext.asyncio import AsyncSession

from backend.access.scope import Scope
from backend.db.prepared import Prepared, PreparedByShape
from backend.domains.threads.repository import N_META, ORGS, T_META, I, N, T
from backend.domains.threads.search import headline_query


def _spelled(value: str) -> list[Any]:
    if value in ("true", "false"):
        return [value == "true"]
    try:  # an integer as written: through float, 9007199254740993 would be 9007199254740992
        return [int(value)]
    except ValueError:
        pass
    try:
        number = float(value)
    except ValueError:
        return []
    if number != number or number in (float("inf"), float("-inf")):
        return []
    return [int(number)] if number.is_integer() else [number]




REGCONFIG: Any = literal_column("'simple'::regconfig")
# The slice bounds of a scope that does not read every thread check this many of the newest messages one by one
# before they ask the threads it reads (`_build_search`).
WALK = 1000


def tsquery(query: Any) -> Any:
    return func.websearch_to_tsquery(REGCONFIG, query if isinstance(query, ColumnElement) else literal(query))


async def search_items(db: AsyncSession, scope: Scope, *, query: str | None, headline_options: str,
                       upper: datetime | None, upper_id: str | None, fixed_lower: datetime | None,
                       from_: datetime | None, window_days: int, thread_id: str | None,
                       thread_metadata: Sequence[tuple[str, str]], role: str | None, note_author: str | None,
                       note_pairs: Sequence[tuple[str, str]], limit: int
                       ) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """One page of hits in one fixed slice of history, in one statement (see `search_statement`).

    Returns the slice (`lower`, the organisation's `tz`, whether `older` messages exist, whether the named
    thread is `reachable`), None when the organisation does not exist, and the hits.
    """
    variants = [[{name: value}] + [{name: spelled} for spelled in _spelled(value)] for name, value in note_pairs]
    shape = SearchShape(
        scope=scope.shape, query=query is not None, upper=upper is not None, upper_id=upper_id is not None,
        fixed_lower=fixed_lower is not None, from_=from_ is not None, window_days=window_days,
        thread_id=thread_id is not None, thread_metadata=len(thread_metadata), role=role is not None,
        note_author=note_author is not None, note_variants=tuple(len(v) for v in variants))
    params: dict[str, Any] = {
        **(scope.params() if not scope.unrestricted else {}),
        "org_id": scope.org_id, "q": query, "hq": headline_query(query) if query is not None else None,
        "hl": headline_options, "upper": upper, "upper_id": upper_id,
        "fixed_lower": fixed_lower, "from_": from_, "thread_id": thread_id, "role": role,
        "note_author": note_author, "limit": limit,
        **{f"tm{i}": {name: value} for i, (name, value) in enumerate(thread_metadata)},
        **{f"np{i}_{j}": v for i, options in enumerate(variants) for j, v in enumerate(options)},
    }
    statement = search_statement(shape, scope)
    rows = await statement.all(db, {name: params.get(name) for name in statement.names})
    if not rows:  # no such organisation
        return None, []
    first = rows[0]  # the outer join always yields the slice row
    window = {"lower": first["lower"], "tz": first["tz"], "older": bool(first["older"]),
              "reachable": first.get("reachable", True)}
    return window, [r for r in rows if r["id"] is not None]


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


_statements = PreparedByShape()


def search_statement(shape: SearchShape, scope: Scope) -> Prepared:
    """Building and compiling this statement costs milliseconds of Python, and handing SQLAlchemy a statement
    still costs a few tenths of one per call, so each shape (per policy, not per person) is compiled once and
    runs as driver SQL."""
    return _statements.get(shape, lambda: _build_search(shape, scope))


def _build_search(shape: SearchShape, scope: Scope) -> Any:
    """The slice runs from the start of the day `window_days - 1` days before the newest message older than
    the cursor (in the organisation's time zone) up to the cursor, so an empty stretch of history costs one
    page, not one page per week. Its probes use the (org_id, created_at) index, never a scan.

    One statement, one round trip: a materialised `bounds` row reads the organisation's time zone once, computes
    the slice with the two index probes, and feeds the lateral page of hits; ts_headline runs on the page only."""
    org_id = bindparam("org_id", type_=Text)
    upper = bindparam("upper", type_=DateTime(timezone=True))
    from_ = bindparam("from_", type_=DateTime(timezone=True))
    thread_id = bindparam("thread_id", type_=Text)

    def seen(thread: Any = None) -> list[ColumnElement[bool]]:
        """The threads `GET /threads` shows this request (the policy as a bound clause); that one if named."""
        return [T.c.org_id == org_id, *([T.c.id == thread] if thread is not None else []),
                T.c.deleted_at.is_(None), scope.visible("thread", "see", T.c.subject, T.c.labels, bound=True)]

    def history(*extra: ColumnElement[bool]) -> list[ColumnElement[bool]]:
        conds = [I.c.org_id == org_id, I.c.text.isnot(None), *extra]
        if shape.from_:
            conds.append(I.c.created_at >= from_)
        if shape.thread_id:
            conds.append(I.c.thread_id == thread_id)
        return conds

    # The bounds read only messages of threads the request reads, or the days of others' messages would show
    # through `searched_to` and `next_cursor`. A named thread is checked once instead (`reachable`: 404 when it
    # is not), and a scope that sees every thread needs no check. Otherwise each bound first walks the newest
    # WALK messages on the (org_id, created_at) index, checking each one's thread (a scope that reads a fair
    # share of the messages stops within a few rows), and only when none of those is readable asks the threads
    # the request reads, each by its own items (the primary key's (org_id, thread_id) prefix): the first way
    # alone walked the whole organisation for a person with no readable message in reach, a plain check per
    # message let the planner hash-join every message of the organisation (about 1 s at 1M messages).
    checked = not shape.thread_id and not scope.sees_every("thread", "see")

    def walk(*extra: ColumnElement[bool], correlate: Any = None) -> Any:
        """The newest WALK messages of the organisation within the bounds' conditions."""
        walked = select(I.c.created_at, I.c.thread_id).where(*history(*extra))
        if correlate is not None:
            walked = walked.correlate(correlate)
        return walked.order_by(I.c.created_at.desc()).limit(literal_column(str(WALK))).subquery("walk")

    tz = ORGS.c.timezone
    if shape.fixed_lower:
        lower_expr: Any = bindparam("fixed_lower", type_=DateTime(timezone=True))
    else:
        below = [I.c.created_at < upper] if shape.upper else []
        newest: Any = select(func.max(I.c.created_at)).where(*history(*below)).scalar_subquery()
        if checked:
            recent = walk(*below)
            walked = (select(recent.c.created_at).where(select(T.c.id).where(*seen(recent.c.thread_id)).exists())
                      .order_by(recent.c.created_at.desc()).limit(literal_column("1")).scalar_subquery())
            last = select(func.max(I.c.created_at).label("at")).where(
                *history(*below), I.c.thread_id == T.c.id).lateral("last")
            by_thread = (select(func.max(last.c.at)).select_from(T.join(last, true()))
                         .where(*seen()).scalar_subquery())
            newest = func.coalesce(walked, by_thread)
        day = func.date_trunc(literal_column("'day'"), func.timezone(tz, newest))
        lower_expr = func.timezone(tz, day - literal_column(f"interval '{int(shape.window_days) - 1} days'"))
        if shape.from_:
            lower_expr = func.greatest(lower_expr, from_)
    # OFFSET 0 keeps `org` a subquery of its own, so `lower` is computed once rather than again inside `older`.
    org = (select(lower_expr.label("lower"), tz.label("tz"))
           .where(ORGS.c.id == org_id).offset(literal_column("0")).subquery("org"))
    before = I.c.created_at < org.c.lower
    if checked:
        earlier = walk(before, correlate=org)
        walked_older = (select(true()).where(select(T.c.id).where(*seen(earlier.c.thread_id)).exists())
                        .select_from(earlier).limit(literal_column("1")).scalar_subquery())
        first = (select(literal_column("1").label("one")).where(*history(before), I.c.thread_id == T.c.id)
                 .correlate(T, org).limit(literal_column("1")).lateral("first"))
        # No slice (nothing readable) or none before `from`: asking every readable thread would find nothing.
        reached = org.c.lower > from_ if shape.from_ else org.c.lower.isnot(None)
        by_thread_older = select(first.c.one).select_from(T.join(first, true())).where(*seen(), reached).exists()
        older_column: Any = func.coalesce(walked_older, by_thread_older).label("older")
    else:
        older = select(func.max(I.c.created_at)).where(*history(before)).scalar_subquery()
        older_column = older.isnot(None).label("older")
    slice_columns = [org.c.lower, org.c.tz, older_column]
    if shape.thread_id:
        slice_columns.append(select(T.c.id).where(*seen(thread_id)).exists().label("reachable"))
    bounds = select(*slice_columns).cte("bounds").prefix_with("MATERIALIZED")

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
        conds += [T.c.deleted_at.is_(None), scope.visible("thread", "see", T.c.subject, T.c.labels, bound=True)]
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
    outer: list[Any] = [*bounds.c,
                        *(c for c in hits.c if tsq is None or c.key != "text")]
    if tsq is not None:
        # The words to mark, each once and without exclusions (`search.headline_query`); the snippet replaces the
        # text, so the text itself does not travel back.
        wanted = tsquery(bindparam("hq", type_=Text))
        outer.append(func.ts_headline(REGCONFIG, hits.c.text, wanted, bindparam("hl", type_=Text)).label("headline"))
    return (select(*outer).select_from(bounds.outerjoin(hits, true()))
            .order_by(hits.c.created_at.desc(), hits.c.id.desc()))
