"""Cutting quiet threads into windows (EXT-7, EXT-8), for the plan job (backend/jobs/extraction.py).

A run walks the switch's eligible threads in id order, a batch per transaction: each thread's items past its
cursor become windows of at most N messages and about M tokens, the cursor moves past them and a read job is
queued for the thread, all in that transaction. A retried plan job finds the cursors moved and the windows'
unique start positions taken, so it cuts nothing twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from backend.access.context import RequestContext
from backend.domains.extraction import queue
from backend.domains.extraction import repository as repo
from backend.domains.extraction.switch import state_of
from backend.ids import new_id

THREADS_PER_BATCH = 200
MESSAGE_TYPES = frozenset({"message", "refusal"})
TOOL_TYPES = frozenset({"function_call", "function_call_output"})
TOOL_EXCERPT = 300  # characters of a tool call or result a window shows (EXT-8)


def cut(items: Sequence[dict[str, Any]], most_messages: int, most_tokens: int) -> list[tuple[int, int, int, str,
                                                                                           str]]:
    """Windows over `items` (position order): (first, last, count, first item id, last item id). Only messages
    and refusals count as messages; tool items are read as excerpts; a stretch without a message is no window."""
    windows: list[tuple[int, int, int, str, str]] = []
    current: list[dict[str, Any]] = []
    messages = tokens = 0

    def close() -> None:
        if any(item["type"] in MESSAGE_TYPES for item in current):
            windows.append((current[0]["position"], current[-1]["position"], len(current), current[0]["id"],
                            current[-1]["id"]))

    for item in items:
        if item["type"] not in MESSAGE_TYPES and item["type"] not in TOOL_TYPES:
            continue  # reasoning and anything else is never read
        size = (item["size"] if item["type"] in MESSAGE_TYPES else min(item["size"], TOOL_EXCERPT)) // 4 + 1
        is_message = item["type"] in MESSAGE_TYPES
        if current and (tokens + size > most_tokens or (is_message and messages + 1 > most_messages)):
            close()
            current, messages, tokens = [], 0, 0
        current.append(item)
        messages += is_message
        tokens += size
    if current:
        close()
    return windows


async def plan_batch(ctx: RequestContext, index_id: str, run_id: str, after_id: str) -> str | None:
    """Cut the next batch of eligible threads (ids after `after_id`); the last thread id done, or None at the end
    (also when the switch cannot run)."""
    switch = await repo.get_switch(ctx.db, ctx.org_id, index_id)
    if switch is None or await state_of(ctx, switch) != "active":
        return None
    threads = await repo.eligible_threads(ctx.db, ctx.org_id, switch, after_id, THREADS_PER_BATCH)
    settings = ctx.settings
    for thread in threads:
        items = await repo.light_items(ctx.db, ctx.org_id, thread["id"], thread["read_to"], thread["last_position"])
        rows = [{"org_id": ctx.org_id, "id": new_id("win"), "index_id": index_id, "thread_id": thread["id"],
                 "run_id": run_id, "first_position": first, "last_position": last, "items": count, "state": "queued",
                 "session_first_position": None}
                for first, last, count, _, _ in cut(items, settings.extraction_window_messages,
                                                    settings.extraction_window_tokens)]
        if rows and ends_session(switch, thread):
            rows[-1]["session_first_position"] = rows[0]["first_position"]
        if await repo.insert_windows(ctx.db, rows):
            await queue.queue_thread(ctx.db, ctx.org_id, index_id, thread["id"])
        await repo.set_cursor(ctx.db, ctx.org_id, index_id, thread["id"], thread["last_position"])
    return threads[-1]["id"] if len(threads) == THREADS_PER_BATCH else None


async def unpark(ctx: RequestContext, index_id: str, run_id: str) -> int:
    """Parked windows go back to the queue once the organisation is under its monthly cap again (EXT-8)."""
    if await at_cap(ctx):
        return 0
    threads = await repo.requeue(ctx.db, ctx.org_id, index_id, "parked", run_id)
    for thread_id in threads:
        await queue.queue_thread(ctx.db, ctx.org_id, index_id, thread_id)
    return len(threads)


def ends_session(switch: dict[str, Any], thread: dict[str, Any]) -> bool:
    """EXT-12: the items a pass cuts from a quiet thread are one session; it gets an episode when `episodes` is on
    and the session settled (its thread's last change) after `episodes` was switched on."""
    since = switch.get("episodes_since")
    return bool(switch["episodes"]) and since is not None and thread["updated_at"] >= since


async def at_cap(ctx: RequestContext) -> bool:
    """Whether the organisation used its monthly model tokens; the month's usage is summed only when it has a cap
    (the sum reads every usage row of the month, too much to pay for every window when nothing caps it)."""
    cap = (ctx.org.get("limits") or {}).get("monthly_model_tokens")
    if cap is None:
        return False
    return await repo.month_tokens(ctx.db, ctx.org_id, ctx.org.get("timezone") or "UTC") >= cap
