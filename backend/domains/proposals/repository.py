"""SQL of promotion proposals (EXT-15): finding candidates, keeping proposals with their evidence, reading them
with only the evidence a reader sees (the Scope's clauses), and erasing those resting on one person alone."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pgvector.sqlalchemy import Vector
from sqlalchemy import Float, and_, cast, delete, exists, func, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from backend.access.scope import Scope
from backend.db.models import table_of
from backend.db.models_memory import MemoryRecord
from backend.db.models_proposals import MemoryProposal, ProposalEvidence
from backend.domains.memory.expressions import active_now, readable, similarity

P = table_of(MemoryProposal)
E = table_of(ProposalEvidence)
R = table_of(MemoryRecord)
PROMOTED_TYPES = ("fact",)  # only facts are proposed for sharing (preferences, commitments, ... are personal)


def _candidate_records(org_id: str, index_id: str) -> list[Any]:
    """People's active facts of the store that no proposal was made from (any status) and that are not shared
    already in the same words."""
    shared = R.alias("shared")
    already = exists().where(shared.c.org_id == R.c.org_id, shared.c.index_id == R.c.index_id,
                             shared.c.subject.is_(None), shared.c.norm_hash == R.c.norm_hash,
                             shared.c.status == "active")
    taken = exists().where(P.c.org_id == R.c.org_id, P.c.index_id == R.c.index_id, P.c.norm_hash == R.c.norm_hash)
    return [R.c.org_id == org_id, R.c.index_id == index_id, R.c.subject.is_not(None),
            R.c.type.in_(PROMOTED_TYPES), *active_now(), ~taken, ~already]


async def same_text_groups(db: AsyncSession, org_id: str, index_id: str, limit: int) -> list[dict[str, Any]]:
    """Normalised texts held by at least two people: the text, its type and the records (id, subject)."""
    query = (select(R.c.norm_hash, func.min(R.c.type).label("type"), func.min(R.c.text).label("text"),
                    func.array_agg(func.json_build_array(R.c.id, R.c.subject)).label("records"))
             .where(*_candidate_records(org_id, index_id))
             .group_by(R.c.norm_hash).having(func.count(func.distinct(R.c.subject)) >= 2)
             .order_by(R.c.norm_hash).limit(limit))
    return [dict(r._mapping) for r in (await db.execute(query)).all()]


async def similar_pairs(db: AsyncSession, org_id: str, index_id: str, embedding_model: str, dims: int,
                        threshold: float, limit: int) -> list[dict[str, Any]]:
    """Pairs of two people's facts whose vectors (the index's current setting) are at least `threshold` alike."""
    other = R.alias("other")
    distance = cast(R.c.embedding, Vector(dims)).op("<=>", return_type=Float)(cast(other.c.embedding, Vector(dims)))
    query = (select(R.c.id, R.c.subject, R.c.type, R.c.text, R.c.norm_hash, other.c.id.label("other_id"),
                    other.c.subject.label("other_subject"))
             .select_from(R.join(other, and_(other.c.org_id == R.c.org_id, other.c.index_id == R.c.index_id,
                                             other.c.subject > R.c.subject, other.c.type == R.c.type)))
             .where(*_candidate_records(org_id, index_id), R.c.embedding_model == embedding_model,
                    other.c.embedding_model == embedding_model, other.c.status == "active",
                    other.c.norm_hash != R.c.norm_hash, similarity(distance) >= threshold)
             .order_by(R.c.id, other.c.id).limit(limit))
    return [dict(r._mapping) for r in (await db.execute(query)).all()]


async def single_facts(db: AsyncSession, org_id: str, index_id: str, limit: int) -> list[dict[str, Any]]:
    """One person's facts (newest first) the helper model may judge general knowledge."""
    query = (select(R.c.id, R.c.subject, R.c.type, R.c.text, R.c.norm_hash)
             .where(*_candidate_records(org_id, index_id)).order_by(R.c.created_at.desc()).limit(limit))
    return [dict(r._mapping) for r in (await db.execute(query)).all()]


