"""GET /memory/stats and the `shared` filter (MEM-6, PLT-8): counts of exactly what GET /memory lists."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
from sqlalchemy import text as sql_text

from tests.helpers import assert_error, bearer
from tests.memory.conftest import Mem, make_index, writer_key


def stats(mem: Mem, headers: dict[str, str], **params: Any) -> dict[str, Any]:
    response = mem.client.get("/memory/stats", params={"index_id": mem.index_id, **params}, headers=headers)
    assert response.status_code == 200, response.text
    return dict(response.json())


def per_group(result: dict[str, Any]) -> dict[tuple[str, bool], int]:
    return {(g["type"], g["shared"]): g["records"] for g in result["groups"]}


def test_mem_6_stats_count_exactly_what_the_list_shows_to_each_reader(mem: Mem, db: Any) -> None:
    for n in range(3):
        mem.write(mem.anna(), f"Anna fact {n}.")
    mem.write(mem.anna(), "Anna prefers tea.", type="preference")
    mem.write(mem.bob(), "Bob fact.")
    mem.write(mem.nobody, "Shared fact one.")
    mem.write(mem.nobody, "Shared note.", type="note")
    mem.write(mem.nobody, "Expired shared fact.", expires_at="2020-01-01T00:00:00Z")

    everyone = stats(mem, mem.nobody)
    assert everyone["records"] == 7 == len(mem.list(mem.nobody))
    assert everyone["shared"] == 2 and everyone["people"] == 2
    assert per_group(everyone) == {("fact", False): 4, ("preference", False): 1, ("fact", True): 1,
                                   ("note", True): 1}
    assert {g["index_id"] for g in everyone["groups"]} == {mem.index_id}
    assert stats(mem, mem.nobody, include_expired="true")["records"] == 8

    # A person counts what she lists: her own and the shared ones, never Bob's, and herself as the one person.
    anna = stats(mem, mem.anna())
    assert anna["records"] == 6 == len(mem.list(mem.anna()))
    assert anna["people"] == 1 and per_group(anna)[("fact", False)] == 3
    assert stats(mem, mem.bob())["records"] == 3

    # Filters narrow the counts as they narrow the list; `shared` is a filter of its own.
    assert stats(mem, mem.nobody, type="fact")["records"] == 5
    assert stats(mem, mem.nobody, subject="anna")["records"] == 4
    shared_only = stats(mem, mem.nobody, shared="true")
    assert shared_only["records"] == 2 == len(mem.list(mem.nobody, shared="true"))
    assert shared_only["people"] == 0
    assert set(mem.list(mem.anna(), shared="true")) == set(mem.list(mem.nobody, shared="true"))
    assert_error(mem.client.get("/memory/stats", params={"subject": "anna", "shared": "true"}, headers=mem.nobody),
                 422, code="subject_and_shared", param="shared")
    assert_error(mem.client.get("/memory", params={"subject": "anna", "shared": "true"}, headers=mem.nobody),
                 422, code="subject_and_shared", param="shared")
    assert_error(mem.client.get("/memory/stats", params={"subject": "bob"}, headers=mem.anna()), 403,
                 code="subject_filter_forbidden")


def test_mem_6_stats_never_reach_another_index_or_organisation(mem: Mem, org: Any, other_org: Any, db: Any) -> None:
    mem.write(mem.anna(), "Counted in my index.")
    other_index = make_index(org)
    other = Mem(org, mem.client, other_index, writer_key(org))
    other.write(other.anna(), "Counted in the other index.")
    # A key whose policy names one index counts that index only, whatever it asks for.
    narrow = org.make_key(policy={"indexes": [mem.index_id], "rules": [
        {"id": "all", "effect": "permit", "kind": "memory_record"}]})["secret"]
    assert {g["index_id"] for g in mem.client.get("/memory/stats", headers=bearer(narrow)).json()["groups"]} == {
        mem.index_id}
    assert_error(mem.client.get("/memory/stats", params={"index_id": other_index}, headers=bearer(narrow)), 404)
    # Another organisation's administrator counts nothing of this one.
    theirs = mem.client.get("/memory/stats", headers=other_org.admin).json()
    assert not {g["index_id"] for g in theirs["groups"]} & {mem.index_id, other_index}


def test_plt_2_an_administrators_count_is_audited_without_ids(mem: Mem, db: Any) -> None:
    mem.write(mem.anna(), "One fact.")
    result = stats(mem, mem.admin)
    assert result["records"] == 1
    detail = db.execute("SELECT detail FROM audit_events WHERE action = 'memory.read' "
                        "AND detail->>'route' = 'GET /memory/stats' ORDER BY seq DESC LIMIT 1").fetchone()[0]
    assert detail["count"] == 1 and detail["ids"] == [] and detail["filters"] == {"index_id": mem.index_id}


def test_mem_6_stats_leave_out_what_maintenance_wrote_for_others_and_count_each_owner_once(mem: Mem, db: Any
                                                                                           ) -> None:
    """One statement counts the groups and the owners (issue 16 goal 7): a person counts hers and the shared
    records, never a lesson maintenance wrote about someone else nor a shared one it wrote; owners with records of
    several types count once; nothing counted is nobody."""
    empty = stats(mem, mem.admin)
    assert (empty["records"], empty["shared"], empty["people"], empty["groups"]) == (0, 0, 0, [])
    mem.write(mem.anna(), "Anna fact.")
    mem.write(mem.anna(), "Anna prefers tea.", type="preference")
    mem.write(mem.bob(), "Bob fact.")
    bobs_lesson = mem.write(mem.bob(), "Bob answers best in the morning.", type="lesson")
    mem.write(mem.nobody, "The office opens at eight.")
    maintained = mem.write(mem.nobody, "Customers ask about refunds on Mondays.", type="lesson")
    db.execute("UPDATE memory_records SET source = 'maintenance' WHERE id = ANY(%s)",
               ([bobs_lesson["id"], maintained["id"]],))

    admin = stats(mem, mem.admin)
    assert (admin["records"], admin["shared"], admin["people"]) == (6, 2, 2)
    assert per_group(admin) == {("fact", False): 2, ("preference", False): 1, ("lesson", False): 1,
                                ("fact", True): 1, ("lesson", True): 1}
    anna = stats(mem, mem.anna())
    assert (anna["records"], anna["shared"], anna["people"]) == (3, 1, 1) and len(mem.list(mem.anna())) == 3
    assert ("lesson", False) not in per_group(anna) and ("lesson", True) not in per_group(anna)
    bob = stats(mem, mem.bob())
    assert (bob["records"], bob["shared"], bob["people"]) == (3, 1, 1) and per_group(bob)[("lesson", False)] == 1
    nobody = stats(mem, mem.nobody)
    assert (nobody["records"], nobody["shared"], nobody["people"]) == (4, 1, 2) == (
        len(mem.list(mem.nobody)), 1, 2)
    assert stats(mem, mem.anna(), type="lesson")["records"] == 0


def test_mem_6_stats_are_one_index_only_pass_for_administrators_and_people(mem: Mem, db: Any) -> None:
    """At a million records only an index-only pass answers in time (issue 16 goal 7): the statement an
    administrator's and a person's count run reads the stats index alone, never the table (tiny tables here, so
    the planner is told scans of the table cost too much, as they do at scale)."""
    from backend.access.policy import Requester, parse_policy, writer_policy
    from backend.access.scope import Scope
    from backend.db.prepared import Prepared
    from backend.domains.memory.expressions import filters, scope_params
    from backend.domains.memory.repository import _build_counts
    from shared.schemas.memory import MemoryQuery

    mem.write(mem.anna(), "Anna fact.")
    rules = parse_policy(writer_policy()).rules
    scopes = {"administrator": Scope(mem.org.org_id, Requester(None), None, (), unrestricted=True),
              "person": Scope(mem.org.org_id, Requester("anna"), None, rules, unrestricted=False)}
    for who, scope in scopes.items():
        found = filters(MemoryQuery(), {})
        statement = Prepared(_build_counts(scope, found))
        params = {**scope_params(scope), **{k: v for entry in found for k, v in entry.params.items()}}
        with db.transaction():
            db.execute("SET LOCAL enable_seqscan = off")
            db.execute("SET LOCAL enable_bitmapscan = off")
            plan = "\n".join(r[0] for r in psycopg.RawCursor(db).execute("EXPLAIN " + statement.sql,
                                                                          statement.values(params)))
        assert "Index Only Scan using ix_memory_records_stats" in plan, f"{who}:\n{plan}"
        assert "Seq Scan on memory_records" not in plan and "Index Scan using" not in plan, f"{who}:\n{plan}"


def test_mem_6_a_persons_count_is_planned_for_her_however_often_a_connection_runs_it(
        mem: Mem, settings: Any, database_url: str) -> None:
    """psycopg prepares a statement that a connection runs five times, and PostgreSQL may then keep a generic plan
    of it, which cannot fold the owner tests against the person asking: at 1M records a person's count went from
    0.1 s to 5.8 s. The application's connections plan every execution for its values (backend/db/engine.py)."""
    from backend import contexts
    from backend.db.engine import make_engine, make_sessionmaker
    from backend.domains.memory import decay
    from backend.domains.memory import repository as repo
    from shared.schemas.memory import MemoryQuery

    mem.write(mem.anna(), "Anna counts her records.")
    headers = mem.anna()

    async def plans() -> tuple[int, int]:
        engine = make_engine(database_url, pool_size=1)
        try:
            for _ in range(14):
                async with make_sessionmaker(engine)() as db, db.begin():
                    ctx = await contexts.for_credential(db, settings, authorization=headers["Authorization"],
                                                        subject_header=headers["X-Core-Subject"])
                    await repo.counts(db, ctx.scope, decay.half_lives(ctx.org, ctx.principal.key), MemoryQuery())
            async with make_sessionmaker(engine)() as db:
                row = (await db.execute(sql_text(
                    "SELECT generic_plans, custom_plans FROM pg_prepared_statements "
                    "WHERE statement LIKE 'WITH groups AS%'"))).one()
                return int(row[0]), int(row[1])
        finally:
            await engine.dispose()

    generic, custom = asyncio.run(plans())
    # Prepared after five runs; PostgreSQL plans the first five executions of a prepared statement for their values
    # in any case and may keep a generic plan from the sixth on: here none of the nine is generic.
    assert (generic, custom) == (0, 9), (generic, custom)
