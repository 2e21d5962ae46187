"""ORM models of extraction (04-extraction.md EXT-2 … EXT-11): the switch per store, its runs, the windows it
reads and, per thread, how far its windows reach. Keys and indexes start with org_id (house rule 5)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, Boolean, DateTime, ForeignKeyConstraint, Index, Integer, Text, func
from sqlalchemy import text as sql_text
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from backend.db.models import Base


def _now() -> Any:
    return mapped_column(DateTime(timezone=True), nullable=False, server_default=func.now())


class ExtractionSwitch(Base):
    """One store's switch (EXT-2). No foreign key to its index: a switch whose index was deleted stays, so that
    its state can say `objects_missing` (EXT-5)."""

    __tablename__ = "extraction_switches"
    org_id: Mapped[str] = mapped_column(Text, primary_key=True)
    index_id: Mapped[str] = mapped_column(Text, primary_key=True)
    enabled: Mapped[bool] = mapped_column(Boolean, nullable=False)
    model: Mapped[str] = mapped_column(Text, nullable=False)
    instructions: Mapped[str] = mapped_column(Text, nullable=False, server_default="")
    types: Mapped[list[Any]] = mapped_column(JSONB, nullable=False)
    schedule_minutes: Mapped[int] = mapped_column(Integer, nullable=False)
    quiet_minutes: Mapped[int] = mapped_column(Integer, nullable=False)
    threads: Mapped[str] = mapped_column(Text, nullable=False)
    episodes: Mapped[bool] = mapped_column(Boolean, nullable=False)
    lessons: Mapped[bool] = mapped_column(Boolean, nullable=False)
    filters: Mapped[dict[str, Any]] = mapped_column(JSONB, nullable=False)
    author_type: Mapped[str] = mapped_column(Text, nullable=False)  # key | admin
    author_id: Mapped[str] = mapped_column(Text, nullable=False)
    set_at: Mapped[datetime] = _now()
    last_scheduled_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    # EXT-12: when `episodes` was last switched on; sessions that settled before it get no episode.
    episodes_since: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    __table_args__ = (ForeignKeyConstraint(["org_id"], ["orgs.id"], ondelete="CASCADE"),)


class ExtractionRun(Base):
    """One pass of a switch (scheduled, asked for, or windows queued again); its counts are its windows'."""

    __tablename__ = "extraction_runs"
    org_id: Mapped[str] = mapped_column(Text, primary_key=True)
    id: Mapped[str] = mapped_column(Text, primary_key=True)
    index_id: Mapped[str] = mapped_column(Text, nullable=False)
    trigger: Mapped[str] = mapped_column(Text, nullable=False)  # schedule | manual | requeue
    started_at: Mapped[datetime] = _now()
    planned_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    __table_args__ = (
        ForeignKeyConstraint(["org_id"], ["orgs.id"], ondelete="CASCADE"),
        Index("ix_extraction_runs_org_id_index_id_id", "org_id", "index_id", "id"),
    )


class ExtractionWindow(Base):
    """A run of one thread's items read in one model call (EXT-8). Its `state` moving to `ready` commits with
    the records it wrote: the job's mark of work done (house rule 8)."""

    __tablename__ = "extraction_windows"
    org_id: Mapped[str] = mapped_column(Text, primary_key=True)
    id: Mapped[str] = mapped_column(Text, primary_key=True)
    index_id: Mapped[str] = mapped_column(Text, nullable=False)
    thread_id: Mapped[str] = mapped_column(Text, nullable=False)
    run_id: Mapped[str] = mapped_column(Text, nullable=False)
    first_position: Mapped[int] = mapped_column(BigInteger, nullable=False)
    last_position: Mapped[int] = mapped_column(BigInteger, nullable=False)
    items: Mapped[int] = mapped_column(Integer, nullable=False)
    state: Mapped[str] = mapped_column(Text, nullable=False)  # queued | ready | failed | parked
    attempts: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    error_code: Mapped[str | None] = mapped_column(Text, nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    written: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    confirmed: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    replaced: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    dropped: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    created_at: Mapped[datetime] = _now()
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    # EXT-12: set on the window that ends a session (the last one cut from a quiet thread): the position the
    # session began at. Its read writes the session's episode (and lessons, EXT-13).
    session_first_position: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    __table_args__ = (
        ForeignKeyConstraint(["org_id"], ["orgs.id"], ondelete="CASCADE"),
        # A window is its thread's items from `first_position`: planning it twice writes one row.
        Index("uq_extraction_windows_org_id_index_id_thread_id_first_position", "org_id", "index_id", "thread_id",
              "first_position", unique=True),
        Index("ix_extraction_windows_org_id_index_id_state", "org_id", "index_id", "state"),
        Index("ix_extraction_windows_org_id_run_id", "org_id", "run_id"),
        Index("ix_extraction_windows_org_id_index_id_finished_at", "org_id", "index_id", "finished_at",
              postgresql_where=sql_text("finished_at IS NOT NULL")),
    )


class ExtractionCursor(Base):
    """How far a switch has cut a thread into windows: the scheduler looks only at threads grown past it."""

    __tablename__ = "extraction_cursors"
    org_id: Mapped[str] = mapped_column(Text, primary_key=True)
    index_id: Mapped[str] = mapped_column(Text, primary_key=True)
    thread_id: Mapped[str] = mapped_column(Text, primary_key=True)
    read_to: Mapped[int] = mapped_column(BigInteger, nullable=False)
    __table_args__ = (ForeignKeyConstraint(["org_id"], ["orgs.id"], ondelete="CASCADE"),)
