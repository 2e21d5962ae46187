"""ORM models of agents and their immutable versions (TRN-5). Every key and index starts with org_id (house
rule 5)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import DateTime, ForeignKeyConstraint, Index, Integer, Text, func
from sqlalchemy import text as sql_text
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from backend.db.models import Base


def _now() -> Any:
    return mapped_column(DateTime(timezone=True), nullable=False, server_default=func.now())


class Agent(Base):
    """An agent: its id, its current version and whether it was deleted. What it is lives in its versions.

    A deleted agent keeps its row and versions (responses and the audit trail name them); it is gone from every
    route and from turns, and its name is free again.
    """

    __tablename__ = "agents"
    org_id: Mapped[str] = mapped_column(Text, primary_key=True)
    id: Mapped[str] = mapped_column(Text, primary_key=True)
    name: Mapped[str] = mapped_column(Text, nullable=False)  # the current version's, for the uniqueness rule
    version: Mapped[int] = mapped_column(Integer, nullable=False)
    created_at: Mapped[datetime] = _now()
    updated_at: Mapped[datetime] = _now()
    deleted_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    __table_args__ = (
        ForeignKeyConstraint(["org_id"], ["orgs.id"], ondelete="CASCADE"),
        Index("ix_agents_org_id_name", "org_id", "name", unique=True, postgresql_where=sql_text("deleted_at IS NULL")),
    )


class AgentVersionRow(Base):
    """One version of an agent, never changed once written."""

    __tablename__ = "agent_versions"
    org_id: Mapped[str] = mapped_column(Text, primary_key=True)
    agent_id: Mapped[str] = mapped_column(Text, primary_key=True)
    version: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    name: Mapped[str] = mapped_column(Text, nullable=False)
    model: Mapped[str] = mapped_column(Text, nullable=False)
    instructions: Mapped[str] = mapped_column(Text, nullable=False)
    memory_injection: Mapped[dict[str, Any] | None] = mapped_column(JSONB, nullable=True)
    working_state_schema: Mapped[dict[str, Any] | None] = mapped_column(JSONB, nullable=True)
    compaction: Mapped[dict[str, Any] | None] = mapped_column(JSONB, nullable=True)
    created_at: Mapped[datetime] = _now()
    created_by_type: Mapped[str] = mapped_column(Text, nullable=False)
    created_by_id: Mapped[str | None] = mapped_column(Text, nullable=True)
    __table_args__ = (
        ForeignKeyConstraint(["org_id", "agent_id"], ["agents.org_id", "agents.id"], ondelete="CASCADE"),
    )
