"""`builtin__update_working_state` (TRN-4): checked when the model calls it, written when the turn completes,
dropped when the application wrote the state meanwhile."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from backend.access.context import RequestContext
from backend.domains.threads import repository as threads_repo
from backend.domains.threads import state as state_mod
from backend.errors import ApiError, ValidationFailed

if TYPE_CHECKING:
    from backend.domains.turns.turn import AgentTurn


@dataclass
class PendingState:
    """The state as read when the turn first patched it, and what the turn's patches make of it."""

    base_version: int
    state: dict[str, Any]
    size: int


async def schema_of(ctx: RequestContext, thread_id: str, agent: AgentTurn | None) -> dict[str, Any] | None:
    """The schema the turn's patches must fit: its agent's; a turn without one keeps to the thread's agent's, as
    the application's writes of the state do (THR-11)."""
    if agent is not None:
        return agent.working_state_schema
    return await threads_repo.agent_state_schema(ctx.db, ctx.org_id, thread_id)


async def call(ctx: RequestContext, thread_id: str, pending: PendingState | None, arguments: dict[str, Any],
               schema: dict[str, Any] | None) -> tuple[PendingState | None, str, str | None]:
    """Check one patch; answers (pending, output, error). A refused patch changes nothing."""
    patch = arguments.get("patch") if isinstance(arguments, dict) else None
    if not isinstance(patch, dict) or set(arguments) - {"patch"}:
        return pending, "", "The tool takes one argument, `patch`: a JSON object (a JSON merge patch)."
    if pending is None:
        row = await threads_repo.get_state(ctx.db, ctx.org_id, thread_id)
        current = state_mod.document(row)
        pending = PendingState(current["version"], current["state"], current["size"])
    merged = state_mod.merge_patch(pending.state, patch)
    try:
        size = state_mod.check_state(merged, ctx.settings.working_state_max_bytes, schema)
    except ApiError as refused:
        return pending, "", refused.message
    pending = PendingState(pending.base_version, merged, size)
    return pending, json.dumps({"version": pending.base_version + 1, "size": size}), None


async def apply(ctx: RequestContext, thread_id: str, pending: PendingState, response_id: str,
                schema: dict[str, Any] | None) -> bool:
    """Write the turn's state unless the application wrote it since the turn read it (then audit the drop)."""
    current = await threads_repo.lock_state(ctx.db, ctx.org_id, thread_id)
    if current["version"] != pending.base_version:
        await ctx.audit("thread.working_state_dropped", subject_id=ctx.person, object_type="thread",
                        object_id=thread_id, detail={"response_id": response_id, "read_version": pending.base_version,
                                                     "current_version": current["version"]})
        return False
    try:
        size = state_mod.check_state(pending.state, ctx.settings.working_state_max_bytes, schema)
    except ValidationFailed:
        return False
    await threads_repo.write_state(ctx.db, ctx.org_id, thread_id, pending.state, current["version"] + 1, size)
    return True
