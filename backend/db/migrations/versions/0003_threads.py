"""conversation threads: threads, items, notes, working states, summaries (05-threads.md)

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-02 10:28:05.561544
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

# Self-contained: it needs only the foundation (0001); the merger relinks it after 0002.
revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "threads",
        sa.Column("org_id", sa.Text(), nullable=False),
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("subject", sa.Text(), nullable=True),
        sa.Column("labels", postgresql.JSONB(astext_type=sa.Text()), server_default="{}", nullable=False),
        sa.Column("metadata", postgresql.JSONB(astext_type=sa.Text()), server_default="{}", nullable=False),
        sa.Column("last_position", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("deleted_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["org_id"], ["orgs.id"], name=op.f("fk_threads_org_id_orgs"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("org_id", "id", name=op.f("pk_threads")),
    )
    op.create_index("ix_threads_org_id_subject_id", "threads", ["org_id", "subject", "id"], unique=False)
    op.create_table(
        "thread_items",
        sa.Column("org_id", sa.Text(), nullable=False),
        sa.Column("thread_id", sa.Text(), nullable=False),
        sa.Column("position", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("type", sa.Text(), nullable=False),
        sa.Column("role", sa.Text(), nullable=True),
        sa.Column("subject", sa.Text(), nullable=True),
        sa.Column("response_id", sa.Text(), nullable=True),
        sa.Column("body", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("text", sa.Text(), nullable=True),
        sa.Column(
            "tsv",
            postgresql.TSVECTOR(),
            sa.Computed("to_tsvector('simple'::regconfig, text)", persisted=True),
            nullable=True,
        ),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["org_id", "thread_id"],
            ["threads.org_id", "threads.id"],
            name=op.f("fk_thread_items_org_id_threads"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("org_id", "thread_id", "position", name=op.f("pk_thread_items")),
        sa.UniqueConstraint("org_id", "id", name=op.f("uq_thread_items_org_id_id")),
    )
    op.create_index(
        "ix_thread_items_org_id_created_at_id",
        "thread_items",
        ["org_id", "created_at", "id"],
        unique=False,
        postgresql_where=sa.text("text IS NOT NULL"),
    )
    op.create_index("ix_thread_items_org_id_subject", "thread_items", ["org_id", "subject"], unique=False)
    op.create_index("ix_thread_items_tsv", "thread_items", ["tsv"], unique=False, postgresql_using="gin")
    op.create_table(
        "thread_states",
        sa.Column("org_id", sa.Text(), nullable=False),
        sa.Column("thread_id", sa.Text(), nullable=False),
        sa.Column("state", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.ForeignKeyConstraint(
            ["org_id", "thread_id"],
            ["threads.org_id", "threads.id"],
            name=op.f("fk_thread_states_org_id_threads"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("org_id", "thread_id", name=op.f("pk_thread_states")),
    )
    op.create_table(
        "thread_summaries",
        sa.Column("org_id", sa.Text(), nullable=False),
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("thread_id", sa.Text(), nullable=False),
        sa.Column("from_position", sa.BigInteger(), nullable=False),
        sa.Column("to_position", sa.BigInteger(), nullable=False),
        sa.Column("level", sa.Integer(), server_default="1", nullable=False),
        sa.Column("model", sa.Text(), nullable=True),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.ForeignKeyConstraint(
            ["org_id", "thread_id"],
            ["threads.org_id", "threads.id"],
            name=op.f("fk_thread_summaries_org_id_threads"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("org_id", "id", name=op.f("pk_thread_summaries")),
    )
    op.create_index(
        "ix_thread_summaries_org_id_thread_id_from_position",
        "thread_summaries",
        ["org_id", "thread_id", "from_position"],
        unique=False,
    )
    op.create_table(
        "thread_item_notes",
        sa.Column("org_id", sa.Text(), nullable=False),
        sa.Column("item_id", sa.Text(), nullable=False),
        sa.Column("author", sa.Text(), nullable=False),
        sa.Column("thread_id", sa.Text(), nullable=False),
        sa.Column("metadata", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.ForeignKeyConstraint(
            ["org_id", "item_id"],
            ["thread_items.org_id", "thread_items.id"],
            name=op.f("fk_thread_item_notes_org_id_thread_items"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("org_id", "item_id", "author", name=op.f("pk_thread_item_notes")),
    )
    op.create_index("ix_thread_item_notes_org_id_author", "thread_item_notes", ["org_id", "author"], unique=False)
    op.create_index("ix_thread_item_notes_org_id_thread_id", "thread_item_notes", ["org_id", "thread_id"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_thread_item_notes_org_id_thread_id", table_name="thread_item_notes")
    op.drop_index("ix_thread_item_notes_org_id_author", table_name="thread_item_notes")
    op.drop_table("thread_item_notes")
    op.drop_index("ix_thread_summaries_org_id_thread_id_from_position", table_name="thread_summaries")
    op.drop_table("thread_summaries")
    op.drop_table("thread_states")
    op.drop_index("ix_thread_items_tsv", table_name="thread_items", postgresql_using="gin")
    op.drop_index("ix_thread_items_org_id_subject", table_name="thread_items")
    op.drop_index(
        "ix_thread_items_org_id_created_at_id", table_name="thread_items", postgresql_where=sa.text("text IS NOT NULL")
    )
    op.drop_table("thread_items")
    op.drop_index("ix_threads_org_id_subject_id", table_name="threads")
    op.drop_table("threads")
