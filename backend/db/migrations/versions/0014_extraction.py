"""extraction: the switch per store, its runs, windows and per-thread cursors; the organisation's monthly
model-token cap (EXT-2 … EXT-11)

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-10 09:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0014"
down_revision = "0010"
branch_labels = None
depends_on = None


def _now() -> sa.Column:
    return sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False)


def upgrade() -> None:
    op.add_column("orgs", sa.Column("limits", postgresql.JSONB(astext_type=sa.Text()),
                                    server_default='{"monthly_model_tokens": null}', nullable=False))
    op.create_table(
        "extraction_switches",
        sa.Column("org_id", sa.Text(), nullable=False),
        sa.Column("index_id", sa.Text(), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("model", sa.Text(), nullable=False),
        sa.Column("instructions", sa.Text(), server_default="", nullable=False),
        sa.Column("types", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("schedule_minutes", sa.Integer(), nullable=False),
        sa.Column("quiet_minutes", sa.Integer(), nullable=False),
        sa.Column("threads", sa.Text(), nullable=False),
        sa.Column("episodes", sa.Boolean(), nullable=False),
        sa.Column("lessons", sa.Boolean(), nullable=False),
        sa.Column("filters", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("author_type", sa.Text(), nullable=False),
        sa.Column("author_id", sa.Text(), nullable=False),
        sa.Column("set_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("last_scheduled_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["org_id"], ["orgs.id"], name=op.f("fk_extraction_switches_org_id_orgs"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("org_id", "index_id", name=op.f("pk_extraction_switches")),
    )
    op.create_table(
        "extraction_runs",
        sa.Column("org_id", sa.Text(), nullable=False),
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("index_id", sa.Text(), nullable=False),
        sa.Column("trigger", sa.Text(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("planned_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["org_id"], ["orgs.id"], name=op.f("fk_extraction_runs_org_id_orgs"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("org_id", "id", name=op.f("pk_extraction_runs")),
    )
    op.create_index("ix_extraction_runs_org_id_index_id_id", "extraction_runs", ["org_id", "index_id", "id"])
    op.create_table(
        "extraction_windows",
        sa.Column("org_id", sa.Text(), nullable=False),
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("index_id", sa.Text(), nullable=False),
        sa.Column("thread_id", sa.Text(), nullable=False),
        sa.Column("run_id", sa.Text(), nullable=False),
        sa.Column("first_position", sa.BigInteger(), nullable=False),
        sa.Column("last_position", sa.BigInteger(), nullable=False),
        sa.Column("items", sa.Integer(), nullable=False),
        sa.Column("state", sa.Text(), nullable=False),
        sa.Column("attempts", sa.Integer(), server_default="0", nullable=False),
        sa.Column("error_code", sa.Text(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("written", sa.Integer(), server_default="0", nullable=False),
        sa.Column("confirmed", sa.Integer(), server_default="0", nullable=False),
        sa.Column("replaced", sa.Integer(), server_default="0", nullable=False),
        sa.Column("dropped", sa.Integer(), server_default="0", nullable=False),
        _now(),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["org_id"], ["orgs.id"], name=op.f("fk_extraction_windows_org_id_orgs"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("org_id", "id", name=op.f("pk_extraction_windows")),
    )
    op.create_index("uq_extraction_windows_org_id_index_id_thread_id_first_position", "extraction_windows",
                    ["org_id", "index_id", "thread_id", "first_position"], unique=True)
    op.create_index("ix_extraction_windows_org_id_index_id_state", "extraction_windows",
                    ["org_id", "index_id", "state"])
    op.create_index("ix_extraction_windows_org_id_run_id", "extraction_windows", ["org_id", "run_id"])
    op.create_index("ix_extraction_windows_org_id_index_id_finished_at", "extraction_windows",
                    ["org_id", "index_id", "finished_at"], postgresql_where=sa.text("finished_at IS NOT NULL"))
    op.create_table(
        "extraction_cursors",
        sa.Column("org_id", sa.Text(), nullable=False),
        sa.Column("index_id", sa.Text(), nullable=False),
        sa.Column("thread_id", sa.Text(), nullable=False),
        sa.Column("read_to", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(["org_id"], ["orgs.id"], name=op.f("fk_extraction_cursors_org_id_orgs"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("org_id", "index_id", "thread_id", name=op.f("pk_extraction_cursors")),
    )


def downgrade() -> None:
    op.drop_table("extraction_cursors")
    op.drop_table("extraction_windows")
    op.drop_table("extraction_runs")
    op.drop_table("extraction_switches")
    op.drop_column("orgs", "limits")
