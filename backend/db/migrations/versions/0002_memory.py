"""memory records, their versions, erased people (MEM-1 … MEM-19)

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-02 10:29:35.145928
"""

from __future__ import annotations

import pgvector.sqlalchemy
import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "erased_subjects",
        sa.Column("org_id", sa.Text(), nullable=False),
        sa.Column("subject_hash", sa.Text(), nullable=False),
        sa.Column("erased_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["org_id"], ["orgs.id"], name=op.f("fk_erased_subjects_org_id_orgs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("org_id", "subject_hash", name=op.f("pk_erased_subjects")),
    )
    op.create_table(
        "memory_records",
        sa.Column("org_id", sa.Text(), nullable=False),
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("index_id", sa.Text(), nullable=False),
        sa.Column("subject", sa.Text(), nullable=True),
        sa.Column("type", sa.Text(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("norm_hash", sa.Text(), nullable=False),
        sa.Column("metadata", postgresql.JSONB(astext_type=sa.Text()), server_default="{}", nullable=False),
        sa.Column("labels", postgresql.JSONB(astext_type=sa.Text()), server_default="{}", nullable=False),
        sa.Column("confidence", sa.Double(), nullable=False),
        sa.Column("contested", sa.Boolean(), server_default="false", nullable=False),
        sa.Column("contested_with", sa.Text(), nullable=True),
        sa.Column("recall_count", sa.Integer(), server_default="0", nullable=False),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("verified", sa.Boolean(), server_default="false", nullable=False),
        sa.Column("key", sa.Text(), nullable=True),
        sa.Column("tags", postgresql.ARRAY(sa.Text()), server_default="{}", nullable=False),
        sa.Column("priority", sa.Text(), server_default="normal", nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("status", sa.Text(), server_default="active", nullable=False),
        sa.Column("replaces", sa.Text(), nullable=True),
        sa.Column("replaced_by", sa.Text(), nullable=True),
        sa.Column("confirmations", sa.Integer(), server_default="0", nullable=False),
        sa.Column("last_confirmed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("provenance", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("commitment", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("episode", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("version", sa.Integer(), server_default="1", nullable=False),
        sa.Column("embedding", pgvector.sqlalchemy.VECTOR(), nullable=True),
        sa.Column(
            "search",
            postgresql.TSVECTOR(),
            sa.Computed("to_tsvector('simple'::regconfig, text)", persisted=True),
            nullable=True,
        ),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.ForeignKeyConstraint(
            ["org_id", "index_id"],
            ["indexes.org_id", "indexes.id"],
            name=op.f("fk_memory_records_org_id_indexes"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("org_id", "id", name=op.f("pk_memory_records")),
    )
    op.create_index(
        "ix_memory_records_embedding_hnsw_1024",
        "memory_records",
        [sa.literal_column("(embedding::vector(1024)) vector_cosine_ops")],
        unique=False,
        postgresql_using="hnsw",
        postgresql_where=sa.text("vector_dims(embedding) = 1024"),
    )
    op.create_index(
        "ix_memory_records_embedding_hnsw_1536",
        "memory_records",
        [sa.literal_column("(embedding::vector(1536)) vector_cosine_ops")],
        unique=False,
        postgresql_using="hnsw",
        postgresql_where=sa.text("vector_dims(embedding) = 1536"),
    )
    op.create_index(
        "ix_memory_records_embedding_hnsw_256",
        "memory_records",
        [sa.literal_column("(embedding::vector(256)) vector_cosine_ops")],
        unique=False,
        postgresql_using="hnsw",
        postgresql_where=sa.text("vector_dims(embedding) = 256"),
    )
    op.create_index(
        "ix_memory_records_embedding_hnsw_384",
        "memory_records",
        [sa.literal_column("(embedding::vector(384)) vector_cosine_ops")],
        unique=False,
        postgresql_using="hnsw",
        postgresql_where=sa.text("vector_dims(embedding) = 384"),
    )
    op.create_index(
        "ix_memory_records_embedding_hnsw_512",
        "memory_records",
        [sa.literal_column("(embedding::vector(512)) vector_cosine_ops")],
        unique=False,
        postgresql_using="hnsw",
        postgresql_where=sa.text("vector_dims(embedding) = 512"),
    )
    op.create_index(
        "ix_memory_records_embedding_hnsw_768",
        "memory_records",
        [sa.literal_column("(embedding::vector(768)) vector_cosine_ops")],
        unique=False,
        postgresql_using="hnsw",
        postgresql_where=sa.text("vector_dims(embedding) = 768"),
    )
    op.create_index(
        "ix_memory_records_org_id_expires_at",
        "memory_records",
        ["org_id", "expires_at"],
        unique=False,
        postgresql_where=sa.text("expires_at IS NOT NULL"),
    )
    op.create_index(
        "ix_memory_records_org_id_index_id_norm_hash",
        "memory_records",
        ["org_id", "index_id", "norm_hash"],
        unique=False,
    )
    op.create_index(
        "ix_memory_records_org_id_index_id_type_updated_at",
        "memory_records",
        ["org_id", "index_id", "type", "updated_at"],
        unique=False,
    )
    op.create_index(
        "ix_memory_records_org_id_subject_index_id", "memory_records", ["org_id", "subject", "index_id"], unique=False
    )
    op.create_index("ix_memory_records_search", "memory_records", ["search"], unique=False, postgresql_using="gin")
    op.create_index("ix_memory_records_tags", "memory_records", ["tags"], unique=False, postgresql_using="gin")
    op.create_index(
        "uq_memory_records_org_id_index_id_subject_type_key",
        "memory_records",
        ["org_id", "index_id", "subject", "type", "key"],
        unique=True,
        postgresql_where=sa.text("key IS NOT NULL"),
        postgresql_nulls_not_distinct=True,
    )
    op.create_table(
        "memory_versions",
        sa.Column("org_id", sa.Text(), nullable=False),
        sa.Column("record_id", sa.Text(), nullable=False),
        sa.Column("version", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("action", sa.Text(), nullable=False),
        sa.Column("actor_type", sa.Text(), nullable=False),
        sa.Column("actor_id", sa.Text(), nullable=True),
        sa.Column("partner_id", sa.Text(), nullable=True),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("metadata", postgresql.JSONB(astext_type=sa.Text()), server_default="{}", nullable=False),
        sa.Column("labels", postgresql.JSONB(astext_type=sa.Text()), server_default="{}", nullable=False),
        sa.Column("confidence", sa.Double(), nullable=False),
        sa.Column("tags", postgresql.ARRAY(sa.Text()), server_default="{}", nullable=False),
        sa.Column("priority", sa.Text(), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("verified", sa.Boolean(), nullable=False),
        sa.Column("commitment", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.ForeignKeyConstraint(
            ["org_id", "record_id"],
            ["memory_records.org_id", "memory_records.id"],
            name=op.f("fk_memory_versions_org_id_memory_records"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("org_id", "record_id", "version", name=op.f("pk_memory_versions")),
    )


def downgrade() -> None:
    op.drop_table("memory_versions")
    op.drop_index(
        "uq_memory_records_org_id_index_id_subject_type_key",
        table_name="memory_records",
        postgresql_where=sa.text("key IS NOT NULL"),
        postgresql_nulls_not_distinct=True,
    )
    op.drop_index("ix_memory_records_tags", table_name="memory_records", postgresql_using="gin")
    op.drop_index("ix_memory_records_search", table_name="memory_records", postgresql_using="gin")
    op.drop_index("ix_memory_records_org_id_subject_index_id", table_name="memory_records")
    op.drop_index("ix_memory_records_org_id_index_id_type_updated_at", table_name="memory_records")
    op.drop_index("ix_memory_records_org_id_index_id_norm_hash", table_name="memory_records")
    op.drop_index(
        "ix_memory_records_org_id_expires_at",
        table_name="memory_records",
        postgresql_where=sa.text("expires_at IS NOT NULL"),
    )
    op.drop_index(
        "ix_memory_records_embedding_hnsw_768",
        table_name="memory_records",
        postgresql_using="hnsw",
        postgresql_where=sa.text("vector_dims(embedding) = 768"),
    )
    op.drop_index(
        "ix_memory_records_embedding_hnsw_512",
        table_name="memory_records",
        postgresql_using="hnsw",
        postgresql_where=sa.text("vector_dims(embedding) = 512"),
    )
    op.drop_index(
        "ix_memory_records_embedding_hnsw_384",
        table_name="memory_records",
        postgresql_using="hnsw",
        postgresql_where=sa.text("vector_dims(embedding) = 384"),
    )
    op.drop_index(
        "ix_memory_records_embedding_hnsw_256",
        table_name="memory_records",
        postgresql_using="hnsw",
        postgresql_where=sa.text("vector_dims(embedding) = 256"),
    )
    op.drop_index(
        "ix_memory_records_embedding_hnsw_1536",
        table_name="memory_records",
        postgresql_using="hnsw",
        postgresql_where=sa.text("vector_dims(embedding) = 1536"),
    )
    op.drop_index(
        "ix_memory_records_embedding_hnsw_1024",
        table_name="memory_records",
        postgresql_using="hnsw",
        postgresql_where=sa.text("vector_dims(embedding) = 1024"),
    )
    op.drop_table("memory_records")
    op.drop_table("erased_subjects")
