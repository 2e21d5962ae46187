"""pseudonymisation: per-thread placeholders of personal data, and the mark on threads a pseudonymising key
wrote in (TRN-10, EXT-11)

Revision ID: 0012
Revises: 0007
Create Date: 2026-12-03 09:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("threads", sa.Column("pseudonymized", sa.Boolean(), server_default=sa.text("false"),
                                       nullable=False))
    op.create_table(
        "thread_pseudonyms",
        sa.Column("org_id", sa.Text(), nullable=False),
        sa.Column("thread_id", sa.Text(), nullable=False),
        sa.Column("placeholder", sa.Text(), nullable=False),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.Column("subject", sa.Text(), nullable=True),
        sa.Column("belongs_to", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.ForeignKeyConstraint(["org_id", "thread_id"], ["threads.org_id", "threads.id"],
                                name=op.f("fk_thread_pseudonyms_org_id_threads"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("org_id", "thread_id", "placeholder", name=op.f("pk_thread_pseudonyms")),
    )
    # Values are keyed by their MD5: a long URL would not fit a btree entry.
    op.create_index("uq_thread_pseudonyms_org_id_thread_id_kind_value", "thread_pseudonyms",
                    ["org_id", "thread_id", "kind", sa.text("md5(value)")], unique=True)
    op.create_index("ix_thread_pseudonyms_org_id_subject", "thread_pseudonyms", ["org_id", "subject"], unique=False)
    op.create_index("ix_thread_pseudonyms_org_id_belongs_to", "thread_pseudonyms", ["org_id", "belongs_to"],
                    unique=False)
    op.create_index("ix_thread_pseudonyms_org_id_lower_value", "thread_pseudonyms",
                    ["org_id", sa.text("md5(lower(value))")], unique=False)


def downgrade() -> None:
    op.drop_table("thread_pseudonyms")
    op.drop_column("threads", "pseudonymized")
