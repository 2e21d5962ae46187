"""TRN-8/TRN-11: a turn whose process stopped (killed, crashed, its machine gone) leaves its response
`in_progress`. Once it is older than any turn can run, the next request that reads it (a repeat with its
Idempotency-Key, or GET /responses/{id}) fails it, in that request's transaction: its key then replays the
failure, as it replays any failed turn, instead of answering 409 forever."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from backend.access.context import RequestContext
from backend.config import Settings
from backend.domains.turns import documents
from backend.domains.turns import repository as repo
from backend.domains.usage import repository as usage
from backend.errors import NotFound

# The OpenAI SDK waits at most this long before a retry (its MAX_RETRY_AFTER_DELAY, a server's Retry-After).
RETRY_WAIT_MAX_SECONDS = 120.0
# The turn's own work besides the model: the memory block, platform tools, its writes.
MARGIN_SECONDS = 600.0
ERROR = {"code": "internal_error",
         "message": "The process running this turn stopped before the turn finished, and it will not finish. Send "
                    "the request again (with a new Idempotency-Key)."}


def longest(settings: Settings) -> timedelta:
    """The longest a turn can run: each model call (one per tool round, and the answer after the last) may use
    every attempt and wait the most between them (loop.options passes these settings to the SDK)."""
    per_call = (settings.model_timeout_seconds + RETRY_WAIT_MAX_SECONDS) * (settings.model_max_retries + 1)
    return timedelta(seconds=per_call * (settings.turn_max_tool_rounds + 1) + MARGIN_SECONDS)


async def settled(ctx: RequestContext, row: dict[str, Any]) -> dict[str, Any]:
    """The response row, failed now when it is `in_progress` past the longest a turn can run. A turn still
    running, or one that finished meanwhile, is left as it is."""
    if row["status"] != "in_progress":
        return row
    failed = await repo.fail_abandoned(ctx.db, ctx.org_id, row["id"], longest(ctx.settings), ERROR)
    return failed if failed is not None else row


async def finished_late(ctx: RequestContext, response_id: str, usage_rows: list[dict[str, Any]],
                        spent: dict[str, int]) -> dict[str, Any]:
    """A turn that finished after all, once its response was failed here: its caller may have been told so and
    sent the turn again, so nothing of its end is kept (items, working state, placeholders: the closing
    transaction is rolled back) but its cost, which is real: its usage rows and its usage on the response. It
    answers the response as it stands, failed."""
    await ctx.db.rollback()
    await usage.record_many(ctx.db, usage_rows)
    row = await repo.add_usage(ctx.db, ctx.org_id, response_id, spent)
    if row is None:  # its organisation was deleted meanwhile
        raise NotFound(f"The response {response_id!r} no longer exists.", param="response_id")
    return documents.document(row)
