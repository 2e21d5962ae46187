"""Reading, applying and dismissing promotion proposals (EXT-15): administrators, or keys holding `management`
(never a subject token, never a request naming a person). Reads are audited with the ids shown; the evidence is
only records the reader sees (the Scope's clauses in SQL)."""

from __future__ import annotations

from typing import Any

from backend.access.context import RequestContext
from backend.access.labels import check_labels
from backend.domains.memory import writes
from backend.domains.proposals import repository as repo
from backend.domains.stores import repository as stores_repo
from backend.domains.stores.service import effective_sections
from backend.errors import Conflict, NotFound, ValidationFailed
from shared.schemas.memory import MemoryCreate
from shared.schemas.proposals import ProposalQuery


def _require(ctx: RequestContext) -> None:
    ctx.principal.refuse_subject_token("read or decide promotion proposals")
    ctx.require_management()
    ctx.require("memory")  # proposals quote people's records, as `GET /memory` does (02-memory: every route here)
    ctx.refuse_person_named("Promotion proposals are the organisation's: send the request without naming a person.")


def _document(row: dict[str, Any], evidence: list[dict[str, Any]]) -> dict[str, Any]:
    return {**{k: row[k] for k in ("id", "index_id", "type", "text", "basis", "status", "record_id", "created_at",
                                  "decided_at")},
            "people": int(row["people"] or 0),
            "evidence": [{"record_id": e["id"], "subject": e["subject"], "type": e["type"], "text": e["text"]}
                         for e in evidence]}


async def page(ctx: RequestContext, query: ProposalQuery, before_id: str | None, limit: int) -> list[dict[str, Any]]:
    _require(ctx)
    scope = ctx.management_scope
    rows = await repo.page(ctx.db, scope, status=None if query.status == "all" else query.status,
                           index_id=query.index_id, before_id=before_id, limit=limit)
    evidence = await repo.evidence(ctx.db, scope, [r["id"] for r in rows])
    by_proposal: dict[str, list[dict[str, Any]]] = {}
    for e in evidence:
        by_proposal.setdefault(e["proposal_id"], []).append(e)
    docs = [_document(r, by_proposal.get(r["id"], [])) for r in rows]
    await ctx.audit("memory.read", object_type="memory_proposal", detail={
        "route": "GET /memory/proposals", "filters": {"status": query.status, "index_id": query.index_id},
        "proposal_ids": [d["id"] for d in docs], "ids": [e["id"] for e in evidence]})
    return docs


async def _open(ctx: RequestContext, proposal_id: str) -> dict[str, Any]:
    _require(ctx)
    row = await repo.get(ctx.db, ctx.management_scope, proposal_id, lock=True)
    if row is None:
        raise NotFound(f"No promotion proposal {proposal_id!r} is reachable with this credential.",
                       param="proposal_id", code="proposal_not_found")
    if row["status"] != "open":
        raise Conflict(f"The proposal was {row['status']} already.", param="proposal_id",
                       code="proposal_decided")
    return row


async def apply(ctx: RequestContext, proposal_id: str) -> dict[str, Any]:
    """A new shared record of nobody in particular, labelled with the store's `promotion.labels` (checked
    against the vocabulary); the people's own records stay theirs."""
    ctx.require("memory")
    row = await _open(ctx, proposal_id)
    stored = await stores_repo.get(ctx.db, ctx.org_id, row["index_id"])
    labels = effective_sections(stored["sections"] if stored else None,
                                ctx.settings.injection_max_budget_tokens).promotion.labels
    try:
        check_labels(labels, ctx.org.get("vocabulary"), "memory_record", param="promotion.labels")
    except ValidationFailed as exc:
        raise ValidationFailed(f"The store's `promotion.labels` no longer fit the vocabulary: {exc.message}",
                               param="promotion.labels", code="labels_not_in_vocabulary") from None
    body = MemoryCreate(index_id=row["index_id"], type=row["type"], text=row["text"], labels=labels)
    draft = await writes.prepare(ctx, body, source="admin" if ctx.is_admin else "api",
                                 provenance={"proposal_id": proposal_id})
    draft.values["subject"] = None
    ids, _ = await writes.write(ctx, [draft])
    await repo.decide(ctx.db, ctx.org_id, proposal_id, {"status": "applied", "record_id": ids[0],
                                                        "decided_by_type": ctx.actor.type,
                                                        "decided_by_id": ctx.actor.id})
    await ctx.audit("memory.proposal_applied", object_type="memory_proposal", object_id=proposal_id,
                    detail={"record_id": ids[0], "index_id": row["index_id"]})
    return await _one(ctx, proposal_id)


async def dismiss(ctx: RequestContext, proposal_id: str) -> dict[str, Any]:
    await _open(ctx, proposal_id)
    await repo.decide(ctx.db, ctx.org_id, proposal_id, {"status": "dismissed", "decided_by_type": ctx.actor.type,
                                                        "decided_by_id": ctx.actor.id})
    await ctx.audit("memory.proposal_dismissed", object_type="memory_proposal", object_id=proposal_id, detail={})
    return await _one(ctx, proposal_id)


async def _one(ctx: RequestContext, proposal_id: str) -> dict[str, Any]:
    rows = await repo.page(ctx.db, ctx.management_scope, status=None, index_id=None, before_id=None, limit=1,
                           proposal_id=proposal_id)
    evidence = await repo.evidence(ctx.db, ctx.management_scope, [proposal_id])
    return _document(rows[0], evidence)
