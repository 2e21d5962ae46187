"""ORM models of memory records (MEM-1 … MEM-19): records, their versions, and erased people.

Every key and index starts with `org_id` (house rule 5). The embedding column is an untyped pgvector
`vector` because each index chooses its own dimensions; the HNSW indexes are partial expression indexes,
one per common dimension, that a query uses when it casts to the same `vector(d)` (docs/decisions.md).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pgvector.sqlalchemy import Vector
from sqlalchemy import (
    Boolean,
    Computed,
    DateTime,
    Double,
    ForeignKeyConstraint,
    Index,
    Integer,
    Text,
    func,
    literal_column,
)
from sqlalchemy import text as sql_text
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, TSVECTOR
from sqlalchemy.orm import Mapped, mapped_column

from backend.db.models import Base

# Dimensions that get an approximate-nearest-neighbour (HNSW) index; others are searched exactly.
HNSW_DIMENSIONS = (256, 384, 512, 768, 1024, 1536)


def _now() -> Any:
    return mapped_column(DateTime(timezone=True), nullable=False, server_default=func.now())


_OPEN_COMMITMENT = "type = 'commitment' AND status = 'active' AND (commitment ->> 'status') = 'open'"
# coremem_commitment_due (migration 0006): a commitment's due_at as timestamptz, immutable, so indexable.
_COMMITMENT_DUE = sql_text("coremem_commitment_due(commitment)")
# What a section's confidence floor reads besides the key: the type, and the expiry and last update of the decayed
# confidence (injection.repository._confidence_floor).
_FLOOR_READS = ["type", "expires_at", "updated_at"]


def _hnsw(dims: int, *, shared: bool = False) -> Index:
    """The cosine HNSW index of one dimension count, over every record or (migration 0018) the shared ones."""
    return Index(
        f"ix_memory_records_{'shared_' if shared else ''}embedding_hnsw_{dims}",
        literal_column(f"(embedding::vector({dims}))").label("embedding_cast"),
        postgresql_using="hnsw",
        postgresql_ops={"embedding_cast": "vector_cosine_ops"},
        postgresql_where=sql_text(f"vector_dims(embedding) = {dims}" + (" AND subject IS NULL" if shared else "")),
    )


class MemoryRecord(Base):
    """A memory record: owned by one person (`subject`) or shared (`subject` null), in one index."""

    __tablename__ = "memory_records"
    org_id: Mapped[str] = mapped_column(Text, primary_key=True)
    id: Mapped[str] = mapped_column(Text, primary_key=True)
    index_id: Mapped[str] = mapped_column(Text, nullable=False)
    subject: Mapped[str | None] = mapped_column(Text, nullable=True)
    type: Mapped[str] = mapped_column(Text, nullable=False)
    text: Mapped[str] = mapped_column(Text, nullable=False)
    # Hash of the normalised text: finds "the same words" for confirmation (MEM-21, EXT-10) by index.
    norm_hash: Mapped[str] = mapped_column(Text, nullable=False)
    metadata_: Mapped[dict[str, Any]] = mapped_column("metadata", JSONB, nullable=False, server_default="{}")
    labels: Mapped[dict[str, Any]] = mapped_column(JSONB, nullable=False, server_default="{}")
    confidence: Mapped[float] = mapped_column(Double, nullable=False)
    contested: Mapped[bool] = mapped_column(Boolean, nullable=False, server_default="false")
    contested_with: Mapped[str | None] = mapped_column(Text, nullable=True)
    recall_count: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    source: Mapped[str] = mapped_column(Text, nullable=False)
    verified: Mapped[bool] = mapped_column(Boolean, nullable=False, server_default="false")
    key: Mapped[str | None] = mapped_column(Text, nullable=True)
    tags: Mapped[list[str]] = mapped_column(ARRAY(Text), nullable=False, server_default="{}")
    priority: Mapped[str] = mapped_column(Text, nullable=False, server_default="normal")
    expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    status: Mapped[str] = mapped_column(Text, nullable=False, server_default="active")
    replaces: Mapped[str | None] = mapped_column(Text, nullable=True)
    replaced_by: Mapped[str | None] = mapped_column(Text, nullable=True)
    confirmations: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    last_confirmed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    provenance: Mapped[dict[str, Any] | None] = mapped_column(JSONB, nullable=True)
    commitment: Mapped[dict[str, Any] | None] = mapped_column(JSONB, nullable=True)
    episode: Mapped[dict[str, Any] | None] = mapped_column(JSONB, nullable=True)
    version: Mapped[int] = mapped_column(Integer, nullable=False, server_default="1")
    embedding: Mapped[Any] = mapped_column(Vector(), nullable=True)
    # The embedding setting the vector was made with (`provider/model/dimensions`, embeddings.fingerprint):
    # search compares only vectors of the index's current setting, re-embedding replaces the others.
    embedding_model: Mapped[str | None] = mapped_column(Text, nullable=True)
    # Both stemmings of the text, English and Dutch, without either language's stop words (migration 0010).
    search: Mapped[Any] = mapped_column(
        TSVECTOR, Computed("to_tsvector('coremem_en'::regconfig, text) || to_tsvector('coremem_nl'::regconfig, text)",
                           persisted=True), nullable=True)
    created_at: Mapped[datetime] = _now()
    updated_at: Mapped[datetime] = _now()
    __table_args__ = (
        ForeignKeyConstraint(["org_id", "index_id"], ["indexes.org_id", "indexes.id"], ondelete="CASCADE"),
        Index("ix_memory_records_org_id_index_id_type_updated_at", "org_id", "index_id", "type", "updated_at"),
        Index("ix_memory_records_org_id_subject_index_id", "org_id", "subject", "index_id"),
        Index("ix_memory_records_org_id_index_id_norm_hash", "org_id", "index_id", "norm_hash"),
        Index("ix_memory_records_org_id_expires_at", "org_id", "expires_at",
              postgresql_where=sql_text("expires_at IS NOT NULL")),
        Index("uq_memory_records_org_id_index_id_subject_type_key", "org_id", "index_id", "subject", "type", "key",
              unique=True, postgresql_where=sql_text("key IS NOT NULL"), postgresql_nulls_not_distinct=True),
        Index("ix_memory_records_org_id_index_id_not_active", "org_id", "index_id",
              postgresql_where=sql_text("status <> 'active'")),
        # Injection (INJ-13): each section reads an index range, never a whole store's shared records; what the
        # section's confidence floor reads rides along, so the floor is index-only (migration 0021).
        Index("ix_memory_records_org_id_index_id_subject_confidence", "org_id", "index_id", "subject", "confidence",
              postgresql_include=_FLOOR_READS, postgresql_where=sql_text("status = 'active'")),
        # A store's shared records in rank order (`subject IS NULL` is no equality the planner can order by).
        Index("ix_memory_records_shared_confidence", "org_id", "index_id", "confidence",
              postgresql_include=_FLOOR_READS, postgresql_where=sql_text("status = 'active' AND subject IS NULL")),
        Index("ix_memory_records_open_commitments", "org_id", "index_id", "subject", _COMMITMENT_DUE,
              postgresql_where=sql_text(_OPEN_COMMITMENT)),
        Index("ix_memory_records_shared_open_commitments", "org_id", "index_id", _COMMITMENT_DUE,
              postgresql_where=sql_text(_OPEN_COMMITMENT + " AND subject IS NULL")),
        Index("ix_memory_records_behaviour", "org_id", "index_id", "subject", "created_at",
              postgresql_where=sql_text("type = 'behaviour' AND status = 'active'")),
        # GET /memory/stats (migration 0017): every column its count reads, so it is one index-only pass in
        # (store, type, owner) order, grouped as it streams, instead of a scan of the whole table.
        Index("ix_memory_records_stats", "org_id", "index_id", "type", "subject",
              postgresql_include=["expires_at", "source"], postgresql_where=sql_text("status = 'active'")),
        Index("ix_memory_records_search", "search", postgresql_using="gin"),
        Index("ix_memory_records_tags", "tags", postgresql_using="gin"),
        *[_hnsw(d) for d in HNSW_DIMENSIONS],
        # A person's search takes the shared records through these: the scope filters nothing out of them.
        *[_hnsw(d, shared=True) for d in HNSW_DIMENSIONS],
    )


class MemoryVersion(Base):
    """One version of a record (MEM-7, MEM-17): what it said after each write, confirmation or correction."""

    __tablename__ = "memory_versions"
    org_id: Mapped[str] = mapped_column(Text, primary_key=True)
    record_id: Mapped[str] = mapped_column(Text, primary_key=True)
    version: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    at: Mapped[datetime] = _now()
    action: Mapped[str] = mapped_column(Text, nullable=False)
    actor_type: Mapped[str] = mapped_column(Text, nullable=False)
    actor_id: Mapped[str | None] = mapped_column(Text, nullable=True)
    partner_id: Mapped[str | None] = mapped_column(Text, nullable=True)
    text: Mapped[str] = mapped_column(Text, nullable=False)
    metadata_: Mapped[dict[str, Any]] = mapped_column("metadata", JSONB, nullable=False, server_default="{}")
    labels: Mapped[dict[str, Any]] = mapped_column(JSONB, nullable=False, server_default="{}")
    confidence: Mapped[float] = mapped_column(Double, nullable=False)
    tags: Mapped[list[str]] = mapped_column(ARRAY(Text), nullable=False, server_default="{}")
    priority: Mapped[str] = mapped_column(Text, nullable=False)
    expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    status: Mapped[str] = mapped_column(Text, nullable=False)
    verified: Mapped[bool] = mapped_column(Boolean, nullable=False)
    commitment: Mapped[dict[str, Any] | None] = mapped_column(JSONB, nullable=True)
    __table_args__ = (
        ForeignKeyConstraint(["org_id", "record_id"], ["memory_records.org_id", "memory_records.id"],
                             ondelete="CASCADE"),
        # The organisation's record changes, newest first, and versions per day (migration 0011).
        Index("ix_memory_versions_org_id_at", "org_id", "at"),
    )


class ErasedSubject(Base):
    """A person erased with DELETE /subjects/{id} (MEM-19), named only by the keyed hash of her id.

    Writes for a person check it, so work that started before the erasure cannot write her back.
    """

    __tablename__ = "erased_subjects"
    org_id: Mapped[str] = mapped_column(Text, primary_key=True)
    subject_hash: Mapped[str] = mapped_column(Text, primary_key=True)
    erased_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    __table_args__ = (ForeignKeyConstraint(["org_id"], ["orgs.id"], ondelete="CASCADE"),)
