"""memory_versions: an index on (org_id, at), so the organisation's record changes read newest first and the
versions written per day read a time range instead of every version of the organisation

Revision ID: 0011
Revises: 0007
Create Date: 2026-12-10 09:00:00
"""

from __future__ import annotations

from alembic import op

revision = "0011"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_memory_versions_org_id_at", "memory_versions", ["org_id", "at"])


def downgrade() -> None:
    op.drop_index("ix_memory_versions_org_id_at", table_name="memory_versions")
