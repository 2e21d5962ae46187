"""row-level security: the application's role `coremem_app` (no ownership, no BYPASSRLS) with grants, and
FORCE ROW LEVEL SECURITY on every tenant table with a policy on `org_id = current_setting('core.org_id')`

The owner (whoever runs the migrations) keeps the tables; the application sets the organisation per transaction
(`backend/db/tenant.py`) and connects as, or switches to, `coremem_app` (`backend/db/engine.py`).

Revision ID: 0016
Revises: 0014
Create Date: 2026-12-03 13:40:00
"""

from __future__ import annotations

from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

APP_ROLE = "coremem_app"
# Every table with an `org_id` column but the control plane (orgs, admins, admin_tokens, api_keys), which is read
# to find the organisation of a request before one is known (docs/decisions.md, PLT-1/RLS).
TENANT_TABLES = (
    "key_audit", "indexes", "audit_events", "agents", "agent_versions", "extraction_switches", "extraction_runs",
    "extraction_windows", "extraction_cursors", "memory_records", "memory_versions", "erased_subjects",
    "store_settings", "threads", "thread_items", "thread_item_notes", "thread_states", "thread_summaries",
    "thread_pseudonyms", "responses", "usage_events", "memory_proposals", "memory_proposal_evidence", "lesson_sources",
)
# `models` rows with org_id '' are offered to every organisation: readable by all, written only with '' set.
SHARED_ROW_TABLES = ("models",)
CURRENT_ORG = "current_setting('core.org_id', true)"
# Under row-level security PostgreSQL uses a query's condition in an index scan only when its function is
# LEAKPROOF (it may otherwise see rows the policy hides). `tsvector @@ tsquery` is not marked so, which would turn
# every full-text search (GIN on thread_items.tsv and memory_records.search) into a scan of the organisation's
# rows. It raises no error that depends on a row's value, so a superuser marks it; without one it stays as is and
# operations.md says what to run.
LEAKPROOF = ("pg_catalog.ts_match_vq(tsvector, tsquery)",)


def upgrade() -> None:
    op.execute(f"""
        DO $$
        BEGIN
            IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{APP_ROLE}') THEN
                CREATE ROLE {APP_ROLE} NOLOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE;
            END IF;
        EXCEPTION WHEN duplicate_object THEN NULL;  -- another database of the cluster made it meanwhile
        END $$""")
    # The owner must be able to SET ROLE to it (a superuser can already).
    op.execute(f"""
        DO $$
        BEGIN
            IF NOT (SELECT rolsuper FROM pg_roles WHERE rolname = current_user)
               AND NOT pg_has_role(current_user, '{APP_ROLE}', 'MEMBER') THEN
                EXECUTE format('GRANT {APP_ROLE} TO %I', current_user);
            END IF;
        END $$""")
    op.execute(f"GRANT USAGE ON SCHEMA public TO {APP_ROLE}")
    op.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {APP_ROLE}")
    op.execute(f"GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA public TO {APP_ROLE}")
    op.execute(f"GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA public TO {APP_ROLE}")
    # Tables a later migration of the same owner creates get the same grants (RLS must still be added there).
    op.execute(f"ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES "
               f"TO {APP_ROLE}")
    op.execute(f"ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT USAGE, SELECT, UPDATE ON SEQUENCES TO {APP_ROLE}")
    for table in TENANT_TABLES:
        _protect(table, f"org_id = {CURRENT_ORG}", f"org_id = {CURRENT_ORG}")
    for table in SHARED_ROW_TABLES:
        _protect(table, f"org_id = {CURRENT_ORG} OR org_id = ''", f"org_id = {CURRENT_ORG}")
    _set_leakproof("LEAKPROOF")


def _protect(table: str, using: str, check: str) -> None:
    op.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
    op.execute(f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY")
    op.execute(f"CREATE POLICY tenant ON {table} USING ({using}) WITH CHECK ({check})")


def _set_leakproof(flag: str) -> None:
    for function in LEAKPROOF:
        op.execute(f"""
            DO $$
            BEGIN
                IF (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
                    ALTER FUNCTION {function} {flag};
                ELSE
                    RAISE NOTICE 'not a superuser: {function} stays as it is (docs/operations.md)';
                END IF;
            END $$""")


def downgrade() -> None:
    _set_leakproof("NOT LEAKPROOF")
    for table in (*TENANT_TABLES, *SHARED_ROW_TABLES):
        op.execute(f"DROP POLICY IF EXISTS tenant ON {table}")
        op.execute(f"ALTER TABLE {table} NO FORCE ROW LEVEL SECURITY")
        op.execute(f"ALTER TABLE {table} DISABLE ROW LEVEL SECURITY")
    op.execute(f"ALTER DEFAULT PRIVILEGES IN SCHEMA public REVOKE ALL ON TABLES FROM {APP_ROLE}")
    op.execute(f"ALTER DEFAULT PRIVILEGES IN SCHEMA public REVOKE ALL ON SEQUENCES FROM {APP_ROLE}")
    op.execute(f"REVOKE ALL ON ALL TABLES IN SCHEMA public FROM {APP_ROLE}")
    op.execute(f"REVOKE ALL ON ALL SEQUENCES IN SCHEMA public FROM {APP_ROLE}")
    op.execute(f"REVOKE ALL ON ALL FUNCTIONS IN SCHEMA public FROM {APP_ROLE}")
    op.execute(f"REVOKE USAGE ON SCHEMA public FROM {APP_ROLE}")
    # The role itself stays: it belongs to the cluster, and other databases on it may use it.
