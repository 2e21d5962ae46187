"""TRN-7: reading a kept response."""

from __future__ import annotations

from typing import Any

from backend.access.context import RequestContext
from backend.domains.threads import repository as threads_repo
from backend.domains.threads import rules as thread_rules
from backend.domains.turns import abandoned, documents
from backend.domains.turns import repository as repo
from backend.errors import NotFound


async def reachable(ctx: RequestContext, response_id: str, param: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The response and its thread, when this request may see the thread. Otherwise the 404 of a response that
    does not exist, naming nothing else (PLT-9/PLT-10: the thread's id would tell that the response exists)."""
    row = await repo.get(ctx.db, ctx.org_id, response_id)
    thread = None
    if row is not None and row["thread_id"] is not None:
        thread = await threads_repo.get_thread(ctx.db, thread_rules.threads_scope(ctx), row["thread_id"])
    if row is None or thread is None:
        raise NotFound(f"No response {response_id!r} is reachable with this credential.", param=param)
    return row, thread


async def read(ctx: RequestContext, response_id: str) -> dict[str, Any]:
    """The response with its trace, to a request that may see its thread; 404 once the thread is gone. An
    administrator's read is audited like her reads of the thread it belongs to (PLT-2)."""
    ctx.require_threads()
    row, _ = await reachable(ctx, response_id, param="response_id")
    await thread_rules.admin_read(ctx, "GET /responses/{id}", ids=[response_id], object_id=row["thread_id"])
    return documents.document(await abandoned.settled(ctx, row), with_trace=True)
