"""episodes, lessons and the maintenance pass: the window that ends a session, when episodes were switched on,
promotion proposals with their evidence, and the episodes maintenance lessons were drawn from (EXT-12 … EXT-16)

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-03 13:20:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("extraction_switches", sa.Column("episodes_since", sa.DateTime(timezone=True), nullable=True))
    op.add_column("extraction_windows", sa.Column("session_first_position", sa.BigInteger(), nullable=True))
    op.create_table(
        "memory_proposals",
        sa.Column("org_id", sa.Text(), nullable=False),
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("index_id", sa.Text(), nullable=False),
        sa.Column("type", sa.Text(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("norm_hash", sa.Text(), nullable=False),
        sa.Column("basis", sa.Text(), nullable=False),
        sa.Column("status", sa.Text(), server_default="open", nullable=False),
        sa.Column("record_id", sa.Text(), nullable=True),
        sa.Column("decided_by_type", sa.Text(), nullable=True),
        sa.Column("decided_by_id", sa.Text(), nullable=True),
        sa.Column("decided_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.ForeignKeyConstraint(["org_id", "index_id"], ["indexes.org_id", "indexes.id"],
                                name=op.f("fk_memory_proposals_org_id_indexes"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("org_id", "id", name=op.f("pk_memory_proposals")),
    )
    op.create_index("uq_memory_proposals_org_id_index_id_norm_hash", "memory_proposals",
                    ["org_id", "index_id", "norm_hash"], unique=True)
    op.create_index("ix_memory_proposals_org_id_status_id", "memory_proposals", ["org_id", "status", "id"])
    op.create_table(
        "memory_proposal_evidence",
        sa.Column("org_id", sa.Text(), nullable=False),
        sa.Column("proposal_id", sa.Text(), nullable=False),
        sa.Column("record_id", sa.Text(), nullable=False),
        sa.Column("subject", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(["org_id", "proposal_id"], ["memory_proposals.org_id", "memory_proposals.id"],
                                name=op.f("fk_memory_proposal_evidence_org_id_memory_proposals"), ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["org_id", "record_id"], ["memory_records.org_id", "memory_records.id"],
                                name=op.f("fk_memory_proposal_evidence_org_id_memory_records"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("org_id", "proposal_id", "record_id", name=op.f("pk_memory_proposal_evidence")),
    )
    op.create_index("ix_memory_proposal_evidence_org_id_record_id", "memory_proposal_evidence",
                    ["org_id", "record_id"])
    op.create_index("ix_memory_proposal_evidence_org_id_subject", "memory_proposal_evidence", ["org_id", "subject"])
    op.create_table(
        "lesson_sources",
        sa.Column("org_id", sa.Text(), nullable=False),
        sa.Column("episode_id", sa.Text(), nullable=False),
        sa.Column("lesson_id", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(["org_id", "episode_id"], ["memory_records.org_id", "memory_records.id"],
                                name=op.f("fk_lesson_sources_org_id_memory_records"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("org_id", "episode_id", name=op.f("pk_lesson_sources")),
    )


def downgrade() -> None:
    op.drop_table("lesson_sources")
    op.drop_table("memory_proposal_evidence")
    op.drop_table("memory_proposals")
    op.drop_column("extraction_windows", "session_first_position")
    op.drop_column("extraction_switches", "episodes_since")
