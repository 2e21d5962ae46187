"""agents and their immutable versions (TRN-5)

Revision ID: 0009
Revises: 0007
Create Date: 2026-12-03 09:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "agents",
        sa.Column("org_id", sa.Text(), nullable=False),
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("deleted_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["org_id"], ["orgs.id"], name=op.f("fk_agents_org_id_orgs"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("org_id", "id", name=op.f("pk_agents")),
    )
    # Names are unique among the organisation's live agents; a deleted agent's name may be used again.
    op.create_index("ix_agents_org_id_name", "agents", ["org_id", "name"], unique=True,
                    postgresql_where=sa.text("deleted_at IS NULL"))
    op.create_table(
        "agent_versions",
        sa.Column("org_id", sa.Text(), nullable=False),
        sa.Column("agent_id", sa.Text(), nullable=False),
        sa.Column("version", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("model", sa.Text(), nullable=False),
        sa.Column("instructions", sa.Text(), nullable=False),
        sa.Column("memory_injection", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("working_state_schema", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("compaction", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("created_by_type", sa.Text(), nullable=False),
        sa.Column("created_by_id", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(["org_id", "agent_id"], ["agents.org_id", "agents.id"],
                                name=op.f("fk_agent_versions_org_id_agents"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("org_id", "agent_id", "version", name=op.f("pk_agent_versions")),
    )


def downgrade() -> None:
    op.drop_table("agent_versions")
    op.drop_index("ix_agents_org_id_name", table_name="agents")
    op.drop_table("agents")
