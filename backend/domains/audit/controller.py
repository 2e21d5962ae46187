"""HTTP routes: the audit trail (administrators only; reading it is itself audited)."""

from __future__ import annotations

from typing import Any

import msgspec
from litestar import Controller, get
from litestar.di import Provide

from backend.access.context import RequestContext
from backend.domains.audit import repository as repo
from backend.domains.audit import service
from backend.params import Page, query_dependency
from shared.schemas.platform import AuditPage, AuditQuery, ChainStatus


def event_document(row: dict[str, Any]) -> dict[str, Any]:
    return {"id": row["id"], "seq": row["seq"], "at": row["at"], "org_id": row["org_id"],
            "actor": {"type": row["actor_type"], "id": row["actor_id"]}, "subject": row["subject_hash"],
            "action": row["action"], "object_type": row["object_type"], "object_id": row["object_id"],
            "outcome": row["outcome"], "detail": row["detail"], "hash": row["hash"]}


class AuditController(Controller):
    path = "/audit"
    tags = ["audit"]
    dependencies = {"filters": Provide(query_dependency(AuditQuery))}

    @get("", summary="Audit events, newest first, with filters and cursor paging")
    async def list_events(self, ctx: RequestContext, filters: AuditQuery, page: Page) -> AuditPage:
        ctx.require_admin()
        rows = await repo.list_events(
            ctx.db, ctx.org_id, filters, service.subject_hash(ctx.settings.secret, ctx.org_id, filters.subject),
            before_seq=page.after(int), limit=page.fetch())
        rows, next_cursor = page.cut(rows, lambda row: row["seq"])
        sent = {k: v for k, v in msgspec.to_builtins(filters).items() if v not in (None, [], False)}
        if "subject" in sent:
            sent["subject"] = True  # the trail never holds a person's id, not even the one searched for
        await ctx.audit("audit.read", object_type="audit",
                        detail={"route": "GET /audit", "filters": sent, "count": len(rows)})
        return msgspec.convert({"data": [event_document(r) for r in rows], "next_cursor": next_cursor}, AuditPage)

    @get("/verify", summary="Check the organisation's hash chain")
    async def verify(self, ctx: RequestContext) -> ChainStatus:
        ctx.require_admin()
        report = await service.verify_org(ctx.db, ctx.org_id)
        return ChainStatus(org_id=report.org_id, events=report.events, intact=report.intact,
                           broken_at_seq=report.broken_at_seq, problem=report.problem)