async def insert_proposal(db: AsyncSession, values: dict[str, Any], evidence: Sequence[tuple[str, str]]) -> bool:
    """False when the store has a proposal of these words already (made meanwhile, or dismissed before)."""
    statement = (pg_insert(P).values(**values)
                 .on_conflict_do_nothing(index_elements=[P.c.org_id, P.c.index_id, P.c.norm_hash]).returning(P.c.id))
    if (await db.execute(statement)).first() is None:
        return False
    await db.execute(pg_insert(E).values([{"org_id": values["org_id"], "proposal_id": values["id"],
                                           "record_id": record_id, "subject": subject}
                                          for record_id, subject in evidence]).on_conflict_do_nothing())
    return True


def _visible_evidence(scope: Scope) -> Any:
    return (select(E.c.proposal_id, R.c.id, R.c.subject, R.c.type, R.c.text)
            .select_from(E.join(R, and_(R.c.org_id == E.c.org_id, R.c.id == E.c.record_id)))
            .where(E.c.org_id == scope.org_id, *readable(scope)))


async def page(db: AsyncSession, scope: Scope, *, status: str | None, index_id: str | None, before_id: str | None,
               limit: int, proposal_id: str | None = None) -> list[dict[str, Any]]:
    """Proposals of stores the reader reaches, newest first, with the number of people they rest on."""
    people = (select(func.count(func.distinct(E.c.subject))).where(E.c.org_id == P.c.org_id, E.c.proposal_id == P.c.id)
              .correlate(P).scalar_subquery())
    where = [P.c.org_id == scope.org_id, scope.index_clause(P.c.index_id)]
    if status is not None:
        where.append(P.c.status == status)
    if index_id is not None:
        where.append(P.c.index_id == index_id)
    if before_id is not None:
        where.append(P.c.id < before_id)
    if proposal_id is not None:
        where.append(P.c.id == proposal_id)
    query = select(P, people.label("people")).where(*where).order_by(P.c.id.desc()).limit(limit)
    return [dict(r._mapping) for r in (await db.execute(query)).all()]


async def evidence(db: AsyncSession, scope: Scope, proposal_ids: Sequence[str]) -> list[dict[str, Any]]:
    """The evidence records of these proposals that the reader sees (PLT-8, in SQL)."""
    if not proposal_ids:
        return []
    query = _visible_evidence(scope).where(E.c.proposal_id.in_(list(proposal_ids))).order_by(E.c.proposal_id, R.c.id)
    return [dict(r._mapping) for r in (await db.execute(query)).all()]


async def get(db: AsyncSession, scope: Scope, proposal_id: str, *, lock: bool = False) -> dict[str, Any] | None:
    query = select(P).where(P.c.org_id == scope.org_id, P.c.id == proposal_id, scope.index_clause(P.c.index_id))
    row = (await db.execute(query.with_for_update() if lock else query)).first()
    return dict(row._mapping) if row else None


async def decide(db: AsyncSession, org_id: str, proposal_id: str, values: dict[str, Any]) -> None:
    await db.execute(update(P).where(P.c.org_id == org_id, P.c.id == proposal_id)
                     .values(**values, decided_at=func.now()))


async def erase_subject(db: AsyncSession, org_id: str, subject_id: str) -> dict[str, int]:
    """MEM-19: proposals resting on her records alone go; her evidence leaves the others (with her records)."""
    hers = exists().where(E.c.org_id == P.c.org_id, E.c.proposal_id == P.c.id, E.c.subject == subject_id)
    others = exists().where(E.c.org_id == P.c.org_id, E.c.proposal_id == P.c.id, E.c.subject != subject_id)
    gone = await db.execute(delete(P).where(P.c.org_id == org_id, hers, ~others).returning(P.c.id))
    await db.execute(delete(E).where(E.c.org_id == org_id, E.c.subject == subject_id))
    return {"memory_proposals": len(gone.all())}
