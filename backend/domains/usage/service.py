"""Usage metering (PLT-18): administrators read model tokens per day, key and model."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from backend.access.context import RequestContext
from backend.domains.usage import repository as repo
from backend.errors import ValidationFailed
from shared.schemas.turns import UsageQuery

MAX_DAYS = 366
EARLIEST, LATEST = date(2000, 1, 1), date(9999, 12, 30)  # date arithmetic near date.min/max would overflow


def _totals(rows: list[dict[str, Any]]) -> dict[str, int]:
    return {"input_tokens": sum(int(r["input_tokens"]) for r in rows),
            "output_tokens": sum(int(r["output_tokens"]) for r in rows), "calls": sum(int(r["calls"]) for r in rows)}


async def report(ctx: RequestContext, query: UsageQuery) -> dict[str, Any]:
    ctx.require_management()
    # The organisation's usage counts everybody's turns; a request naming a person would read others' (PLT-7).
    ctx.refuse_person_named("Usage is the organisation's: send the request without naming a person.")
    for name, day in (("from", query.from_), ("to", query.to)):
        if day is not None and not EARLIEST <= day <= LATEST:
            raise ValidationFailed(f"`{name}` is a day from {EARLIEST} to {LATEST}.", param=name)
    zone = str(ctx.org.get("timezone") or "UTC")
    today = datetime.now(UTC).astimezone(ZoneInfo(zone)).date()
    end = query.to or today
    start = query.from_ or end - timedelta(days=29)
    if start > end:
        raise ValidationFailed("`from` is after `to`.", param="from")
    if (end - start).days >= MAX_DAYS:
        raise ValidationFailed(f"At most {MAX_DAYS} days per request.", param="from")
    rows = await repo.per_day(ctx.db, ctx.org_id, zone, start, end, query.key_id)
    by_key: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_key.setdefault(row["key_id"] or "", []).append(row)
    return {"data": rows, "totals": _totals(rows), "by_key": {k: _totals(v) for k, v in by_key.items()}}
