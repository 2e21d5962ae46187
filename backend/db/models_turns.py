"""ORM models of turns (06-turns.md): the model registry (EXT-1), responses (TRN-1, TRN-7, TRN-8) and usage
(PLT-18). Every key and index starts with org_id (house rule 5)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, DateTime, ForeignKeyConstraint, Identity, Index, Integer, Text, func
from sqlalchemy import text as sql_text
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from backend.db.models import Base


def _now() -> Any:
    return mapped_column(DateTime(timezone=True), nullable=False, server_default=func.now())


class OfferedModel(Base):
    """A chat model offered to one organisation, or to every one when `org_id` is '' (EXT-1)."""

    __tablename__ = "models"
    org_id: Mapped[str] = mapped_column(Text, primary_key=True)
    id: Mapped[str] = mapped_column(Text, primary_key=True)
    provider: Mapped[str] = mapped_column(Text, nullable=False)
    base_url: Mapped[str | None] = mapped_column(Text, nullable=True)
    api_key_env: Mapped[str | None] = mapped_column(Text, nullable=True)
    model: Mapped[str] = mapped_column(Text, nullable=False)  # the name sent to the server
    created_at: Mapped[datetime] = _now()


class Response(Base):
    """One turn. After its thread is deleted only id, status and usage stay (THR-6, MEM-19)."""

    __tablename__ = "responses"
    org_id: Mapped[str] = mapped_column(Text, primary_key=True)
    id: Mapped[str] = mapped_column(Text, primary_key=True)
    thread_id: Mapped[str | None] = mapped_column(Text, nullable=True)
    key_id: Mapped[str | None] = mapped_column(Text, nullable=True)
    subject: Mapped[str | None] = mapped_column(Text, nullable=True)
    agent_id: Mapped[str | None] = mapped_column(Text, nullable=True)
    agent_version: Mapped[int | None] = mapped_column(Integer, nullable=True)
    model: Mapped[str | None] = mapped_column(Text, nullable=True)
    status: Mapped[str] = mapped_column(Text, nullable=False)  # in_progress | completed | failed
    output: Mapped[list[Any] | None] = mapped_column(JSONB(none_as_null=True), nullable=True)
    usage: Mapped[dict[str, Any]] = mapped_column(JSONB, nullable=False, server_default="{}")
    error: Mapped[dict[str, Any] | None] = mapped_column(JSONB(none_as_null=True), nullable=True)
    trace: Mapped[dict[str, Any] | None] = mapped_column(JSONB(none_as_null=True), nullable=True)
    metadata_: Mapped[dict[str, Any] | None] = mapped_column("metadata", JSONB(none_as_null=True), nullable=True)
    # THR-5: the labels of its thread when the turn was accepted (access goes by the thread's labels as they are).
    labels: Mapped[dict[str, Any] | None] = mapped_column(JSONB(none_as_null=True), nullable=True)
    # TRN-8: the caller's Idempotency-Key (per key or administrator) and a digest of the body it came with.
    idempotency_owner: Mapped[str | None] = mapped_column(Text, nullable=True)
    idempotency_key: Mapped[str | None] = mapped_column(Text, nullable=True)
    request_digest: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = _now()
    completed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    __table_args__ = (
        ForeignKeyConstraint(["org_id"], ["orgs.id"], ondelete="CASCADE"),
        Index("ix_responses_org_id_thread_id", "org_id", "thread_id"),
        Index("uq_responses_org_id_idempotency", "org_id", "idempotency_owner", "idempotency_key", unique=True,
              postgresql_where=sql_text("idempotency_key IS NOT NULL")),
    )


class UsageEvent(Base):
    """Model tokens spent, per organisation, key, response or background job (PLT-18). Never deleted with
    the thread or records that caused them."""

    __tablename__ = "usage_events"
    org_id: Mapped[str] = mapped_column(Text, primary_key=True)
    id: Mapped[int] = mapped_column(BigInteger, Identity(always=True), primary_key=True)
    key_id: Mapped[str | None] = mapped_column(Text, nullable=True)
    response_id: Mapped[str | None] = mapped_column(Text, nullable=True)
    job: Mapped[str | None] = mapped_column(Text, nullable=True)  # compaction | extraction | ...
    model: Mapped[str] = mapped_column(Text, nullable=False)
    input_tokens: Mapped[int] = mapped_column(Integer, nullable=False)
    output_tokens: Mapped[int] = mapped_column(Integer, nullable=False)
    created_at: Mapped[datetime] = _now()
    __table_args__ = (
        ForeignKeyConstraint(["org_id"], ["orgs.id"], ondelete="CASCADE"),
        Index("ix_usage_events_org_id_created_at", "org_id", "created_at"),
        Index("ix_usage_events_org_id_key_id_created_at", "org_id", "key_id", "created_at"),
    )
