"""SQL of sessions (EXT-12, EXT-13): what a session's episode records of its items and responses, and finding a
lesson in nearly the same words."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pgvector.sqlalchemy import Vector
from sqlalchemy import Float, Text, bindparam, cast, func, literal, select, update
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.asyncio import AsyncSession

from backend.db.models import table_of
from backend.db.models_extraction import ExtractionSwitch
from backend.db.models_threads import ThreadItem
from backend.db.models_turns import Response
from backend.db.prepared import Prepared
from backend.domains.memory.expressions import R, active_now, similarity

I = table_of(ThreadItem)  # noqa: E741
RESP = table_of(Response)
SW = table_of(ExtractionSwitch)


async def mark_episodes_on(db: AsyncSession, org_id: str, index_id: str) -> None:
    """`episodes` was switched on now: sessions settling from here get an episode (EXT-12)."""
    await db.execute(update(SW).where(SW.c.org_id == org_id, SW.c.index_id == index_id)
                     .values(episodes_since=func.now()))


async def session_items(db: AsyncSession, org_id: str, thread_id: str, first: int, last: int
                        ) -> list[dict[str, Any]]:
    """The session's items in order, light: bodies only of tool calls and results (their names and outcomes)."""
    query = (select(I.c.position, I.c.id, I.c.type, I.c.response_id, I.c.created_at,
                    func.jsonb_build_object("name", I.c.body["name"], "status", I.c.body["status"],
                                            "call_id", I.c.body["call_id"], "error", I.c.body["error"])
                    .label("tool"))
             .where(I.c.org_id == org_id, I.c.thread_id == thread_id, I.c.position.between(first, last))
             .order_by(I.c.position))
    rows = [dict(r._mapping) for r in (await db.execute(query)).all()]
    for row in rows:
        if row["type"] not in ("function_call", "function_call_output"):
            row["tool"] = None
    return rows


async def responses(db: AsyncSession, org_id: str, ids: Sequence[str]) -> list[dict[str, Any]]:
    """The session's responses (turns), oldest first: agent, version and status."""
    if not ids:
        return []
    query = (select(RESP.c.id, RESP.c.agent_id, RESP.c.agent_version, RESP.c.status, RESP.c.error, RESP.c.created_at)
             .where(RESP.c.org_id == org_id, RESP.c.id == func.any(literal(list(ids), ARRAY(Text))))
             .order_by(RESP.c.created_at, RESP.c.id))
    return [dict(r._mapping) for r in (await db.execute(query)).all()]


async def nearest_lesson(db: AsyncSession, org_id: str, index_id: str, subject: str, vector: list[float],
                         embedding_model: str, threshold: float) -> str | None:
    """Her active lesson whose vector (made with the index's current setting) is nearest to `vector`, when its
    cosine similarity reaches `threshold` (EXT-13)."""
    dims = len(vector)
    alike = similarity(cast(R.c.embedding, Vector(dims)).op("<=>", return_type=Float)(literal(vector, Vector(dims))))
    query = (select(R.c.id, alike.label("similarity"))
             .where(R.c.org_id == org_id, R.c.index_id == index_id, R.c.subject == subject, R.c.type == "lesson",
                    R.c.embedding_model == embedding_model, R.c.embedding.is_not(None),
                    func.vector_dims(R.c.embedding) == dims, *active_now())
             .order_by(alike.desc()).limit(1))
    row = (await db.execute(query)).first()
    return str(row.id) if row is not None and float(row.similarity) >= threshold else None


_SWITCH_TYPES = Prepared(select(SW.c.index_id, SW.c.types).where(
    SW.c.org_id == bindparam("org_id"), SW.c.index_id == func.any(bindparam("index_ids", type_=ARRAY(Text)))))


async def switch_types(db: AsyncSession, org_id: str, index_ids: Sequence[str]) -> dict[str, list[str]]:
    """The `types` of the stores' extraction switches (on or off), for the write tool (MEM-21)."""
    if not index_ids:
        return {}
    rows = await _SWITCH_TYPES.all(db, {"org_id": org_id, "index_ids": list(index_ids)})
    return {r["index_id"]: list(r["types"]) for r in rows}
