"""`EXPLAIN (ANALYZE, BUFFERS)` of the statements a benchmark's measured operation spends its time in (issue 16),
for the "## Plans" section of its report. Taken once after the timings, never inside them.

`explaining(wanted)` watches the statements the product sends through psycopg's async cursors (SQLAlchemy's and
the raw ones of backend/db/prepared.py alike) while the caller runs the operation as the benchmark measured it.
The first statement each `Wanted` matches is run first as `EXPLAIN (ANALYZE, BUFFERS) <statement>`, with the same
parameters, on the same connection and kind of cursor, inside a savepoint that is rolled back at once; then the
statement itself runs. So the plan is the one the product's own statement gets at that point of the operation:
under the same role and row-level security setting, seeing what the operation did before it (a staging table, a
record just written), and whatever EXPLAIN ANALYZE wrote is undone. `rolled_back` runs an operation so, in
transactions rolled back.

A plan that cannot be taken is a line saying why, never an error of the benchmark. Long array literals in a plan
(a batch's thousand ids) are cut to their first three elements.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

TITLE = "## Plans (`EXPLAIN (ANALYZE, BUFFERS)`, run once after the timings)"
EXPLAIN = "EXPLAIN (ANALYZE, BUFFERS) "

# A statement's plan (its lines), or why there is none.
Plan = list[str] | str
_ARRAY = re.compile(r"'\{([^{}']{200,})\}'")


@dataclass(frozen=True)
class Wanted:
    """A statement to explain: the report's label and a test that recognises its SQL text."""

    label: str
    match: Callable[[str], bool]


def starting(prefix: str) -> Callable[[str], bool]:
    """Recognises SQL that begins with `prefix` (whitespace and case aside)."""
    wanted = " ".join(prefix.split()).upper()
    return lambda sql: " ".join(sql.split()).upper().startswith(wanted)


def exactly(sql: str) -> Callable[[str], bool]:
    """Recognises one statement compiled once (a `Prepared`'s `.sql`, a module's constant)."""
    return lambda seen: seen == sql


@contextmanager
def explaining(wanted: Sequence[Wanted]) -> Iterator[dict[str, Plan]]:
    """While open, the first statement each of `wanted` matches is explained where it runs (see the module's
    text). Yields the plans by label, complete (in `wanted`'s order) once the block is left. Not for use by two
    operations at once."""
    from psycopg import AsyncCursor

    found: dict[str, Plan] = {}
    original = AsyncCursor.execute

    async def execute(self: Any, query: Any, params: Any = None, **kwargs: Any) -> Any:
        sql = query.decode() if isinstance(query, bytes) else query
        if isinstance(sql, str):
            for want in wanted:
                if want.label not in found and want.match(sql):
                    found[want.label] = await _in_savepoint(original, self, sql, params)
                    break
        return await original(self, query, params, **kwargs)

    AsyncCursor.execute = execute  # type: ignore[method-assign]
    try:
        yield found
    finally:
        AsyncCursor.execute = original  # type: ignore[method-assign]
        ordered = {want.label: found.get(want.label, "no plan: the operation did not run this statement")
                   for want in wanted}
        found.clear()
        found.update(ordered)


async def rolled_back(sessions: Any, wanted: Sequence[Wanted], operation: Callable[[Any], Awaitable[Any]]
                      ) -> dict[str, Plan]:
    """The plans of `wanted` in `operation(session)`. The operation runs twice, each time in a transaction of a
    new session of `sessions` that is rolled back: first to warm the connection (its caches, as in the timed runs,
    whose connections are reused), then explaining. Give `sessions` an engine of one connection. An operation that
    fails leaves the plans taken before and a line saying why for the rest."""
    plans: dict[str, Plan] = {}
    try:
        async with sessions() as db, db.begin() as transaction:
            await operation(db)
            await transaction.rollback()
        async with sessions() as db, db.begin() as transaction:
            with explaining(wanted) as plans:
                await operation(db)
            await transaction.rollback()
    except Exception as exc:
        why = f"no plan: the operation failed: {_why(exc)}"
        return {want.label: plans.get(want.label) if isinstance(plans.get(want.label), list) else why
                for want in wanted}
    return plans


async def _in_savepoint(execute: Any, cursor: Any, sql: str, params: Any) -> Plan:
    from psycopg import pq
    from psycopg.rows import tuple_row

    conn = cursor.connection
    if conn.autocommit and conn.info.transaction_status != pq.TransactionStatus.INTRANS:
        return "no plan: the statement ran outside a transaction, where EXPLAIN ANALYZE's writes would stay"
    probe = type(cursor)(conn, row_factory=tuple_row)  # the same kind: raw cursors take `$n` placeholders
    try:
        await execute(probe, "SAVEPOINT bench_plan")
        try:
            await execute(probe, EXPLAIN + sql, params)
            return _lines(await probe.fetchall())
        finally:
            await execute(probe, "ROLLBACK TO SAVEPOINT bench_plan")
            await execute(probe, "RELEASE SAVEPOINT bench_plan")
    except Exception as exc:  # the statement itself still runs; its failure is the operation's to report
        return f"no plan: {_why(exc)}"
    finally:
        await probe.close()


async def explain_text(sessions: Any, sql: str, params: Mapping[str, Any]) -> Plan:
    """The plan of a hand-written statement with SQLAlchemy `:name` binds, as `sessions` run it: once to warm the
    connection, then under EXPLAIN, each time in a transaction of its own that is rolled back (a write's too)."""
    from sqlalchemy import text

    try:
        for statement in (sql, EXPLAIN + sql):
            async with sessions() as db, db.begin() as transaction:
                rows = (await db.execute(text(statement), params)).all()
                await transaction.rollback()
        return _lines(rows)
    except Exception as exc:
        return f"no plan: {_why(exc)}"


def explain_sync(cursor: Any, sql: str, params: Any = None) -> Plan:
    """The plan of one statement on a blocking psycopg cursor."""
    try:
        cursor.execute(EXPLAIN + sql, params)
        return _lines(cursor.fetchall())
    except Exception as exc:
        return f"no plan: {_why(exc)}"


def _lines(rows: Sequence[Any]) -> list[str]:
    """EXPLAIN's rows as lines, each long array literal cut to its first three elements."""
    def cut(found: re.Match[str]) -> str:
        items = found.group(1).split(",")
        return "'{" + ",".join(items[:3]) + f",… {len(items) - 3} more}}'"

    return [_ARRAY.sub(cut, str(row[0])) for row in rows]


def section(plans: Mapping[str, Plan], intro: str = "") -> list[str]:
    """The report's plans section: per statement its label, then its plan in a fenced block (or why none)."""
    lines = [TITLE, ""]
    if intro:
        lines += [intro, ""]
    for label, plan in plans.items():
        if isinstance(plan, str):
            lines += [f"{label}: {plan.rstrip('.')}.", ""]
        else:
            lines += [f"{label}:", "", "```", *plan, "```", ""]
    return lines


def failed(exc: BaseException) -> dict[str, Plan]:
    """The plans section of a run whose plans could not be taken at all (the timings stand)."""
    return {"Plans": f"not taken: {_why(exc)}"}


def _why(exc: BaseException) -> str:
    """An error in one line: its kind and the first line of its message."""
    message = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {message[0]}" if message else type(exc).__name__
