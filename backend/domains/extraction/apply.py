"""Writing a window's answer (EXT-9, EXT-10) as the switch's author acting for the thread's person: new records,
confirmations (also of a "new" record in the same words) and corrections with history, through the memory
domain's own writes. Types outside the switch are dropped and counted."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec

from backend.access.context import RequestContext
from backend.domains.memory import decay, writes
from backend.domains.memory import repository as memory_repo
from backend.domains.memory.rules import check_change, check_not_erased, check_write
from backend.errors import NotFound, ValidationFailed
from shared.schemas.memory import MemoryCreate

if TYPE_CHECKING:
    from backend.domains.extraction.answer import Answer, Memory
    from backend.domains.extraction.reading import WindowWork


def _restore(work: WindowWork, text: str | None) -> str | None:
    return work.pz.restore(text) if work.pz is not None and text is not None else text


def _body(work: WindowWork, memory: Memory) -> MemoryCreate:
    raw: dict[str, Any] = {"index_id": work.index_id, "type": memory.type, "text": _restore(work, memory.text)}
    if memory.confidence is not None:
        raw["confidence"] = memory.confidence
    if memory.type == "commitment" and (memory.due_at is not None or memory.promised_to is not None):
        raw["commitment"] = {"due_at": memory.due_at, "promised_to": _restore(work, memory.promised_to)}
    try:
        return msgspec.convert(raw, MemoryCreate, from_attributes=False)
    except msgspec.ValidationError as exc:
        raise ValidationFailed(f"A record the model wrote is not valid: {exc}") from None


async def confirm(ctx: RequestContext, record_id: str) -> None:
    """The record the model names is confirmed: one more confirmation and a history version (EXT-10). A
    confirmation changes the record, so it needs `memory_write` on the record as it is (PLT-8), like every write."""
    current = await memory_repo.get(ctx.db, ctx.scope, decay.half_lives(ctx.org, ctx.principal.key), record_id,
                                    for_update=True)
    if current is None:
        raise NotFound(f"The record {record_id!r} is not reachable for the switch's author.", param="target_id")
    check_change(ctx, current, "write")
    check_write(ctx, current["subject"], current["labels"], object_id=record_id,
                detail={"index_id": current["index_id"], "type": current["type"], "reason": "confirm"})
    await check_not_erased(ctx, [current["subject"]])
    await memory_repo.confirm(ctx.db, ctx.org_id, record_id)
    await memory_repo.snapshot_versions(ctx.db, ctx.org_id, [record_id], action="confirmed",
                                        actor_type=ctx.actor.type, actor_id=ctx.actor.id)


async def apply(ctx: RequestContext, work: WindowWork, answer: Answer) -> dict[str, int]:
    """Every memory of the answer, in order; the counts the window keeps."""
    counts = {"written": 0, "confirmed": 0, "replaced": 0, "dropped": 0}
    drafts = {i: await writes.prepare(ctx, _body(work, memory), source="extraction", provenance=work.provenance())
              for i, memory in enumerate(answer.memories) if memory.type in work.types and memory.action != "confirm"}
    # Every new text's words are locked before the first record is touched, in one order: two windows writing the
    # same texts in opposite orders would otherwise each hold one and wait for the other.
    await writes.lock_same_words(ctx, [d for i, d in drafts.items() if answer.memories[i].action == "new"])
    for i, memory in enumerate(answer.memories):
        if memory.type not in work.types:
            counts["dropped"] += 1
            continue
        if memory.action == "confirm":
            assert memory.target_id is not None
            await confirm(ctx, memory.target_id)
            counts["confirmed"] += 1
            continue
        draft = drafts[i]
        if memory.action == "replace":
            assert memory.target_id is not None
            await writes.replace(ctx, memory.target_id, draft, param="target_id")
            counts["replaced"] += 1
        elif await writes.confirm_same_words(ctx, draft) is not None:
            counts["confirmed"] += 1
        else:
            await writes.write(ctx, [draft], started_at=work.started_at)
            counts["written"] += 1
    return counts
