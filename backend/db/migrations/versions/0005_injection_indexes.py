"""injection: partial indexes for the builder's sections and the previewer's replaced records

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


    # The builder's sections (INJ-13): ranked index ranges instead of sorting a whole store's shared records.
    op.create_index("ix_memory_records_org_id_index_id_subject_confidence", "memory_records",
                    ["org_id", "index_id", "subject", "confidence"], unique=False,
                    postgresql_where=sa.text("status = 'active'"))
    op.create_index("ix_memory_records_open_commitments", "memory_records", ["org_id", "index_id", "subject"],
                    unique=False, postgresql_where=sa.text(
                        "type = 'commitment' AND status = 'active' AND (commitment ->> 'status') = 'open'"))
    op.create_index("ix_memory_records_behaviour", "memory_records", ["org_id", "index_id", "subject", "created_at"],
                    unique=False, postgresql_where=sa.text("type = 'behaviour' AND status = 'active'"))


def downgrade() -> None:
    op.drop_index("ix_memory_records_behaviour", table_name="memory_records")
    op.drop_index("ix_memory_records_open_commitments", table_name="memory_records")
    op.drop_index("ix_memory_records_org_id_index_id_subject_confidence", table_name="memory_records")
    op.drop_index("ix_memory_records_org_id_index_id_not_active", table_name="memory_records",
                  postgresql_where=sa.text("status <> 'active'"))
