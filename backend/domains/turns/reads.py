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
    doc = documents.document(await abandoned.settled(ctx, row), with_trace=True)
    if doc["trace"] and doc["trace"].get("injection") and not _own_turn(ctx, row):
        doc["trace"] = {**doc["trace"], "injection": None}
    return doc


def _own_turn(ctx: RequestContext, row: dict[str, Any]) -> bool:
    """Whether the reader may see what the turn's memory block held. The block is the turn's person's own
    records (INJ-4): in a group thread another participant, or a key reading without her, sees the turn but not
    the ids and section counts of records he could not read himself (PLT-9). Administrators see every record."""
    return ctx.is_admin or row["subject"] is None or ctx.person == row["subject"]
