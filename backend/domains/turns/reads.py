"""TRN-7: reading a kept response."""

from __future__ import annotations

from typing import Any

from backend.access.context import RequestContext
from backend.domains.threads import repository as threads_repo
from backend.domains.threads import rules as thread_rules
from backend.domains.turns import documents
from backend.domains.turns import repository as repo
from backend.errors import NotFound


async def read(ctx: RequestContext, response_id: str) -> dict[str, Any]:
    """The response with its trace, to a request that may see its thread; 404 once the thread is gone. An
    administrator's read is audited like her reads of the thread it belongs to (PLT-2)."""
    ctx.require_threads()
    row = await repo.get(ctx.db, ctx.org_id, response_id)
    if row is None or row["thread_id"] is None:
        raise NotFound(f"No response {response_id!r} is reachable with this credential.", param="response_id")
    if await threads_repo.get_thread(ctx.db, thread_rules.threads_scope(ctx), row["thread_id"]) is None:
        raise NotFound(f"No response {response_id!r} is reachable with this credential.", param="response_id")
    await thread_rules.admin_read(ctx, "GET /responses/{id}", ids=[response_id], object_id=row["thread_id"])
    return documents.document(row, with_trace=True)
