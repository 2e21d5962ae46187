"""platform foundation

Revision ID: 0001
Revises:
Create Date: 2026-12-02 10:16:08.750053
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


# The audit trail is append-only: the database itself refuses to change or remove its rows (PLT-12).
AUDIT_GUARD = """
CREATE FUNCTION coremem_refuse_audit_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'audit_events is append-only: % is refused', TG_OP USING ERRCODE = 'insufficient_privilege';
END;
$$;
CREATE TRIGGER audit_events_append_only BEFORE UPDATE OR DELETE ON audit_events
    FOR EACH ROW EXECUTE FUNCTION coremem_refuse_audit_change();
CREATE TRIGGER audit_events_no_truncate BEFORE TRUNCATE ON audit_events
    FOR EACH STATEMENT EXECUTE FUNCTION coremem_refuse_audit_change();
"""


def upgrade() -> None:
    op.execute("CREATE EXTENSION IF NOT EXISTS vector")
    op.create_table(
        "audit_events",
        sa.Column("org_id", sa.Text(), nullable=False),
        sa.Column("seq", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("actor_type", sa.Text(), nullable=False),
        sa.Column("actor_id", sa.Text(), nullable=True),
        sa.Column("subject_hash", sa.Text(), nullable=True),
        sa.Column("action", sa.Text(), nullable=False),
        sa.Column("object_type", sa.Text(), nullable=True),
        sa.Column("object_id", sa.Text(), nullable=True),
        sa.Column("outcome", sa.Text(), nullable=False),
        sa.Column("detail", postgresql.JSONB(astext_type=sa.Text()), server_default="{}", nullable=False),
        sa.Column("prev_hash", sa.Text(), nullable=False),
        sa.Column("hash", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("org_id", "seq", name=op.f("pk_audit_events")),
        sa.UniqueConstraint("org_id", "id", name=op.f("uq_audit_events_org_id_id")),
    )
    op.create_index("ix_audit_events_org_id_action_seq", "audit_events", ["org_id", "action", "seq"], unique=False)
    op.create_index("ix_audit_events_org_id_at", "audit_events", ["org_id", "at"], unique=False)
    op.create_index(
        "ix_audit_events_org_id_object_id_seq", "audit_events", ["org_id", "object_id", "seq"], unique=False
    )
    op.create_table(
        "key_audit",
        sa.Column("org_id", sa.Text(), nullable=False),
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("key_id", sa.Text(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("action", sa.Text(), nullable=False),
        sa.Column("actor", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("snapshot", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.PrimaryKeyConstraint("org_id", "id", name=op.f("pk_key_audit")),
    )
    op.create_index("ix_key_audit_org_id_key_id_at", "key_audit", ["org_id", "key_id", "at"], unique=False)
    op.create_table(
        "orgs",
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("timezone", sa.Text(), server_default="UTC", nullable=False),
        sa.Column("capabilities", postgresql.JSONB(astext_type=sa.Text()), server_default="[]", nullable=False),
        sa.Column(
            "improvements", postgresql.JSONB(astext_type=sa.Text()), server_default='{"enabled": false}', nullable=False
        ),
        sa.Column("memory_decay", postgresql.JSONB(astext_type=sa.Text()), server_default="{}", nullable=False),
        sa.Column("helper_model", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("policy", postgresql.JSONB(astext_type=sa.Text()), server_default='{"rules": []}', nullable=False),
        sa.Column("vocabulary", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_orgs")),
        sa.UniqueConstraint("name", name=op.f("uq_orgs_name")),
    )
    op.create_table(
        "admins",
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("email", sa.Text(), nullable=False),
        sa.Column("password_hash", sa.Text(), nullable=False),
        sa.Column("role", sa.Text(), nullable=False),
        sa.Column("org_id", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.ForeignKeyConstraint(["org_id"], ["orgs.id"], name=op.f("fk_admins_org_id_orgs"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_admins")),
        sa.UniqueConstraint("email", name=op.f("uq_admins_email")),
    )
    op.create_table(
        "api_keys",
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("org_id", sa.Text(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("secret_hash", sa.Text(), nullable=False),
        sa.Column("capabilities", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("memory", postgresql.JSONB(astext_type=sa.Text()), server_default="{}", nullable=False),
        sa.Column("policy", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("privacy", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.ForeignKeyConstraint(["org_id"], ["orgs.id"], name=op.f("fk_api_keys_org_id_orgs"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_keys")),
        sa.UniqueConstraint("secret_hash", name=op.f("uq_api_keys_secret_hash")),
    )
    op.create_index("ix_api_keys_org_id_id", "api_keys", ["org_id", "id"], unique=False)
    op.create_table(
        "indexes",
        sa.Column("org_id", sa.Text(), nullable=False),
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("embedding", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.ForeignKeyConstraint(["org_id"], ["orgs.id"], name=op.f("fk_indexes_org_id_orgs"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("org_id", "id", name=op.f("pk_indexes")),
        sa.UniqueConstraint("org_id", "name", name=op.f("uq_indexes_org_id_name")),
    )
    op.create_table(
        "admin_tokens",
        sa.Column("token_hash", sa.Text(), nullable=False),
        sa.Column("admin_id", sa.Text(), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.ForeignKeyConstraint(
            ["admin_id"], ["admins.id"], name=op.f("fk_admin_tokens_admin_id_admins"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("token_hash", name=op.f("pk_admin_tokens")),
    )
    op.create_index("ix_admin_tokens_admin_id", "admin_tokens", ["admin_id"], unique=False)
    op.execute(AUDIT_GUARD)


def downgrade() -> None:
    op.execute("DROP TRIGGER IF EXISTS audit_events_no_truncate ON audit_events")
    op.execute("DROP TRIGGER IF EXISTS audit_events_append_only ON audit_events")
    op.execute("DROP FUNCTION IF EXISTS coremem_refuse_audit_change()")
    op.drop_index("ix_admin_tokens_admin_id", table_name="admin_tokens")
    op.drop_table("admin_tokens")
    op.drop_table("indexes")
    op.drop_index("ix_api_keys_org_id_id", table_name="api_keys")
    op.drop_table("api_keys")
    op.drop_table("admins")
    op.drop_table("orgs")
    op.drop_index("ix_key_audit_org_id_key_id_at", table_name="key_audit")
    op.drop_table("key_audit")
    op.drop_index("ix_audit_events_org_id_object_id_seq", table_name="audit_events")
    op.drop_index("ix_audit_events_org_id_at", table_name="audit_events")
    op.drop_index("ix_audit_events_org_id_action_seq", table_name="audit_events")
    op.drop_table("audit_events")
