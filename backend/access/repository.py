"""SQL of credentials: a key, a subject token's key or an administrator's token, each with its organisation's
row in the same round trip (the organisation row is read once per request)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Table, bindparam, func, or_, select, text, update
from sqlalchemy.ext.asyncio import AsyncSession

from backend.db.models import Admin, AdminToken, ApiKey, Org, table_of
from backend.db.prepared import Prepared
from backend.db.tenant import org_was_set, setting_org

KEYS = table_of(ApiKey)
ORGS = table_of(Org)
ADMINS = table_of(Admin)
TOKENS = table_of(AdminToken)


def _prefixed(table: Table, prefix: str) -> list[Any]:
    return [column.label(prefix + column.name) for column in table.c]


def _split(row: dict[str, Any] | None, *prefixes: str) -> list[dict[str, Any] | None]:
    """A joined row as one dict per table; a table whose id is NULL (an outer join found nothing) is None."""
    if row is None:
        return [None] * len(prefixes)
    parts = []
    for prefix in prefixes:
        part = {name[len(prefix):]: value for name, value in row.items() if name.startswith(prefix)}
        parts.append(part if part.get("id") is not None else None)
    return parts


# The key's organisation is set for row-level security in the same round trip (backend/db/tenant.py).
_KEY_AND_ORG = select(*_prefixed(KEYS, "k_"), *_prefixed(ORGS, "o_"), setting_org(KEYS.c.org_id)).select_from(
    KEYS.join(ORGS, ORGS.c.id == KEYS.c.org_id))
_KEY_BY_SECRET = Prepared(_KEY_AND_ORG.where(KEYS.c.secret_hash == bindparam("secret_hash")))
_KEY_BY_ID = Prepared(_KEY_AND_ORG.where(KEYS.c.org_id == bindparam("org_id"), KEYS.c.id == bindparam("key_id")))
_ADMIN_BY_TOKEN = Prepared(
    select(*_prefixed(ADMINS, "a_"), TOKENS.c.expires_at.label("t_expires_at"), *_prefixed(ORGS, "o_"))
    .select_from(TOKENS.join(ADMINS, ADMINS.c.id == TOKENS.c.admin_id).outerjoin(ORGS, ORGS.c.id == ADMINS.c.org_id))
    .where(TOKENS.c.token_hash == bindparam("token_hash")))
_ORG = Prepared(select(*_prefixed(ORGS, "o_")).where(ORGS.c.id == bindparam("org_id")))


async def key_by_secret_hash(db: AsyncSession, secret_hash: str) -> tuple[dict[str, Any] | None,
                                                                         dict[str, Any] | None]:
    """(key row, its organisation's row), or (None, None). A key found has set its organisation."""
    return _found_key(db, await _KEY_BY_SECRET.first(db, {"secret_hash": secret_hash}))


async def key_by_id(db: AsyncSession, org_id: str, key_id: str) -> tuple[dict[str, Any] | None,
                                                                        dict[str, Any] | None]:
    return _found_key(db, await _KEY_BY_ID.first(db, {"org_id": org_id, "key_id": key_id}))


def _found_key(db: AsyncSession, row: dict[str, Any] | None) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    key, org = _split(row, "k_", "o_")
    if key is not None:
        org_was_set(db, key["org_id"])
    return key, org


async def admin_by_token_hash(db: AsyncSession, token_hash: str) -> tuple[dict[str, Any] | None,
                                                                         dict[str, Any] | None]:
    """(the administrator with `expires_at` of this token, the organisation she belongs to), or (None, None)."""
    row = await _ADMIN_BY_TOKEN.first(db, {"token_hash": token_hash})
    admin, org = _split(row, "a_", "o_")
    if admin is not None and row is not None:
        admin["expires_at"] = row["t_expires_at"]
    return admin, org


async def org(db: AsyncSession, org_id: str) -> dict[str, Any] | None:
    return _split(await _ORG.first(db, {"org_id": org_id}), "o_")[0]


async def touch_key(db: AsyncSession, org_id: str, key_id: str) -> None:
    """Record that the key was used now, unless another request did so within the last minute (concurrent requests
    of one key then write it once: the second finds the fresh value when the first commits)."""
    await db.execute(update(KEYS).where(
        KEYS.c.org_id == org_id, KEYS.c.id == key_id,
        or_(KEYS.c.last_used_at.is_(None), KEYS.c.last_used_at < func.now() - text("interval '1 minute'")))
        .values(last_used_at=func.now()))
