"""store settings

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-02 10:43:35.873912
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('store_settings',
    sa.Column('org_id', sa.Text(), nullable=False),
    sa.Column('index_id', sa.Text(), nullable=False),
    sa.Column('sections', postgresql.JSONB(astext_type=sa.Text()), server_default='{}', nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.Column('last_maintenance_run_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['org_id', 'index_id'], ['indexes.org_id', 'indexes.id'],
                            name=op.f('fk_store_settings_org_id_indexes'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('org_id', 'index_id', name=op.f('pk_store_settings'))
    )


def downgrade() -> None:
    op.drop_table('store_settings')
