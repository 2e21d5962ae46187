"""memory search: an HNSW index per dimension over the shared records alone

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-03 21:20:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

DIMENSIONS = (256, 384, 512, 768, 1024, 1536)  # those migration 0002 indexes


def upgrade() -> None:
    # pgvector 0.6 filters an HNSW scan's rows only after the scan: the index over the whole store offers a person
    # the nearest records of everybody, and most are not hers to read. A person reads her own records (ranked
    # exactly through the owner index) and the shared ones; over the shared ones alone the scan loses nothing to
    # the filter, so her search finds what an exact one would (bench/results/vector.md).
    for dims in DIMENSIONS:
        op.create_index(f"ix_memory_records_shared_embedding_hnsw_{dims}", "memory_records",
                        [sa.literal_column(f"(embedding::vector({dims})) vector_cosine_ops")], unique=False,
                        postgresql_using="hnsw",
                        postgresql_where=sa.text(f"vector_dims(embedding) = {dims} AND subject IS NULL"))


def downgrade() -> None:
    for dims in DIMENSIONS:
        op.drop_index(f"ix_memory_records_shared_embedding_hnsw_{dims}", table_name="memory_records")
