"""HTTP routes: the audit trail (administrators only; reading it is itself audited)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from litestar import Controller, get
from litestar.datastructures import State
from litestar.params import Parameter
from sqlalchemy.ext.asyncio import AsyncSession

from backend.access.principal import Principal
from backend.domains.audit import repository as repo
from backend.domains.audit import service
from backend.errors import BadRequest
from backend.http import decode_cursor, encode_cursor, page_limit, require_offset
from shared.schemas.common import Instant
from shared.schemas.platform import AuditPage, ChainStatus


def event_document(row: dict[str, Any]) -> dict[str, Any]:
    return {"id": row["id"], "seq": row["seq"], "at": row["at"], "org_id": row["org_id"],
            "actor": {"type": row["actor_type"], "id": row["actor_id"]}, "subject": row["subject_hash"],
            "action": row["action"], "object_type": row["object_type"], "object_id": row["object_id"],
            "outcome": row["outcome"], "detail": row["detail"], "hash": row["hash"]}


class AuditController(Controller):
    path = "/audit"
    tags = ["audit"]

    @get("", summary="Audit events, newest first, with filters and cursor paging")
    async def list_events(
        self,
        db: AsyncSession,
        principal: Principal,
        state: State,
        from_: Annotated[Instant | None, Parameter(query="from")] = None,
        to: Instant | None = None,
        actor_type: Literal["key", "admin", "subject", "system"] | None = None,
        actor_id: str | None = None,
        action: list[str] | None = None,
        object_type: str | None = None,
        object_id: str | None = None,
        subject: Annotated[str | None, Parameter(description="A person's id; matched by its keyed hash")] = None,
        outcome: Literal["allowed", "denied"] | None = None,
        cursor: str | None = None,
        limit: int | None = None,
    ) -> AuditPage:
        principal.require_admin()
        from_, to = require_offset(from_, "from"), require_offset(to, "to")
        size = page_limit(limit)
        before_seq = decode_cursor(cursor)
        if before_seq is not None and not isinstance(before_seq, int):
            raise BadRequest("This cursor is not one the API handed out.", param="cursor", code="invalid_cursor")
        rows = await repo.list_events(
            db, principal.org_id, after=from_, before=to, actor_type=actor_type, actor_id=actor_id,
            actions=action or [], object_type=object_type, object_id=object_id,
            subject_hash=service.subject_hash(state.settings.secret, principal.org_id, subject),
            outcome=outcome, before_seq=before_seq, limit=size + 1,
        )
        more = len(rows) > size
        rows = rows[:size]
        filters = {k: v for k, v in {"from": from_, "to": to, "actor_type": actor_type, "actor_id": actor_id,
                                     "action": action, "object_type": object_type, "object_id": object_id,
                                     "subject": bool(subject), "outcome": outcome}.items() if v}
        await service.record(db, org_id=principal.org_id, actor=principal.actor, action="audit.read",
                             secret=state.settings.secret, object_type="audit",
                             detail={"route": "GET /audit", "filters": filters, "count": len(rows)})
        return msgspec.convert({"data": [event_document(r) for r in rows],
                                "next_cursor": encode_cursor(rows[-1]["seq"]) if more else None}, AuditPage)

    @get("/verify", summary="Check the organisation's hash chain")
    async def verify(self, db: AsyncSession, principal: Principal) -> ChainStatus:
        principal.require_admin()
        report = await service.verify_org(db, principal.org_id)
        return ChainStatus(org_id=report.org_id, events=report.events, intact=report.intact,
                           broken_at_seq=report.broken_at_seq, problem=report.problem)
