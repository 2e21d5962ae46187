"""Which plans a transaction's statements get.

The application's connections plan every statement for its values (`plan_cache_mode = force_custom_plan`,
backend/db/engine.py): reads need it, since a generic plan cannot fold the scope's tests against the person
asking. A write is the exception. Each row it writes into a table with a foreign key runs PostgreSQL's check of
that key (`org_id = $1 AND id = $2` on the referenced table), and planned for its values that check trusts the
table's statistics about the organisation. An organisation they do not know yet (created, or grown, since the
last ANALYZE of a large table) is estimated at no rows, so any index that starts with `org_id` looks free and
the check reads every record of the organisation behind it instead of one primary-key entry: at 22,000 records
of a new organisation beside a million of another, 1.9 ms per check and 1.9 s for the history versions of a
1,000-record batch (docs/performance.md, section 5). The check's generic plan takes the primary key, and a plan kept for
it is not made again for every row.

Thread items have the same check against `threads`: custom-planned for an organisation the statistics do not know,
each item's check took the index on (org_id, subject, id) and read the organisation's threads (1.2 against 0.45
ms per item at 20,000 threads beside 300,000 of another organisation, and growing with them). Their inserts keep
plans too, so a turn's accepting transaction sets it before its items and its injection build, which reads by
the scope, plans for its values again (`custom_plans_column`).

The injection builder's candidates statement is planned serially (`serial_plans_column`).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import func
from sqlalchemy.ext.asyncio import AsyncSession

from backend.db.prepared import driver_connection


async def let_key_checks_keep_plans(db: AsyncSession) -> None:
    """Until this transaction ends, statements (the foreign-key checks among them) may keep a generic plan
    (`plan_cache_mode = auto`). For transactions that write records; the connection's setting is back at the next
    transaction."""
    driver = await driver_connection(db)
    await driver.execute("SET LOCAL plan_cache_mode = auto")


def keep_plans_column() -> Any:
    """`let_key_checks_keep_plans` as a column of a statement the write transaction runs first, a round trip
    fewer: from that transaction's next statement on."""
    return func.set_config("plan_cache_mode", "auto", True)


def serial_plans_column() -> Any:
    """A column that has the rest of its transaction planned without parallel workers, for the statement that
    reads the store first in an injection build (stores.repository.index_and_sections), a round trip fewer than a
    SET of its own. The build's candidates statement needs it: the planner cannot see how few rows pass a floor
    computed in the same statement and starts parallel workers that cost more than the ranges they read (about
    60 against 35 ms per block at 1M records)."""
    return func.set_config("max_parallel_workers_per_gather", "0", True)


def custom_plans_column() -> Any:
    """A column that has the rest of its transaction planned for its values again (the connection's setting,
    backend/db/engine.py), after a write in the same transaction let plans be kept: for the statement that reads
    the store first in an injection build, whose candidates statement needs plans made for the person asking."""
    return func.set_config("plan_cache_mode", "force_custom_plan", True)
