"""SQL of the maintenance pass (EXT-14, EXT-16, MEM-16): which stores are due, the records it reads, contested
pairs, lesson sources and the store's last run."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Boolean, and_, cast, func, or_, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from backend.db.models import KnowledgeIndex, table_of
from backend.db.models_proposals import LessonSource
from backend.db.models_stores import StoreSettings
from backend.db.tenant import every_org_id, use_org
from backend.domains.memory.expressions import R, active_now

IDX = table_of(KnowledgeIndex)
SS = table_of(StoreSettings)
LS = table_of(LessonSource)
CONTESTABLE_TYPES = ("fact", "preference")


def _maintained() -> Any:
    return func.coalesce(cast(SS.c.sections["maintenance"]["enabled"].astext, Boolean), True)


async def due_stores(db: AsyncSession, every_minutes: int) -> list[dict[str, Any]]:
    """Stores of every organisation whose `maintenance.enabled` (default on) holds and whose last run is older
    than `every_minutes` (or never was), organisation by organisation (row-level security shows a transaction one
    organisation's stores)."""
    joined = IDX.outerjoin(SS, and_(SS.c.org_id == IDX.c.org_id, SS.c.index_id == IDX.c.id))
    query = (select(IDX.c.org_id, IDX.c.id.label("index_id")).select_from(joined)
             .where(_maintained(), or_(SS.c.last_maintenance_run_at.is_(None), SS.c.last_maintenance_run_at
                                       <= func.now() - func.make_interval(0, 0, 0, 0, 0, every_minutes)))
             .order_by(IDX.c.org_id, IDX.c.id))
    found: list[dict[str, Any]] = []
    for org_id in await every_org_id(db):
        await use_org(db, org_id)
        found += [dict(r._mapping) for r in (await db.execute(query)).all()]
    return found


async def lock_store(db: AsyncSession, org_id: str, index_id: str) -> dict[str, Any] | None:
    """The store's settings row, made if missing, locked: one pass of a store at a time."""
    await db.execute(pg_insert(SS).values(org_id=org_id, index_id=index_id, sections={})
                     .on_conflict_do_nothing(index_elements=[SS.c.org_id, SS.c.index_id]))
    query = select(SS).where(SS.c.org_id == org_id, SS.c.index_id == index_id).with_for_update()
    row = (await db.execute(query)).first()
    return dict(row._mapping) if row else None


async def mark_run(db: AsyncSession, org_id: str, index_id: str) -> None:
    await db.execute(update(SS).where(SS.c.org_id == org_id, SS.c.index_id == index_id)
                     .values(last_maintenance_run_at=func.now()))


async def contestable(db: AsyncSession, org_id: str, index_id: str, limit: int) -> list[dict[str, Any]]:
    """Active facts and preferences not contested yet, newest first: pairs are looked for among them."""
    query = (select(R.c.id, R.c.subject, R.c.type, R.c.text, R.c.norm_hash)
             .where(R.c.org_id == org_id, R.c.index_id == index_id, R.c.type.in_(CONTESTABLE_TYPES),
                    ~R.c.contested, *active_now())
             .order_by(R.c.updated_at.desc()).limit(limit))
    return [dict(r._mapping) for r in (await db.execute(query)).all()]


async def still_contestable(db: AsyncSession, org_id: str, ids: Sequence[str]) -> set[str]:
    if not ids:
        return set()
    query = select(R.c.id).where(R.c.org_id == org_id, R.c.id.in_(list(ids)), ~R.c.contested, *active_now())
    return {r[0] for r in (await db.execute(query)).all()}


async def unused_episodes(db: AsyncSession, org_id: str, index_id: str) -> list[dict[str, Any]]:
    """People's active episodes that ended `succeeded` or `failed` and taught no maintenance lesson yet."""
    used = select(LS.c.episode_id).where(LS.c.org_id == org_id)
    result = R.c.episode["result"].astext
    query = (select(R.c.id, R.c.subject, R.c.text, result.label("result"))
             .where(R.c.org_id == org_id, R.c.index_id == index_id, R.c.type == "episode", R.c.subject.is_not(None),
                    result.in_(("succeeded", "failed")), R.c.id.not_in(used), *active_now())
             .order_by(R.c.subject, R.c.created_at.desc()))
    return [dict(r._mapping) for r in (await db.execute(query)).all()]


async def still_unused(db: AsyncSession, org_id: str, ids: Sequence[str]) -> set[str]:
    used = select(LS.c.episode_id).where(LS.c.org_id == org_id)
    query = select(R.c.id).where(R.c.org_id == org_id, R.c.id.in_(list(ids)), R.c.id.not_in(used), *active_now())
    return {r[0] for r in (await db.execute(query)).all()}


async def use_episodes(db: AsyncSession, org_id: str, lesson_id: str, ids: Sequence[str]) -> None:
    await db.execute(pg_insert(LS).values([{"org_id": org_id, "episode_id": e, "lesson_id": lesson_id} for e in ids])
                     .on_conflict_do_nothing())


