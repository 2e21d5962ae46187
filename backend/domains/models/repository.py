"""SQL of the model registry (EXT-1)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import bindparam, delete, or_, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from backend.db.models import table_of
from backend.db.models_turns import OfferedModel
from backend.db.prepared import Prepared
from backend.db.tenant import use_org

T = table_of(OfferedModel)
EVERY_ORG = ""


async def offered(db: AsyncSession, org_id: str) -> list[dict[str, Any]]:
    """Models offered to the organisation; its own entry wins over an every-organisation one of the same id."""
    rows = (await db.execute(select(T).where(or_(T.c.org_id == org_id, T.c.org_id == EVERY_ORG))
                             .order_by(T.c.id, T.c.org_id.desc()))).mappings().all()
    chosen: dict[str, dict[str, Any]] = {}
    for row in rows:
        chosen.setdefault(row["id"], dict(row))
    return list(chosen.values())


# The organisation's own entry wins over the every-organisation one of the same id.
_FIND = Prepared(select(T).where(T.c.id == bindparam("model_id"),
                                 or_(T.c.org_id == bindparam("org_id"), T.c.org_id == EVERY_ORG))
                 .order_by(T.c.org_id.desc()).limit(1))


async def find(db: AsyncSession, org_id: str, model_id: str) -> dict[str, Any] | None:
    return await _FIND.first(db, {"org_id": org_id, "model_id": model_id})


async def upsert(db: AsyncSession, values: dict[str, Any]) -> dict[str, Any]:
    await use_org(db, values["org_id"])  # row-level security: an every-organisation entry is written with '' set
    statement = insert(T).values(**values)
    statement = statement.on_conflict_do_update(
        index_elements=[T.c.org_id, T.c.id],
        set_={c: statement.excluded[c] for c in ("provider", "base_url", "api_key_env", "model")})
    return dict((await db.execute(statement.returning(T))).mappings().one())


async def remove(db: AsyncSession, org_id: str, model_id: str) -> bool:
    await use_org(db, org_id)
    result = await db.execute(delete(T).where(T.c.org_id == org_id, T.c.id == model_id).returning(T.c.id))
    return result.first() is not None
