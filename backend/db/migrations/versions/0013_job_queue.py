"""job queue (procrastinate 3.10.0) and compaction's summary bookkeeping

Revision ID: 0013
Revises: 0008
Create Date: 2026-12-04 09:00:00

The job queue's tables, types, functions and triggers are procrastinate's own schema of the pinned release,
kept beside the migrations (`sql/procrastinate-3.10.0.sql`, unchanged): a migration is a snapshot, so a later
procrastinate release brings a migration of its own that applies that release's upgrade scripts.
"""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa
from alembic import op

revision = '0013'
down_revision = '0012'
branch_labels = None
depends_on = None

SCHEMA = Path(__file__).resolve().parents[1] / "sql" / "procrastinate-3.10.0.sql"


def _script(sql: str) -> None:
    """Run a script on the driver's cursor: without parameters psycopg leaves its `%` signs alone."""
    driver = op.get_bind().connection.dbapi_connection
    with driver.cursor() as cursor:  # type: ignore[union-attr]
        cursor.execute(sql)


def upgrade() -> None:
    _script(SCHEMA.read_text(encoding="utf-8"))
    op.add_column('thread_summaries', sa.Column('from_turn', sa.Integer(), nullable=True))
    op.add_column('thread_summaries', sa.Column('to_turn', sa.Integer(), nullable=True))
    op.create_unique_constraint(op.f('uq_thread_summaries_org_id_thread_id_level_from_position_to_position'),
                                'thread_summaries', ['org_id', 'thread_id', 'level', 'from_position', 'to_position'])


def downgrade() -> None:
    op.drop_constraint(op.f('uq_thread_summaries_org_id_thread_id_level_from_position_to_position'),
                       'thread_summaries', type_='unique')
    op.drop_column('thread_summaries', 'to_turn')
    op.drop_column('thread_summaries', 'from_turn')
    _script("""
        DROP TABLE IF EXISTS procrastinate_events, procrastinate_periodic_defers, procrastinate_jobs,
            procrastinate_workers CASCADE;
        DO $$
        DECLARE f regprocedure;
        BEGIN
            FOR f IN SELECT p.oid::regprocedure FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
                     WHERE n.nspname = current_schema() AND p.proname LIKE 'procrastinate\\_%' LOOP
                EXECUTE 'DROP FUNCTION ' || f || ' CASCADE';
            END LOOP;
        END $$;
        DROP TYPE IF EXISTS procrastinate_job_to_defer_v1, procrastinate_job_event_type,
            procrastinate_job_status CASCADE;
    """)
