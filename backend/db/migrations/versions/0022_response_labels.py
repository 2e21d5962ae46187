"""responses: the labels of their thread when the turn was accepted (THR-5)

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-07 01:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("responses", sa.Column("labels", JSONB(), nullable=True))


def downgrade() -> None:
    op.drop_column("responses", "labels")
