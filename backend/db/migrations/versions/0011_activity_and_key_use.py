"""memory_versions: an index on (org_id, at), so the organisation's record changes read newest first and the
versions written per day read a time range instead of every version of the organisation; api_keys: when each key
was last used (to the minute)

Revision ID: 0011
Revises: 0007
Create Date: 2026-12-10 09:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_memory_versions_org_id_at", "memory_versions", ["org_id", "at"])
    op.add_column("api_keys", sa.Column("last_used_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    op.drop_column("api_keys", "last_used_at")
    op.drop_index("ix_memory_versions_org_id_at", table_name="memory_versions")
