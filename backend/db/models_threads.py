"""ORM models of conversation threads (05-threads.md). Every key and index starts with org_id (house rule 5),
except the full-text GIN index: the embedded server ships no btree_gin, so it covers `tsv` alone."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    Computed,
    DateTime,
    ForeignKeyConstraint,
    Index,
    Integer,
    Text,
    UniqueConstraint,
    func,
)
from sqlalchemy import (
    text as sql_text,
)
from sqlalchemy.dialects.postgresql import JSONB, TSVECTOR
from sqlalchemy.orm import Mapped, mapped_column

from backend.db.models import Base


def _now() -> Any:
    return mapped_column(DateTime(timezone=True), nullable=False, server_default=func.now())


class Thread(Base):
    """A stored conversation. A deleted thread stays as a tombstone (THR-6): id, owner and times, no content."""

    __tablename__ = "threads"
    org_id: Mapped[str] = mapped_column(Text, primary_key=True)
    id: Mapped[str] = mapped_column(Text, primary_key=True)
    subject: Mapped[str | None] = mapped_column(Text, nullable=True)  # the owner; NULL = shared (nobody's)
    labels: Mapped[dict[str, Any]] = mapped_column(JSONB, nullable=False, server_default="{}")
    meta: Mapped[dict[str, Any]] = mapped_column("metadata", JSONB, nullable=False, server_default="{}")
    # THR-4: the per-thread position counter; appenders reserve positions with UPDATE … RETURNING.
    last_position: Mapped[int] = mapped_column(BigInteger, nullable=False, server_default="0")
    created_at: Mapped[datetime] = _now()
    updated_at: Mapped[datetime] = _now()
    deleted_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    # EXT-11: a key that pseudonymises (TRN-10) wrote in this thread; extraction hides its windows again.
    pseudonymized: Mapped[bool] = mapped_column(Boolean, nullable=False, server_default=sql_text("false"))
    __table_args__ = (
        ForeignKeyConstraint(["org_id"], ["orgs.id"], ondelete="CASCADE"),
        Index("ix_threads_org_id_subject_id", "org_id", "subject", "id"),
    )


class ThreadItem(Base):
    """One item of a thread, immutable once written. `text` holds the searchable words of messages and refusals."""

    __tablename__ = "thread_items"
    org_id: Mapped[str] = mapped_column(Text, primary_key=True)
    thread_id: Mapped[str] = mapped_column(Text, primary_key=True)
    position: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    id: Mapped[str] = mapped_column(Text, nullable=False)
    type: Mapped[str] = mapped_column(Text, nullable=False)
    role: Mapped[str | None] = mapped_column(Text, nullable=True)
    subject: Mapped[str | None] = mapped_column(Text, nullable=True)
    response_id: Mapped[str | None] = mapped_column(Text, nullable=True)
    body: Mapped[dict[str, Any]] = mapped_column(JSONB, nullable=False)
    text: Mapped[str | None] = mapped_column(Text, nullable=True)
    tsv: Mapped[Any] = mapped_column(TSVECTOR, Computed("to_tsvector('simple'::regconfig, text)", persisted=True),
                                     nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    __table_args__ = (
        ForeignKeyConstraint(["org_id", "thread_id"], ["threads.org_id", "threads.id"], ondelete="CASCADE"),
        UniqueConstraint("org_id", "id"),
        Index("ix_thread_items_org_id_created_at_id", "org_id", "created_at", "id",
              postgresql_where=sql_text("text IS NOT NULL")),
        Index("ix_thread_items_org_id_subject", "org_id", "subject"),
        Index("ix_thread_items_tsv", "tsv", postgresql_using="gin"),
    )


class ThreadItemNote(Base):
    """A person's own note on one message (THR-8); `author` '' is the organisation's note."""

    __tablename__ = "thread_item_notes"
    org_id: Mapped[str] = mapped_column(Text, primary_key=True)
    item_id: Mapped[str] = mapped_column(Text, primary_key=True)
    author: Mapped[str] = mapped_column(Text, primary_key=True)
    thread_id: Mapped[str] = mapped_column(Text, nullable=False)
    meta: Mapped[dict[str, Any]] = mapped_column("metadata", JSONB, nullable=False)
    updated_at: Mapped[datetime] = _now()
    __table_args__ = (
        ForeignKeyConstraint(["org_id", "item_id"], ["thread_items.org_id", "thread_items.id"], ondelete="CASCADE"),
        Index("ix_thread_item_notes_org_id_author", "org_id", "author"),
        Index("ix_thread_item_notes_org_id_thread_id", "org_id", "thread_id"),
    )


class ThreadState(Base):
    """A thread's working state (THR-11): one small JSON object with a version for If-Match."""

    __tablename__ = "thread_states"
    org_id: Mapped[str] = mapped_column(Text, primary_key=True)
    thread_id: Mapped[str] = mapped_column(Text, primary_key=True)
    state: Mapped[dict[str, Any]] = mapped_column(JSONB, nullable=False)
    version: Mapped[int] = mapped_column(Integer, nullable=False)
    size: Mapped[int] = mapped_column(Integer, nullable=False)
    updated_at: Mapped[datetime] = _now()
    __table_args__ = (
        ForeignKeyConstraint(["org_id", "thread_id"], ["threads.org_id", "threads.id"], ondelete="CASCADE"),
    )


