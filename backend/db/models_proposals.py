"""ORM models of the maintenance pass (EXT-14 … EXT-16): promotion proposals with the records they rest on, and
which episodes a maintenance lesson was drawn from. Keys and indexes start with org_id (house rule 5)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import DateTime, ForeignKeyConstraint, Index, Text, func
from sqlalchemy.orm import Mapped, mapped_column

from backend.db.models import Base


def _now() -> Any:
    return mapped_column(DateTime(timezone=True), nullable=False, server_default=func.now())


class MemoryProposal(Base):
    """A shared record the analysis proposes (EXT-15). One per store and normalised text, whatever became of it,
    so a dismissed proposal is never made again."""

    __tablename__ = "memory_proposals"
    org_id: Mapped[str] = mapped_column(Text, primary_key=True)
    id: Mapped[str] = mapped_column(Text, primary_key=True)
    index_id: Mapped[str] = mapped_column(Text, nullable=False)
    type: Mapped[str] = mapped_column(Text, nullable=False)
    text: Mapped[str] = mapped_column(Text, nullable=False)
    norm_hash: Mapped[str] = mapped_column(Text, nullable=False)
    basis: Mapped[str] = mapped_column(Text, nullable=False)  # same_text | similar | general
    status: Mapped[str] = mapped_column(Text, nullable=False, server_default="open")  # open | applied | dismissed
    record_id: Mapped[str | None] = mapped_column(Text, nullable=True)  # the shared record applying wrote
    decided_by_type: Mapped[str | None] = mapped_column(Text, nullable=True)
    decided_by_id: Mapped[str | None] = mapped_column(Text, nullable=True)
    decided_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    created_at: Mapped[datetime] = _now()
    __table_args__ = (
        ForeignKeyConstraint(["org_id", "index_id"], ["indexes.org_id", "indexes.id"], ondelete="CASCADE"),
        Index("uq_memory_proposals_org_id_index_id_norm_hash", "org_id", "index_id", "norm_hash", unique=True),
        Index("ix_memory_proposals_org_id_status_id", "org_id", "status", "id"),
    )


class ProposalEvidence(Base):
    """A person's record a proposal rests on; it goes with the record (and the proposal, when it rested on one
    person's records alone, goes with her erasure, MEM-19)."""

    __tablename__ = "memory_proposal_evidence"
    org_id: Mapped[str] = mapped_column(Text, primary_key=True)
    proposal_id: Mapped[str] = mapped_column(Text, primary_key=True)
    record_id: Mapped[str] = mapped_column(Text, primary_key=True)
    subject: Mapped[str] = mapped_column(Text, nullable=False)
    __table_args__ = (
        ForeignKeyConstraint(["org_id", "proposal_id"], ["memory_proposals.org_id", "memory_proposals.id"],
                             ondelete="CASCADE"),
        ForeignKeyConstraint(["org_id", "record_id"], ["memory_records.org_id", "memory_records.id"],
                             ondelete="CASCADE"),
        Index("ix_memory_proposal_evidence_org_id_record_id", "org_id", "record_id"),
        Index("ix_memory_proposal_evidence_org_id_subject", "org_id", "subject"),
    )


class LessonSource(Base):
    """An episode a maintenance lesson was drawn from (EXT-14): used once, never again."""

    __tablename__ = "lesson_sources"
    org_id: Mapped[str] = mapped_column(Text, primary_key=True)
    episode_id: Mapped[str] = mapped_column(Text, primary_key=True)
    lesson_id: Mapped[str] = mapped_column(Text, nullable=False)
    __table_args__ = (
        ForeignKeyConstraint(["org_id", "episode_id"], ["memory_records.org_id", "memory_records.id"],
                             ondelete="CASCADE"),
    )
