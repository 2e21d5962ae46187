"""Writing summaries (TRN-6), one at a time, for the background job (backend/jobs/compaction.py).

Per summary the job runs three steps and owns their transactions: `next_summary` reads what is missing (a
short transaction), `ask_model` calls the model (no transaction held), `store_summary` writes the summary and
its usage together. The summary row is the job's mark of work done: a retry after a crash, or a second
worker, finds it and moves on, and its unique positions refuse a duplicate. A thread deleted, or a person in it
erased, while the model wrote writes nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from backend.access.context import RequestContext
from backend.domains.compaction import prompt
from backend.domains.compaction import repository as repo
from backend.domains.compaction.plan import Unit, plan
from backend.domains.compaction.settings import CompactionSettings
from backend.domains.compaction.turns import turn_starts
from backend.domains.erasure.guard import refuse_if_erased
from backend.domains.models import repository as models_repo
from backend.domains.models.service import spec_of
from backend.domains.privacy import service as privacy
from backend.domains.privacy.messages import hide_messages_aside
from backend.domains.usage import repository as usage
from backend.errors import Conflict
from backend.ids import new_id
from backend.providers.chat import CallOptions, ChatAnswer, ModelError, ModelSpec, complete

log = logging.getLogger(__name__)
JOB = "compaction"  # the usage rows' `job`


@dataclass(frozen=True)
class SummaryWork:
    """One summary to write: the unit of turns, the positions it covers, and what the model is sent."""

    org_id: str
    thread_id: str
    unit: Unit
    from_position: int
    to_position: int
    model: ModelSpec
    messages: tuple[dict[str, Any], ...]
    people: tuple[str, ...]  # whose words it holds: checked against erasure when it is written
    started_at: datetime
    pseudonymizer: Any = None  # a pseudonymised thread's (TRN-10, EXT-11): the model sees placeholders
    call: CallOptions = field(default_factory=CallOptions)  # CORE_MODEL_TIMEOUT_SECONDS, CORE_MODEL_MAX_RETRIES


async def next_summary(ctx: RequestContext, thread_id: str, settings: CompactionSettings,
                       model_id: str) -> SummaryWork | None:
    """The oldest planned summary not written yet (a level's summaries before the next level's), or None."""
    db, org_id = ctx.db, ctx.org_id
    thread = await repo.live_thread(db, org_id, thread_id)
    if thread is None or settings.mode == "window":
        return None
    index = await repo.summary_index(db, org_id, thread_id)
    anchor = max(index, key=lambda row: row["to_position"], default=None)
    after, turns_before = (anchor["to_position"], anchor["to_turn"]) if anchor else (0, 0)
    tail_starts = turn_starts(await repo.light_items(db, org_id, thread_id, after))
    written = {(row["level"], row["from_turn"], row["to_turn"]): row for row in index}
    unit = _next_missing(plan(turns_before + len(tail_starts), settings), written)
    if unit is None:
        return None
    model = await summary_model(ctx, model_id)
    if model is None:
        log.warning("compaction: no model to summarise thread %s of %s with (%r is not offered)", thread_id,
                    org_id, model_id)
        return None
    owner = [thread["subject"]] if thread["subject"] else []
    if unit.level > 1:
        children = await repo.summaries_by_id(db, org_id, [written[child.key]["id"] for child in unit.children])
        first, last = children[0]["from_position"], children[-1]["to_position"]
        messages = prompt.merge_messages(children)
        people = owner + await repo.writers_between(db, org_id, thread_id, first, last)
    else:
        starts = {turns_before + 1 + n: position for n, position in enumerate(tail_starts)}
        for row in index:  # a summary's edges are turn edges; they win over the items' own positions
            starts[row["from_turn"]], starts[row["to_turn"] + 1] = row["from_position"], row["to_position"] + 1
        starts[1] = 1
        if not await _fill_starts(ctx, thread_id, starts, (unit.first_turn, unit.last_turn + 1)):
            return None
        first, last = starts[unit.first_turn], starts[unit.last_turn + 1] - 1
        items = await repo.items_between(db, org_id, thread_id, first, last)
        if not items:
            return None
        messages = prompt.segment_messages(items)
        people = owner + [row["subject"] for row in items if row["subject"] is not None]
    pz = None
    if thread["pseudonymized"]:  # a key hid this thread's personal data from its models: so does its summary
        pz = await privacy.open_pseudonymizer(ctx, thread_id, subject=None)
        messages = await hide_messages_aside(pz, list(messages))
    call = CallOptions(timeout_seconds=ctx.settings.model_timeout_seconds, max_retries=ctx.settings.model_max_retries)
    return SummaryWork(org_id, thread_id, unit, first, last, model, tuple(messages), tuple(sorted(set(people))),
                       thread["now"], pz, call)


def _next_missing(units: tuple[Unit, ...], written: Mapping[tuple[int, int, int], Any]) -> Unit | None:
    """Children before their parent, oldest first; a unit already written needs none of its children."""
    for unit in units:
        if unit.key in written:
            continue
        missing = _next_missing(unit.children, written)
        return missing or unit
    return None


async def _fill_starts(ctx: RequestContext, thread_id: str, starts: dict[int, int], needed: tuple[int, ...]) -> bool:
    """Find where the `needed` turns start when no summary edge says so (settings changed, or an earlier
    summary failed): count the turns between the nearest known edges. False when the count disagrees with the
    turn numbers the summaries carry (then nothing is written; the turn sends those items in full)."""
    for turn in needed:
        if turn in starts:
            continue
        low = max(t for t in starts if t < turn)
        high = min(t for t in starts if t > turn)
        rows = await repo.light_items(ctx.db, ctx.org_id, thread_id, starts[low] - 1, starts[high] - 1)
        found = turn_starts(rows)
        if len(found) != high - low:
            log.warning("compaction: thread %s of %s has %d turns where its summaries count %d; not summarised",
                        thread_id, ctx.org_id, len(found), high - low)
            return False
        starts.update({low + n: position for n, position in enumerate(found) if n})
    return True


async def summary_model(ctx: RequestContext, model_id: str) -> ModelSpec | None:
    """The organisation's helper model when it names an offered model (PLT-1), else the turn's model."""
    helper = ctx.org.get("helper_model") or {}
    if helper.get("model"):
        row = await models_repo.find(ctx.db, ctx.org_id, helper["model"])
        if row is not None and row["provider"] == helper.get("provider", row["provider"]):
            return spec_of(row)
        log.warning("compaction: helper model %r of %s is not offered; using the turn's model", helper, ctx.org_id)
    row = await models_repo.find(ctx.db, ctx.org_id, model_id)
    return spec_of(row) if row is not None else None


async def ask_model(work: SummaryWork) -> ChatAnswer:
    """The summary from the model; ModelError when it fails or writes nothing (the job retries later)."""
    answer = await complete(work.model, work.messages, options=work.call)
    if not (answer.content or "").strip():
        raise ModelError("invalid_model_output", f"The model {work.model.id!r} wrote an empty summary.",
                         input_tokens=answer.input_tokens, output_tokens=answer.output_tokens)
    return answer


async def store_summary(ctx: RequestContext, work: SummaryWork, answer: ChatAnswer, key_id: str | None) -> bool:
    """Write the summary and meter its tokens, in the caller's one transaction; False when nothing was written
    (the thread was deleted or a person in it erased meanwhile, or the same summary was written already)."""
    await meter(ctx, work, answer.input_tokens, answer.output_tokens, key_id)  # spent either way
    try:  # the erasure lock before the thread's row lock, in the erasure's own order (the other order deadlocks)
        await refuse_if_erased(ctx.db, ctx.org_id, ctx.settings.secret, work.people, started_at=work.started_at)
    except Conflict:
        return False
    if await repo.live_thread(ctx.db, ctx.org_id, work.thread_id, share_lock=True) is None:
        return False
    unit = work.unit
    inserted = await repo.insert_summary(ctx.db, {
        "org_id": ctx.org_id, "id": new_id("sum"), "thread_id": work.thread_id, "from_position": work.from_position,
        "to_position": work.to_position, "level": unit.level, "model": work.model.id,
        "text": _restored(work, (answer.content or "").strip()), "from_turn": unit.first_turn,
        "to_turn": unit.last_turn})
    return inserted is not None


def _restored(work: SummaryWork, text: str) -> str:
    """A summary keeps real values, like every item; a turn hides it again when it sends it."""
    return work.pseudonymizer.restore(text) if work.pseudonymizer is not None else text


async def meter(ctx: RequestContext, work: SummaryWork, input_tokens: int, output_tokens: int,
                key_id: str | None) -> None:
    if input_tokens or output_tokens:
        await usage.record(ctx.db, org_id=ctx.org_id, model=work.model.id, input_tokens=input_tokens,
                           output_tokens=output_tokens, key_id=key_id, job=JOB)
