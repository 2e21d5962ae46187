"""injection previewer: a partial index on records that are not active

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-02 11:45:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # The previewer lists replaced records as left out; this keeps that a small index range at a million records.
    op.create_index("ix_memory_records_org_id_index_id_not_active", "memory_records", ["org_id", "index_id"],
                    unique=False, postgresql_where=sa.text("status <> 'active'"))


def downgrade() -> None:
    op.drop_index("ix_memory_records_org_id_index_id_not_active", table_name="memory_records",
                  postgresql_where=sa.text("status <> 'active'"))
