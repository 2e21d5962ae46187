"""Per-store memory settings (INJ-3): one row per index, one JSON document per section."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import DateTime, ForeignKeyConstraint, Text, func
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from backend.db.models import Base


class StoreSettings(Base):
    """Only the sections someone has set are stored; absent sections read as their defaults."""

    __tablename__ = "store_settings"
    org_id: Mapped[str] = mapped_column(Text, primary_key=True)
    index_id: Mapped[str] = mapped_column(Text, primary_key=True)
    sections: Mapped[dict[str, Any]] = mapped_column(JSONB, nullable=False, server_default="{}")
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False, server_default=func.now())
    last_maintenance_run_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    __table_args__ = (
        ForeignKeyConstraint(["org_id", "index_id"], ["indexes.org_id", "indexes.id"], ondelete="CASCADE"),
    )
