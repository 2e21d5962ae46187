"""Writes let their foreign-key checks keep a generic plan (backend/db/plan_mode.py).

The application's connections plan every statement for its values. For the check PostgreSQL runs on every row a
write adds (`org_id = $1 AND id = $2` on memory_records, for each history version), a plan made for an
organisation the statistics do not know reads the organisation's records one by one: at 22,000 records of a new
organisation beside a million of another, a 1,000-record batch took 1.9 s instead of 0.1 s.
"""

from __future__ import annotations

from typing import Any

import psycopg

from tests.memory.conftest import Mem
from tests.plans import key_check_plans, modes_around


def test_mem_4_a_batch_and_a_single_write_let_their_key_checks_keep_plans_and_reads_after_them_do_not(
        mem: Mem, settings: Any, database_url: str) -> None:
    from backend.domains.memory import writes
    from shared.schemas.memory import MemoryCreate

    def body(n: int) -> MemoryCreate:
        return MemoryCreate(index_id=mem.index_id, type="fact", text=f"Anna's fact number {n}.")

    async def batch(ctx: Any) -> None:
        await writes.create_batch(ctx, [body(n) for n in range(60)])  # 50 or more go through COPY

    async def single(ctx: Any) -> None:
        await writes.create(ctx, body(100))

    assert modes_around(mem.anna(), settings, database_url, batch) == ("auto", "force_custom_plan")
    assert modes_around(mem.anna(), settings, database_url, single) == ("auto", "force_custom_plan")


def test_mem_4_the_key_check_of_an_organisation_the_statistics_do_not_know_needs_its_generic_plan(
        mem: Mem, db: psycopg.Connection[Any]) -> None:
    """Why the setting exists: with statistics that know one organisation only, the key check's statement planned
    for a new one takes an index on `org_id` (estimated at no rows) and its generic plan the primary key."""
    known, new = mem.org.org_id, "org_not_in_the_statistics"
    db.execute("INSERT INTO orgs (id, name) VALUES (%s, 'Unknown to the statistics') ON CONFLICT DO NOTHING", (new,))
    db.execute("INSERT INTO memory_records (org_id, id, index_id, subject, type, text, norm_hash, confidence, source) "
               "SELECT %s, 'mem_stats_' || n, %s, 'p' || (n %% 50), 'fact', 'text ' || n, md5(n::text), 1.0, 'api' "
               "FROM generate_series(1, 3000) n", (known, mem.index_id))
    db.execute("ANALYZE memory_records")
    custom, generic = key_check_plans(db.info.dsn, "memory_records", new, "mem_x")
    assert "pk_memory_records" not in custom, custom
    assert "pk_memory_records" in generic, generic
