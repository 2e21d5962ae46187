"""Writes of thread items and notes let their foreign-key checks keep a generic plan, and a turn's injection build
after them in the same transaction plans for its values again (backend/db/plan_mode.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import psycopg

from tests.helpers import Org, bearer

MODE = "SHOW plan_cache_mode"


def _modes_around(org: Org, settings: Any, database_url: str,
                  write: Callable[[Any], Awaitable[None]]) -> tuple[str, str]:
    """`plan_cache_mode` at the end of a write's transaction, and in the next transaction on the same connection."""
    from sqlalchemy import text as sql_text

    from backend import contexts
    from backend.db.engine import make_engine, make_sessionmaker

    headers = bearer(org.key, subject="anna")

    async def run() -> tuple[str, str]:
        engine = make_engine(database_url, pool_size=1)
        try:
            async with make_sessionmaker(engine)() as db, db.begin():
                ctx = await contexts.for_credential(db, settings, authorization=headers["Authorization"],
                                                    subject_header=headers["X-Core-Subject"])
                await write(ctx)
                during = str((await db.execute(sql_text(MODE))).scalar())
            async with make_sessionmaker(engine)() as db, db.begin():
                after = str((await db.execute(sql_text(MODE))).scalar())
            return during, after
        finally:
            await engine.dispose()

    return asyncio.run(run())


def test_thr_4_items_and_notes_let_their_key_checks_keep_plans_and_the_next_transaction_does_not(
        org: Org, client: Any, settings: Any, database_url: str) -> None:
    from backend.domains.threads import service
    from shared.schemas.threads import MessageIn, ThreadCreate

    created = client.post("/threads", headers=bearer(org.key, subject="anna"),
                          json={"items": [{"type": "message", "role": "user", "content": "Eerste"}]})
    assert created.status_code == 201, created.text
    thread_id, item_id = created.json()["id"], created.json()["items"][0]["id"]

    async def opened(ctx: Any) -> None:
        await service.create_thread(ctx, ThreadCreate(items=[MessageIn(role="user", content="Hallo")]))

    async def appended(ctx: Any) -> None:
        await service.append_items(ctx, thread_id, [MessageIn(role="user", content="Nog iets")])

    async def noted(ctx: Any) -> None:
        await service.put_note(ctx, thread_id, item_id, {"topic": "greeting"})

    async def opened_empty(ctx: Any) -> None:
        await service.create_thread(ctx, ThreadCreate())

    assert _modes_around(org, settings, database_url, opened) == ("auto", "force_custom_plan")
    assert _modes_around(org, settings, database_url, appended) == ("auto", "force_custom_plan")
    assert _modes_around(org, settings, database_url, noted) == ("auto", "force_custom_plan")
    assert _modes_around(org, settings, database_url, opened_empty) == ("force_custom_plan", "force_custom_plan")


def test_thr_4_the_items_key_check_of_an_organisation_the_statistics_do_not_know_needs_its_generic_plan(
        org: Org, db: psycopg.Connection[Any]) -> None:
    """Why: with statistics that know one organisation only, an item's check against `threads` planned for a new
    one takes the index on (org_id, subject, id), estimated at no rows, and reads all of her threads; its generic
    plan takes the primary key."""
    new = "org_not_in_the_statistics"
    db.execute("INSERT INTO orgs (id, name) VALUES (%s, 'Unknown to the statistics') ON CONFLICT DO NOTHING", (new,))
    db.execute("INSERT INTO threads (org_id, id, subject, labels, metadata, last_position) "
               "SELECT %s, 'thr_stats_' || n, 'p' || (n %% 50), '{}', '{}', 0 FROM generate_series(1, 3000) n",
               (org.org_id,))
    db.execute("ANALYZE threads")
    check = "SELECT 1 FROM threads x WHERE org_id = $1 AND id = $2 FOR KEY SHARE OF x"
    with psycopg.connect(db.info.dsn, autocommit=False) as conn:
        def plan(mode: str) -> str:
            conn.execute(f"SET plan_cache_mode = {mode}")
            conn.execute(f"PREPARE key_check_{mode} (text, text) AS {check}")
            for _ in range(6):  # past the five custom plans PostgreSQL makes first
                conn.execute(f"EXECUTE key_check_{mode} ('{new}', 'thr_x')")
            return "\n".join(r[0] for r in conn.execute(f"EXPLAIN EXECUTE key_check_{mode} ('{new}', 'thr_x')"))

        custom, generic = plan("force_custom_plan"), plan("auto")
        conn.rollback()
    assert "pk_threads" not in custom, custom
    assert "pk_threads" in generic, generic
