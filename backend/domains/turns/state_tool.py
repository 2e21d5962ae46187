"""`builtin__update_working_state` (TRN-4): checked when the model calls it, written when the turn completes,
dropped when the application wrote the state meanwhile."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from backend.access.context import RequestContext
from backend.domains.memory.rules import reject_nul
from backend.domains.threads import repository as threads_repo
from backend.domains.threads import state as state_mod
from backend.domains.turns.deleted import thread_deleted
from backend.errors import NUL_MESSAGE, ApiError, ValidationFailed

if TYPE_CHECKING:
    from backend.domains.turns.turn import AgentTurn


@dataclass
class PendingState:
    """The state as the model was shown it (its version is the base a write is checked against), and what the
    turn's accepted patches make of it (`patched`: there is something to write)."""

    base_version: int
    state: dict[str, Any]
    size: int
    patched: bool = False


def shown(row: dict[str, Any] | None) -> PendingState:
    """The base of the turn's state write: the state row read for what the model is sent (None: no state yet).
    An application write after this read, even before the tool's first call, drops the turn's write."""
    current = state_mod.document(row)
    return PendingState(current["version"], current["state"], current["size"])


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
    if pending is None:  # a turn that read no state for the model: the base is the state now
        pending = shown(await threads_repo.get_state(ctx.db, ctx.org_id, thread_id))
    # What PostgreSQL cannot store is refused now, as the model's mistake it can mend: found only by the write when
    # the turn ends, it would fail the turn as the client's bad input.
    try:
        reject_nul(patch, "patch")
        merged = state_mod.merge_patch(pending.state, patch)
        size = state_mod.check_state(merged, ctx.settings.working_state_max_bytes, schema)
    except ApiError as refused:
        if refused.message == NUL_MESSAGE:
            return pending, "", f"{refused.message} It is at `{refused.param}`; the patch was not applied."
        return pending, "", refused.message
    except UnicodeEncodeError:
        return pending, "", ("The patch holds a lone surrogate (U+D800–U+DFFF, `\\ud800` without its pair), which is "
                             "no character; the patch was not applied.")
    except RecursionError:
        return pending, "", "The patch is nested too deeply; the patch was not applied."
    pending = PendingState(pending.base_version, merged, size, patched=True)
    return pending, json.dumps({"version": pending.base_version + 1, "size": size}), None


async def apply(ctx: RequestContext, thread_id: str, pending: PendingState, response_id: str,
                schema: dict[str, Any] | None) -> bool:
    """Write the turn's state unless the application wrote it since the turn read it (then audit the drop)."""
    current = await threads_repo.lock_live_state(ctx.db, ctx.org_id, thread_id)
    if current is None:  # THR-6: deleted (or its owner erased) since the turn read it; nothing of its end is kept
        raise thread_deleted(thread_id)
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
