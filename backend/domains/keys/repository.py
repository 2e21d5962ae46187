"""SQL of API keys and the key audit trail."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import and_, delete, func, insert, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from backend.db.models import ApiKey, KeyAudit, table_of

KEYS = table_of(ApiKey)
KEY_AUDIT = table_of(KeyAudit)


async def get_by_secret_hash(db: AsyncSession, secret_hash: str) -> dict[str, Any] | None:
    row = (await db.execute(select(KEYS).where(KEYS.c.secret_hash == secret_hash))).first()
    return dict(row._mapping) if row else None


async def get(db: AsyncSession, org_id: str, key_id: str) -> dict[str, Any] | None:
    row = (await db.execute(select(KEYS).where(KEYS.c.org_id == org_id, KEYS.c.id == key_id))).first()
    return dict(row._mapping) if row else None


async def list_page(db: AsyncSession, org_id: str, after_id: str | None, limit: int) -> list[dict[str, Any]]:
    query = select(KEYS).where(KEYS.c.org_id == org_id)
    if after_id:
        query = query.where(KEYS.c.id > after_id)
    rows = (await db.execute(query.order_by(KEYS.c.id).limit(limit))).all()
    return [dict(r._mapping) for r in rows]


async def insert_key(db: AsyncSession, values: dict[str, Any]) -> dict[str, Any]:
    row = (await db.execute(insert(KEYS).values(**values).returning(KEYS))).one()
    return dict(row._mapping)


async def update_key(db: AsyncSession, org_id: str, key_id: str, values: dict[str, Any]) -> dict[str, Any]:
    query = (update(KEYS).where(KEYS.c.org_id == org_id, KEYS.c.id == key_id)
             .values(**values, updated_at=func.now()).returning(KEYS))
    return dict((await db.execute(query)).one()._mapping)


async def delete_key(db: AsyncSession, org_id: str, key_id: str) -> None:
    await db.execute(delete(KEYS).where(KEYS.c.org_id == org_id, KEYS.c.id == key_id))


async def append_key_audit(db: AsyncSession, values: dict[str, Any], retention_days: int) -> None:
    await db.execute(insert(KEY_AUDIT).values(**values))
    # Retention is applied as the trail grows, so no separate job is needed to keep it bounded.
    await db.execute(delete(KEY_AUDIT).where(
        KEY_AUDIT.c.org_id == values["org_id"],
        KEY_AUDIT.c.at < func.now() - func.make_interval(0, 0, 0, retention_days),
    ))


async def key_audit(db: AsyncSession, org_id: str, key_id: str | None, since: datetime | None,
                    limit: int, after: tuple[datetime, str] | None = None) -> list[dict[str, Any]]:
    """Entries newest first (by time, then id, so entries of one transaction keep one order); `after` is the
    last entry of the previous page."""
    query = select(KEY_AUDIT).where(KEY_AUDIT.c.org_id == org_id)
    if key_id:
        query = query.where(KEY_AUDIT.c.key_id == key_id)
    if since:
        query = query.where(KEY_AUDIT.c.at >= since)
    if after is not None:
        at, entry_id = after
        query = query.where(or_(KEY_AUDIT.c.at < at, and_(KEY_AUDIT.c.at == at, KEY_AUDIT.c.id < entry_id)))
    rows = (await db.execute(query.order_by(KEY_AUDIT.c.at.desc(), KEY_AUDIT.c.id.desc()).limit(limit))).all()
    return [dict(r._mapping) for r in rows]
