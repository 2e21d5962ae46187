"""Many new records in one round trip: COPY into a temporary staging table, then one INSERT … SELECT.

COPY cannot write a table under row-level security (PostgreSQL refuses COPY FROM there), so the rows go to a
temporary table of the connection first (no policies: it holds only this transaction's rows and is emptied at
once); the INSERT into memory_records then passes the policies' WITH CHECK like any other write. Against
SQLAlchemy's executemany (one INSERT per row, pipelined) this saves the per-row statement work of a batch."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from psycopg.types.json import Jsonb
from sqlalchemy.ext.asyncio import AsyncSession

from backend.db.prepared import driver_connection

COLUMNS = ("org_id", "id", "index_id", "subject", "type", "text", "norm_hash", "metadata", "labels", "confidence",
           "source", "verified", "key", "tags", "priority", "expires_at", "commitment", "provenance", "episode")
JSON_COLUMNS = frozenset({"metadata", "labels", "commitment", "provenance", "episode"})
SMALLEST = 50  # fewer rows go through executemany: the staging round trips would cost more than they save
_LIST = ", ".join(COLUMNS)
_STAGING = "memory_records_staging"
_CREATE = (f"CREATE TEMPORARY TABLE IF NOT EXISTS {_STAGING} ON COMMIT DELETE ROWS AS "
           f"SELECT {_LIST} FROM memory_records WITH NO DATA")
_MOVE = f"INSERT INTO memory_records ({_LIST}) SELECT {_LIST} FROM {_STAGING}"


def suits(rows: Sequence[dict[str, Any]]) -> bool:
    """Enough rows, and none with a vector (those keep the SQLAlchemy path and its pgvector binding)."""
    return len(rows) >= SMALLEST and all(row.get("embedding") is None for row in rows)


def _cell(column: str, value: Any) -> Any:
    return Jsonb(value) if column in JSON_COLUMNS and value is not None else value


async def insert(db: AsyncSession, rows: Sequence[dict[str, Any]]) -> None:
    """Insert `rows` (the columns above; the rest take their defaults) in the session's transaction."""
    driver = await driver_connection(db)
    async with driver.cursor() as cursor:
        await cursor.execute(_CREATE)
        async with cursor.copy(f"COPY {_STAGING} ({_LIST}) FROM STDIN") as copy:
            for row in rows:
                await copy.write_row([_cell(c, row.get(c)) for c in COLUMNS])
        await cursor.execute(_MOVE)
        # Emptied now, not only at commit: another batch in the same transaction must not move these again.
        await cursor.execute(f"DELETE FROM {_STAGING}")
