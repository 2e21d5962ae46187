"""SQL of organisations and administrators."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, insert, select, text, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from backend.db.models import Admin, AdminToken, Org, table_of

ORGS = table_of(Org)
ADMINS = table_of(Admin)
TOKENS = table_of(AdminToken)


async def exists(db: AsyncSession, org_id: str) -> bool:
    return (await db.execute(select(ORGS.c.id).where(ORGS.c.id == org_id))).first() is not None


async def get(db: AsyncSession, org_id: str) -> dict[str, Any] | None:
    row = (await db.execute(select(ORGS).where(ORGS.c.id == org_id))).first()
    return dict(row._mapping) if row else None


async def get_by_name(db: AsyncSession, name: str) -> dict[str, Any] | None:
    row = (await db.execute(select(ORGS).where(ORGS.c.name == name))).first()
    return dict(row._mapping) if row else None


async def list_all(db: AsyncSession) -> list[dict[str, Any]]:
    return [dict(r._mapping) for r in (await db.execute(select(ORGS).order_by(ORGS.c.id))).all()]


async def any_org(db: AsyncSession) -> bool:
    """Whether the database holds an organisation at all (`coremem run` fills an empty one with the demo)."""
    return (await db.execute(select(ORGS.c.id).limit(1))).first() is not None


async def insert_org(db: AsyncSession, values: dict[str, Any]) -> None:
    await db.execute(insert(ORGS).values(**values))


NAME_UNIQUE = "uq_orgs_name"


async def update_org(db: AsyncSession, org_id: str, values: dict[str, Any]) -> bool:
    """False when the new name is another organisation's (names are unique across the deployment); in a
    savepoint, so the request's transaction goes on to answer 409."""
    statement = update(ORGS).where(ORGS.c.id == org_id).values(**values, updated_at=func.now())
    try:
        async with db.begin_nested():
            await db.execute(statement)
    except IntegrityError as error:
        if getattr(getattr(error.orig, "diag", None), "constraint_name", None) != NAME_UNIQUE:
            raise
        return False
    return True


async def admin_by_email(db: AsyncSession, email: str) -> dict[str, Any] | None:
    row = (await db.execute(select(ADMINS).where(func.lower(ADMINS.c.email) == email.lower()))).first()
    return dict(row._mapping) if row else None


async def insert_admin(db: AsyncSession, values: dict[str, Any]) -> None:
    await db.execute(insert(ADMINS).values(**values))


async def set_admin_password(db: AsyncSession, admin_id: str, password_hash: str) -> None:
    await db.execute(update(ADMINS).where(ADMINS.c.id == admin_id).values(password_hash=password_hash))


async def insert_token(db: AsyncSession, token_hash: str, admin_id: str, expires_at: datetime) -> None:
    await db.execute(delete(TOKENS).where(TOKENS.c.admin_id == admin_id, TOKENS.c.expires_at < func.now()))
    await db.execute(insert(TOKENS).values(token_hash=token_hash, admin_id=admin_id, expires_at=expires_at))


async def delete_token(db: AsyncSession, token_hash: str) -> None:
    await db.execute(delete(TOKENS).where(TOKENS.c.token_hash == token_hash))


async def admin_by_token_hash(db: AsyncSession, token_hash: str) -> dict[str, Any] | None:
    query = (select(ADMINS, TOKENS.c.expires_at)
             .join(TOKENS, TOKENS.c.admin_id == ADMINS.c.id).where(TOKENS.c.token_hash == token_hash))
    row = (await db.execute(query)).first()
    return dict(row._mapping) if row else None


async def zone_known(db: AsyncSession, name: str) -> bool:
    """Whether PostgreSQL knows the time zone `name` (its own data, which may differ from Python's)."""
    row = await db.execute(text("SELECT EXISTS (SELECT 1 FROM pg_timezone_names WHERE name = :name)"), {"name": name})
    return bool(row.scalar_one())
