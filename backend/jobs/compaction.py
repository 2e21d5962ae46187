"""The summary job (TRN-6): thin; each step runs in a transaction of its own with a system context."""

from __future__ import annotations

from typing import Any

from procrastinate import JobContext

from backend.access.actor import Actor
from backend.domains.compaction import summaries
from backend.domains.compaction.settings import CompactionSettings
from backend.jobs.resources import resources
from backend.providers.chat import ModelError

ACTOR = Actor("system", "compaction")
MOST_PER_RUN = 200  # summaries one run writes at most; the thread's next turn queues the job again


async def summarise(context: JobContext, *, org_id: str, thread_id: str, settings: dict[str, Any],
                    key_id: str | None, model_id: str) -> int:
    """Write the thread's missing summaries, oldest first; returns how many were written."""
    system = resources(context).system
    compaction = CompactionSettings(**settings)
    written = 0
    for _ in range(MOST_PER_RUN):
        async with system(org_id, ACTOR) as ctx:
            work = await summaries.next_summary(ctx, thread_id, compaction, model_id) if ctx else None
        if work is None:
            break
        try:
            answer = await summaries.ask_model(work)
        except ModelError as error:  # tokens a failed call spent are metered; the job is retried later
            async with system(org_id, ACTOR) as ctx:
                if ctx is not None:
                    await summaries.meter(ctx, work, error.input_tokens, error.output_tokens, key_id)
            raise
        async with system(org_id, ACTOR) as ctx:
            if ctx is None or not await summaries.store_summary(ctx, work, answer, key_id):
                break
        written += 1
    return written
