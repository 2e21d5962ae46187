"""turns: model registry, responses, usage

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-03 07:10:17.926450
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = '0008'
down_revision = '0007'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('models',
    sa.Column('org_id', sa.Text(), nullable=False),
    sa.Column('id', sa.Text(), nullable=False),
    sa.Column('provider', sa.Text(), nullable=False),
    sa.Column('base_url', sa.Text(), nullable=True),
    sa.Column('api_key_env', sa.Text(), nullable=True),
    sa.Column('model', sa.Text(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.PrimaryKeyConstraint('org_id', 'id', name=op.f('pk_models'))
    )
    op.create_table('responses',
    sa.Column('org_id', sa.Text(), nullable=False),
    sa.Column('id', sa.Text(), nullable=False),
    sa.Column('thread_id', sa.Text(), nullable=True),
    sa.Column('key_id', sa.Text(), nullable=True),
    sa.Column('subject', sa.Text(), nullable=True),
    sa.Column('agent_id', sa.Text(), nullable=True),
    sa.Column('agent_version', sa.Integer(), nullable=True),
    sa.Column('model', sa.Text(), nullable=True),
    sa.Column('status', sa.Text(), nullable=False),
    sa.Column('output', postgresql.JSONB(astext_type=sa.Text()), nullable=True),
    sa.Column('usage', postgresql.JSONB(astext_type=sa.Text()), server_default='{}', nullable=False),
    sa.Column('error', postgresql.JSONB(astext_type=sa.Text()), nullable=True),
    sa.Column('trace', postgresql.JSONB(astext_type=sa.Text()), nullable=True),
    sa.Column('metadata', postgresql.JSONB(astext_type=sa.Text()), nullable=True),
    sa.Column('idempotency_owner', sa.Text(), nullable=True),
    sa.Column('idempotency_key', sa.Text(), nullable=True),
    sa.Column('request_digest', sa.Text(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.Column('completed_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['org_id'], ['orgs.id'], name=op.f('fk_responses_org_id_orgs'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('org_id', 'id', name=op.f('pk_responses'))
    )
    op.create_index('ix_responses_org_id_thread_id', 'responses', ['org_id', 'thread_id'], unique=False)
    op.create_index('uq_responses_org_id_idempotency', 'responses', ['org_id', 'idempotency_owner', 'idempotency_key'],
                    unique=True, postgresql_where=sa.text('idempotency_key IS NOT NULL'))
    op.create_table('usage_events',
    sa.Column('org_id', sa.Text(), nullable=False),
    sa.Column('id', sa.BigInteger(), sa.Identity(always=True), nullable=False),
    sa.Column('key_id', sa.Text(), nullable=True),
    sa.Column('response_id', sa.Text(), nullable=True),
    sa.Column('job', sa.Text(), nullable=True),
    sa.Column('model', sa.Text(), nullable=False),
    sa.Column('input_tokens', sa.Integer(), nullable=False),
    sa.Column('output_tokens', sa.Integer(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.ForeignKeyConstraint(['org_id'], ['orgs.id'], name=op.f('fk_usage_events_org_id_orgs'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('org_id', 'id', name=op.f('pk_usage_events'))
    )
    op.create_index('ix_usage_events_org_id_created_at', 'usage_events', ['org_id', 'created_at'], unique=False)
    op.create_index('ix_usage_events_org_id_key_id_created_at', 'usage_events', ['org_id', 'key_id', 'created_at'],
                    unique=False)


def downgrade() -> None:
    op.drop_index('ix_usage_events_org_id_key_id_created_at', table_name='usage_events')
    op.drop_index('ix_usage_events_org_id_created_at', table_name='usage_events')
    op.drop_table('usage_events')
    op.drop_index('uq_responses_org_id_idempotency', table_name='responses')
    op.drop_index('ix_responses_org_id_thread_id', table_name='responses')
    op.drop_table('responses')
    op.drop_table('models')