class ThreadSummary(Base):
    """A compaction summary of a run of positions (THR-13); written by turns (TRN-6)."""

    __tablename__ = "thread_summaries"
    org_id: Mapped[str] = mapped_column(Text, primary_key=True)
    id: Mapped[str] = mapped_column(Text, primary_key=True)
    thread_id: Mapped[str] = mapped_column(Text, nullable=False)
    from_position: Mapped[int] = mapped_column(BigInteger, nullable=False)
    to_position: Mapped[int] = mapped_column(BigInteger, nullable=False)
    level: Mapped[int] = mapped_column(Integer, nullable=False, server_default="1")
    model: Mapped[str | None] = mapped_column(Text, nullable=True)
    text: Mapped[str] = mapped_column(Text, nullable=False)
    # TRN-6: the turns covered, counted from the thread's first; compaction numbers later turns from the last
    # summary instead of reading the whole thread. NULL on summaries written by other means (ignored then).
    from_turn: Mapped[int | None] = mapped_column(Integer, nullable=True)
    to_turn: Mapped[int | None] = mapped_column(Integer, nullable=True)
    created_at: Mapped[datetime] = _now()
    __table_args__ = (
        ForeignKeyConstraint(["org_id", "thread_id"], ["threads.org_id", "threads.id"], ondelete="CASCADE"),
        Index("ix_thread_summaries_org_id_thread_id_from_position", "org_id", "thread_id", "from_position"),
        # A retried or doubled compaction job never writes a second summary of the same positions (house rule 8).
        UniqueConstraint("org_id", "thread_id", "level", "from_position", "to_position"),
    )


# Values are compared through an MD5 of their text: a long URL would not fit a btree entry.
_VALUE_KEY = sql_text("md5(value)")
_LOWER_VALUE_KEY = sql_text("md5(lower(value))")


class ThreadPseudonym(Base):
    """One placeholder of a thread's pseudonymisation (TRN-10/EXT-11): `<PERSON_1>` is "Anna de Vries" in
    this thread, for every turn and extraction window. `subject` wrote the text the value was first found in;
    `belongs_to` is the person whose subject attributes gave it. Deleted with the thread (cascade), by thread
    deletion (THR-6 keeps a tombstone, so explicitly) and by erasure (MEM-19)."""

    __tablename__ = "thread_pseudonyms"
    org_id: Mapped[str] = mapped_column(Text, primary_key=True)
    thread_id: Mapped[str] = mapped_column(Text, primary_key=True)
    placeholder: Mapped[str] = mapped_column(Text, primary_key=True)
    kind: Mapped[str] = mapped_column(Text, nullable=False)
    value: Mapped[str] = mapped_column(Text, nullable=False)
    subject: Mapped[str | None] = mapped_column(Text, nullable=True)
    belongs_to: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = _now()
    __table_args__ = (
        ForeignKeyConstraint(["org_id", "thread_id"], ["threads.org_id", "threads.id"], ondelete="CASCADE"),
        # One placeholder per value and kind in a thread: two turns adding the same value meet here.
        Index("uq_thread_pseudonyms_org_id_thread_id_kind_value", "org_id", "thread_id", "kind", _VALUE_KEY,
              unique=True),
        Index("ix_thread_pseudonyms_org_id_subject", "org_id", "subject"),
        Index("ix_thread_pseudonyms_org_id_belongs_to", "org_id", "belongs_to"),
        Index("ix_thread_pseudonyms_org_id_lower_value", "org_id", _LOWER_VALUE_KEY),
    )
