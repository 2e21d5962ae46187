"""SQL of usage metering (PLT-18): one row per model call, summed by day, key and model."""

from __future__ import annotations

from datetime import date, datetime, time, timedelta
from typing import Any

from sqlalchemy import ARRAY, Date, Integer, Text, bindparam, cast, func, insert, select, text
from sqlalchemy.ext.asyncio import AsyncSession

from backend.db.models import table_of
from backend.db.models_turns import UsageEvent
from backend.db.prepared import Prepared

T = table_of(UsageEvent)


async def record(db: AsyncSession, *, org_id: str, model: str, input_tokens: int, output_tokens: int,
                 key_id: str | None = None, response_id: str | None = None, job: str | None = None) -> None:
    await db.execute(insert(T).values(org_id=org_id, key_id=key_id, response_id=response_id, job=job, model=model,
                                      input_tokens=input_tokens, output_tokens=output_tokens))


_COLUMNS = ("org_id", "key_id", "response_id", "job", "model", "input_tokens", "output_tokens")
_INSERT_MANY = Prepared(text(
    f"INSERT INTO usage_events ({', '.join(_COLUMNS)}) SELECT * FROM unnest(CAST(:org_id AS text[]), "
    "CAST(:key_id AS text[]), CAST(:response_id AS text[]), CAST(:job AS text[]), CAST(:model AS text[]), "
    "CAST(:input_tokens AS integer[]), CAST(:output_tokens AS integer[]))"))


async def record_many(db: AsyncSession, rows: list[dict[str, Any]]) -> None:
    """Several calls' rows (org_id, model, input_tokens, output_tokens, key_id, response_id, job) in one
    statement: one array per column."""
    if rows:
        await _INSERT_MANY.all(db, {name: [row[name] for row in rows] for name in _COLUMNS})


_INTEGERS = {"input_tokens", "output_tokens"}


def record_many_cte() -> Any:
    """`record_many` as a CTE of another statement (a turn's closing update carries its usage rows, a round trip
    fewer), taking `carried_params(rows)`."""
    arrays = [bindparam(f"usage_{name}", type_=ARRAY(Integer if name in _INTEGERS else Text)) for name in _COLUMNS]
    rows = func.unnest(*arrays).table_valued(*_COLUMNS).render_derived(name="usage_rows")
    return insert(T).from_select(list(_COLUMNS), select(*[rows.c[name] for name in _COLUMNS])).cte("usage_rows_in")


def carried_params(rows: list[dict[str, Any]]) -> dict[str, list[Any]]:
    return {f"usage_{name}": [row[name] for row in rows] for name in _COLUMNS}


async def per_day(db: AsyncSession, org_id: str, zone: str, start: date, end: date,
                  key_id: str | None) -> list[dict[str, Any]]:
    """Totals per day (in the organisation's zone), key and model over [start, end]."""
    day = cast(func.timezone(zone, T.c.created_at), Date).label("day")
    lower = func.timezone(zone, datetime.combine(start, time.min))
    upper = func.timezone(zone, datetime.combine(end + timedelta(days=1), time.min))
    statement = (select(day, T.c.key_id, T.c.model, func.sum(T.c.input_tokens).label("input_tokens"),
                        func.sum(T.c.output_tokens).label("output_tokens"), func.count().label("calls"))
                 .where(T.c.org_id == org_id, T.c.created_at >= lower, T.c.created_at < upper)
                 .group_by(day, T.c.key_id, T.c.model).order_by(day, T.c.key_id, T.c.model))
    if key_id is not None:
        statement = statement.where(T.c.key_id == key_id)
    return [dict(r) for r in (await db.execute(statement)).mappings()]
