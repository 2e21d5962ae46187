"""Issue 17 item 11: row-level security as defence in depth.

The application acts as `coremem_app` (no ownership, no BYPASSRLS); every tenant table forces row-level security
with a policy on the transaction's `core.org_id`. Two organisations write through the API; then, as the app role,
an unscoped `SELECT` of every tenant table returns the current organisation's rows only, and none with no
organisation set; the role cannot switch the protection off."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest
from sqlalchemy import event, text
from sqlalchemy.engine import make_url

from backend import contexts
from backend.db.embedded import app_login_url
from backend.db.engine import make_engine, make_sessionmaker
from backend.db.tenant import APP_ROLE
from backend.errors import Unauthorized
from tests.helpers import bearer

CONTROL_PLANE = {"orgs", "admins", "admin_tokens", "api_keys"}  # read to find the organisation (decisions.md)


def _plain(database_url: str) -> str:
    return make_url(database_url).set(drivername="postgresql").render_as_string(hide_password=False)


def _as_app(database_url: str) -> psycopg.Connection[Any]:
    """A connection as the application makes one on the embedded server (`backend.db.engine.make_engine`)."""
    return psycopg.connect(_plain(app_login_url(database_url)))


def _tenant_tables(db: psycopg.Connection[Any]) -> list[str]:
    rows = db.execute("SELECT DISTINCT table_name FROM information_schema.columns WHERE table_schema = 'public' "
                      "AND column_name = 'org_id' ORDER BY 1").fetchall()
    return [r[0] for r in rows if r[0] not in CONTROL_PLANE]


def _populate(client: Any, org: Any) -> None:
    """Rows in most tenant tables: a key (its audit trail), an index, records and their versions, a thread with
    items and a note, working state, an erasure."""
    org.make_key(["knowledge"])
    index = client.post("/indexes", headers=org.full, json={"name": "notes"}).json()
    for words in ("Tea, no sugar.", "Flies on Tuesdays."):
        written = client.post("/memory", headers=bearer(org.key, "anna"),
                              json={"index_id": index["id"], "type": "fact", "text": words})
        assert written.status_code == 201, written.text
    thread = client.post("/threads", headers=bearer(org.key, "anna"), json={
        "items": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hello"}]}]})
    assert thread.status_code == 201, thread.text
    state = client.put(f"/threads/{thread.json()['id']}/state", headers=bearer(org.key, "anna"),
                       json={"state": {"step": 1}})
    assert state.status_code in (200, 201), state.text
    erased = client.delete("/subjects/bert", headers=org.admin)
    assert erased.status_code == 200, erased.text


def test_item_11_unscoped_selects_see_only_the_current_organisation(org, other_org, client, db, database_url):
    _populate(client, org)
    _populate(client, other_org)
    tables = _tenant_tables(db)
    both = 0
    with _as_app(database_url) as app:
        for table in tables:
            mine = db.execute(f"SELECT count(*) FROM {table} WHERE org_id = %s", (org.org_id,)).fetchone()[0]
            theirs = db.execute(f"SELECT count(*) FROM {table} WHERE org_id = %s",
                                (other_org.org_id,)).fetchone()[0]
            both += bool(mine and theirs)
            assert app.execute(f"SELECT count(*) FROM {table}").fetchone()[0] == 0, f"{table}: rows with no org set"
            app.execute("SELECT set_config('core.org_id', %s, true)", (org.org_id,))
            seen = app.execute(f"SELECT org_id, count(*) FROM {table} GROUP BY 1").fetchall()
            assert {o for o, _ in seen} <= {org.org_id, ""}, f"{table}: another organisation's rows"
            assert sum(n for o, n in seen if o == org.org_id) == mine, table
            app.rollback()  # the setting is transaction-local: gone with the transaction
            assert app.execute(f"SELECT count(*) FROM {table}").fetchone()[0] == 0, f"{table}: setting outlived"
            app.rollback()
    assert both >= 9, f"only {both} tables held both organisations' rows; the test would prove little"
    print(f"\nbattery counts: item 11: {len(tables)} tenant tables, {both} holding both organisations' rows")


def test_item_11_every_tenant_table_forces_a_policy_and_the_app_role_cannot_lift_it(org, db, database_url):
    tables = _tenant_tables(db)
    flags = dict(((name, (rls, force)) for name, rls, force in db.execute(
        "SELECT relname, relrowsecurity, relforcerowsecurity FROM pg_class "
        "WHERE relnamespace = 'public'::regnamespace AND relkind = 'r'").fetchall()))
    policies = {r[0] for r in db.execute("SELECT tablename FROM pg_policies WHERE schemaname = 'public'").fetchall()}
    for table in tables:
        assert flags[table] == (True, True), table
        assert table in policies, table
    role = db.execute("SELECT rolsuper, rolbypassrls, rolcreaterole FROM pg_roles WHERE rolname = %s",
                      (APP_ROLE,)).fetchone()
    assert role == (False, False, False)
    owned = db.execute("SELECT count(*) FROM pg_class WHERE relowner = (SELECT oid FROM pg_roles "
                       "WHERE rolname = %s)", (APP_ROLE,)).fetchone()[0]
    assert owned == 0
    refused = (f"ALTER TABLE {tables[0]} DISABLE ROW LEVEL SECURITY", f"ALTER TABLE {tables[0]} NO FORCE ROW LEVEL "
               "SECURITY", f"DROP POLICY tenant ON {tables[0]}", f"ALTER POLICY tenant ON {tables[0]} USING (true)",
               f"CREATE POLICY everything ON {tables[0]} USING (true)", f"ALTER ROLE {APP_ROLE} BYPASSRLS")
    with _as_app(database_url) as app:
        assert app.execute("SELECT current_user").fetchone()[0] == APP_ROLE
        for statement in refused:
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                app.execute(statement)  # type: ignore[arg-type]
            app.rollback()
        # Turning row security off does not bypass a policy: the query is refused instead.
        app.execute("SET row_security = off")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            app.execute("SELECT count(*) FROM memory_records")
        app.rollback()


def test_item_11_the_application_logs_in_as_the_app_role_so_no_reset_returns_to_the_owner(org, client, db,
                                                                                           database_url):
    """The product's own engine logs in as `coremem_app` on the embedded server: a session that resets its role
    (an injected `RESET ROLE`, `SET ROLE NONE`) is still `coremem_app`, never the owner or a superuser."""
    if "?host=" not in database_url:
        pytest.skip("CORE_TEST_DATABASE_URL: the login is the operator's choice (docs/operations.md)")
    index = client.post("/indexes", headers=org.full, json={"name": "login"}).json()
    written = client.post("/memory", headers=bearer(org.key, "anna"),
                          json={"index_id": index["id"], "type": "fact", "text": "Tea, no sugar."})
    assert written.status_code == 201, written.text

    async def users() -> list[tuple[str, str]]:
        engine = make_engine(database_url, pool_size=1)
        try:
            async with engine.connect() as conn:
                seen = [tuple((await conn.exec_driver_sql("SELECT session_user, current_user")).one())]
                for reset in ("RESET ROLE", "SET ROLE NONE", "RESET ALL"):
                    await conn.exec_driver_sql(reset)
                    seen.append(tuple((await conn.exec_driver_sql("SELECT session_user, current_user")).one()))
                rows = (await conn.exec_driver_sql("SELECT count(*) FROM memory_records")).scalar()
                assert rows == 0  # no organisation set: nothing, even after the resets
                return seen  # type: ignore[return-value]
        finally:
            await engine.dispose()

    assert asyncio.run(users()) == [(APP_ROLE, APP_ROLE)] * 4


def test_item_11_the_app_role_cannot_write_into_another_organisation(org, other_org, client, database_url):
    index = client.post("/indexes", headers=other_org.full, json={"name": "theirs"}).json()
    with _as_app(database_url) as app:
        app.execute("SELECT set_config('core.org_id', %s, true)", (org.org_id,))
        with pytest.raises(psycopg.errors.InsufficientPrivilege):  # WITH CHECK: new row violates the policy
            app.execute("INSERT INTO store_settings (org_id, index_id) VALUES (%s, %s)",
                        (other_org.org_id, index["id"]))
        app.rollback()
        app.execute("SELECT set_config('core.org_id', %s, true)", (org.org_id,))
        moved = app.execute("UPDATE indexes SET name = 'stolen' WHERE id = %s", (index["id"],))
        assert moved.rowcount == 0
        app.rollback()



def test_item_11_full_text_search_keeps_its_index_under_the_policies(db):
    """A policy lets PostgreSQL use a condition in an index scan only when its function is leakproof; migration
    0016 marks `tsvector @@ tsquery` so, or every search would read all of the organisation's messages (measured
    in bench/results/rls.md: the GIN scan came back once it was marked)."""
    assert db.execute("SELECT proleakproof FROM pg_proc WHERE oid = "
                      "'pg_catalog.ts_match_vq(tsvector, tsquery)'::regprocedure").fetchone()[0] is True



def test_item_11_a_keys_statement_sets_its_organisation_in_its_own_round_trip(org, other_org, settings,
                                                                               database_url):
    """A request with a key needs no second round trip for its organisation: the credential's statement sets it,
    so `for_credential` sends no `set_config` of its own; a key that is not known sets nothing, and an
    administrator's token still sets its organisation by a statement of its own."""
    setting = text("SELECT current_setting('core.org_id', true)")

    async def run() -> tuple[Any, int, Any, Any, int]:
        engine = make_engine(database_url, pool_size=1)
        sent: list[str] = []
        event.listen(engine.sync_engine, "before_cursor_execute",
                     lambda _conn, _cursor, statement, *_rest: sent.append(statement))
        sessions = make_sessionmaker(engine)

        def settings_sent() -> int:
            return sum("set_config" in statement for statement in sent)

        try:
            async with sessions() as db, db.begin():
                await contexts.for_credential(db, settings, authorization=f"Bearer {other_org.key}")
                by_key = (await db.execute(setting)).scalar()
                after_key = settings_sent()
            async with sessions() as db, db.begin():
                with pytest.raises(Unauthorized):
                    await contexts.for_credential(db, settings, authorization=f"Bearer {other_org.key}x")
                unknown = (await db.execute(setting)).scalar()
            async with sessions() as db, db.begin():
                await contexts.for_credential(db, settings, authorization=org.admin["Authorization"])
                by_admin = (await db.execute(setting)).scalar()
            return by_key, after_key, unknown, by_admin, settings_sent()
        finally:
            await engine.dispose()

    by_key, after_key, unknown, by_admin, after_admin = asyncio.run(run())
    assert by_key == other_org.org_id
    assert after_key == 0  # the key's organisation came with its row
    assert unknown in (None, "")
    assert (by_admin, after_admin) == (org.org_id, 1)
