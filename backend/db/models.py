"""ORM models of the platform tables. Tenant tables carry org_id first in every key and index (house rule 5)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

from sqlalchemy import (
    BigInteger,
    DateTime,
    ForeignKeyConstraint,
    Index,
    MetaData,
    Table,
    Text,
    UniqueConstraint,
    func,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

NAMING = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)
    type_annotation_map = {dict[str, Any]: JSONB, list[Any]: JSONB, datetime: DateTime(timezone=True)}


def _now() -> Any:
    return mapped_column(DateTime(timezone=True), nullable=False, server_default=func.now())


class Org(Base):
    """An organisation (tenant). Control-plane table: small, a reference table when distributed."""

    __tablename__ = "orgs"
    id: Mapped[str] = mapped_column(Text, primary_key=True)
    name: Mapped[str] = mapped_column(Text, nullable=False, unique=True)
    timezone: Mapped[str] = mapped_column(Text, nullable=False, server_default="UTC")
    capabilities: Mapped[list[Any]] = mapped_column(JSONB, nullable=False, server_default="[]")
    improvements: Mapped[dict[str, Any]] = mapped_column(JSONB, nullable=False, server_default='{"enabled": false}')
    memory_decay: Mapped[dict[str, Any]] = mapped_column(JSONB, nullable=False, server_default="{}")
    helper_model: Mapped[dict[str, Any] | None] = mapped_column(JSONB, nullable=True)
    policy: Mapped[dict[str, Any]] = mapped_column(JSONB, nullable=False, server_default='{"rules": []}')
    vocabulary: Mapped[dict[str, Any] | None] = mapped_column(JSONB, nullable=True)
    # EXT-8: `monthly_model_tokens` (null: no cap); extraction parks its windows once the month's usage reaches it.
    limits: Mapped[dict[str, Any]] = mapped_column(JSONB, nullable=False,
                                                   server_default='{"monthly_model_tokens": null}')
    created_at: Mapped[datetime] = _now()
    updated_at: Mapped[datetime] = _now()


class Admin(Base):
    """A dashboard user: `admin` of one organisation or `operator` of all."""

    __tablename__ = "admins"
    id: Mapped[str] = mapped_column(Text, primary_key=True)
    email: Mapped[str] = mapped_column(Text, nullable=False, unique=True)
    password_hash: Mapped[str] = mapped_column(Text, nullable=False)
    role: Mapped[str] = mapped_column(Text, nullable=False)
    org_id: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = _now()
    __table_args__ = (ForeignKeyConstraint(["org_id"], ["orgs.id"], ondelete="CASCADE"),)


class AdminToken(Base):
    """A short-lived bearer token of an administrator; only its hash is kept."""

    __tablename__ = "admin_tokens"
    token_hash: Mapped[str] = mapped_column(Text, primary_key=True)
    admin_id: Mapped[str] = mapped_column(Text, nullable=False)
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    created_at: Mapped[datetime] = _now()
    __table_args__ = (
        ForeignKeyConstraint(["admin_id"], ["admins.id"], ondelete="CASCADE"),
        Index("ix_admin_tokens_admin_id", "admin_id"),
    )


class ApiKey(Base):
    """An API key. Looked up by secret hash before its organisation is known, so it is a control-plane table."""

    __tablename__ = "api_keys"
    id: Mapped[str] = mapped_column(Text, primary_key=True)
    org_id: Mapped[str] = mapped_column(Text, nullable=False)
    name: Mapped[str] = mapped_column(Text, nullable=False)
    secret_hash: Mapped[str] = mapped_column(Text, nullable=False, unique=True)
    capabilities: Mapped[list[Any]] = mapped_column(JSONB, nullable=False)
    memory: Mapped[dict[str, Any]] = mapped_column(JSONB, nullable=False, server_default="{}")
    policy: Mapped[dict[str, Any]] = mapped_column(JSONB, nullable=False)
    privacy: Mapped[dict[str, Any] | None] = mapped_column(JSONB, nullable=True)
    expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    # When a request last used it (as key or through a subject token), to the minute (migration 0011).
    last_used_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    # Who made it (key | admin | system): a management key may not revoke, delete or change an administrator's.
    created_by_type: Mapped[str] = mapped_column(Text, nullable=False, server_default="admin")
    created_by_id: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = _now()
    updated_at: Mapped[datetime] = _now()
    __table_args__ = (
        ForeignKeyConstraint(["org_id"], ["orgs.id"], ondelete="CASCADE"),
        Index("ix_api_keys_org_id_id", "org_id", "id"),
    )


class KeyAudit(Base):
    """The key audit trail (PLT-5): a snapshot of the key after every lifecycle change."""

    __tablename__ = "key_audit"
    org_id: Mapped[str] = mapped_column(Text, primary_key=True)
    id: Mapped[str] = mapped_column(Text, primary_key=True)
    key_id: Mapped[str] = mapped_column(Text, nullable=False)
    at: Mapped[datetime] = _now()
    action: Mapped[str] = mapped_column(Text, nullable=False)
    actor: Mapped[dict[str, Any]] = mapped_column(JSONB, nullable=False)
    snapshot: Mapped[dict[str, Any]] = mapped_column(JSONB, nullable=False)
    __table_args__ = (Index("ix_key_audit_org_id_key_id_at", "org_id", "key_id", "at"),)


class KnowledgeIndex(Base):
    """A knowledge index; its memory records and settings form a store."""

    __tablename__ = "indexes"
    org_id: Mapped[str] = mapped_column(Text, primary_key=True)
    id: Mapped[str] = mapped_column(Text, primary_key=True)
    name: Mapped[str] = mapped_column(Text, nullable=False)
    embedding: Mapped[dict[str, Any] | None] = mapped_column(JSONB, nullable=True)
    created_at: Mapped[datetime] = _now()
    __table_args__ = (
        ForeignKeyConstraint(["org_id"], ["orgs.id"], ondelete="CASCADE"),
        UniqueConstraint("org_id", "name"),
    )


class AuditEvent(Base):
    """Append-only audit trail (PLT-12), hash-chained per organisation by `seq`."""

    __tablename__ = "audit_events"
    org_id: Mapped[str] = mapped_column(Text, primary_key=True)
    seq: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    id: Mapped[str] = mapped_column(Text, nullable=False)
    at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    actor_type: Mapped[str] = mapped_column(Text, nullable=False)
    actor_id: Mapped[str | None] = mapped_column(Text, nullable=True)
    subject_hash: Mapped[str | None] = mapped_column(Text, nullable=True)
    action: Mapped[str] = mapped_column(Text, nullable=False)
    object_type: Mapped[str | None] = mapped_column(Text, nullable=True)
    object_id: Mapped[str | None] = mapped_column(Text, nullable=True)
    outcome: Mapped[str] = mapped_column(Text, nullable=False)
    detail: Mapped[dict[str, Any]] = mapped_column(JSONB, nullable=False, server_default="{}")
    prev_hash: Mapped[str] = mapped_column(Text, nullable=False)
    hash: Mapped[str] = mapped_column(Text, nullable=False)
    __table_args__ = (
        UniqueConstraint("org_id", "id"),
        Index("ix_audit_events_org_id_at", "org_id", "at"),
        Index("ix_audit_events_org_id_action_seq", "org_id", "action", "seq"),
        Index("ix_audit_events_org_id_object_id_seq", "org_id", "object_id", "seq"),
    )




def table_of(model: type[Base]) -> Table:
    """The Core table of a mapped class, typed for insert/update/delete."""
    return cast(Table, model.__table__)

