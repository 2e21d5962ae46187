"""Helpers for the tests of which plans a write's statements get (backend/db/plan_mode.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import psycopg


def modes_around(headers: dict[str, str], settings: Any, database_url: str,
                 write: Callable[[Any], Awaitable[None]]) -> tuple[str, str]:
    """`plan_cache_mode` at the end of a write's transaction (run with the request context of `headers`), and in
    the next transaction on the same connection."""
    from sqlalchemy import text as sql_text

    from backend import contexts
    from backend.db.engine import make_engine, make_sessionmaker

    async def run() -> tuple[str, str]:
        engine = make_engine(database_url, pool_size=1)
        try:
            async with make_sessionmaker(engine)() as db, db.begin():
                ctx = await contexts.for_credential(db, settings, authorization=headers["Authorization"],
                                                    subject_header=headers["X-Core-Subject"])
                await write(ctx)
                during = str((await db.execute(sql_text("SHOW plan_cache_mode"))).scalar())
            async with make_sessionmaker(engine)() as db, db.begin():
                after = str((await db.execute(sql_text("SHOW plan_cache_mode"))).scalar())
            return during, after
        finally:
            await engine.dispose()

    return asyncio.run(run())


def key_check_plans(dsn: str, table: str, org_id: str, row_id: str) -> tuple[str, str]:
    """The plans of PostgreSQL's foreign-key check against `table` for (org_id, row_id): made for its values, and
    the generic one kept once the statement has run past the five custom plans PostgreSQL makes first."""
    check = f"SELECT 1 FROM {table} x WHERE org_id = $1 AND id = $2 FOR KEY SHARE OF x"
    with psycopg.connect(dsn, autocommit=False) as conn:
        def plan(mode: str) -> str:
            conn.execute(f"SET plan_cache_mode = {mode}")
            conn.execute(f"PREPARE key_check_{mode} (text, text) AS {check}")
            for _ in range(6):
                conn.execute(f"EXECUTE key_check_{mode} ('{org_id}', '{row_id}')")
            return "\n".join(r[0] for r in conn.execute(f"EXPLAIN EXECUTE key_check_{mode} ('{org_id}', '{row_id}')"))

        plans = plan("force_custom_plan"), plan("auto")
        conn.rollback()
    return plans
