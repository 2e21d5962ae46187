"""keys: who created each key (a management key may not revoke, delete or change an administrator's keys)

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-02 18:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("api_keys", sa.Column("created_by_type", sa.Text(), server_default="admin", nullable=False))
    op.add_column("api_keys", sa.Column("created_by_id", sa.Text(), nullable=True))
    # The key audit trail names each key's creator while its entry is kept; older keys count as an
    # administrator's (the safe side: a management key may then not touch them).
    op.execute("UPDATE api_keys k SET created_by_type = a.actor ->> 'type', created_by_id = a.actor ->> 'id' "
               "FROM key_audit a WHERE a.org_id = k.org_id AND a.key_id = k.id AND a.action = 'created' "
               "AND a.actor ->> 'type' IS NOT NULL")


def downgrade() -> None:
    op.drop_column("api_keys", "created_by_id")
    op.drop_column("api_keys", "created_by_type")
