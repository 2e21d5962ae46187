"""Writes of thread items and notes let their foreign-key checks keep a generic plan, and a turn's injection build
after them in the same transaction plans for its values again (backend/db/plan_mode.py)."""

from __future__ import annotations

from typing import Any

import psycopg

from tests.helpers import Org, bearer
from tests.plans import key_check_plans, modes_around


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

    anna = bearer(org.key, subject="anna")
    for write in (opened, appended, noted):
        assert modes_around(anna, settings, database_url, write) == ("auto", "force_custom_plan"), write.__name__
    assert modes_around(anna, settings, database_url, opened_empty) == ("force_custom_plan", "force_custom_plan")


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
    custom, generic = key_check_plans(db.info.dsn, "threads", new, "thr_x")
    assert "pk_threads" not in custom, custom
    assert "pk_threads" in generic, generic
