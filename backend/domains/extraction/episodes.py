"""Episodes and lessons of a session (EXT-12, EXT-13).

A session is what one planning pass cuts from a quiet thread: the items from its cursor to its end. The last
window of that pass carries `session_first_position`; reading it asks the model for the session's episode (and
lessons) and writes them with the window's records in the window's one transaction. The structured fields are
the platform's own (items, responses, tools); the model gives the intent, the text and its reading of the result.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import msgspec

from backend.access.context import RequestContext
from backend.domains.extraction import session_repository as srepo
from backend.domains.memory import writes
from backend.domains.memory.vectors import embed, model_of
from backend.errors import ValidationFailed
from shared.schemas.memory import MemoryCreate

if TYPE_CHECKING:
    from backend.domains.extraction.answer import Episode, Lesson
    from backend.domains.extraction.reading import WindowWork

# EXT-13: a lesson in nearly the same words as one she has (cosine similarity of their vectors, both made with
# the index's current embedding setting) confirms that one instead of being written.
LESSON_SIMILARITY = 0.92
STOPPED_SHORT = frozenset({"failed", "in_progress", "cancelled", "incomplete"})


@dataclass(frozen=True)
class Session:
    """The platform's facts about one session (EXT-12)."""

    first_item_id: str
    last_item_id: str
    started: str
    ended: str
    response_ids: tuple[str, ...]
    agent_id: str | None
    agent_version: int | None
    tools: tuple[dict[str, str], ...]
    stopped_short: bool  # the last response failed or did not complete


def _instant(value: Any) -> str:
    return str(value.isoformat().replace("+00:00", "Z"))


async def session_of(ctx: RequestContext, thread_id: str, first: int, last: int) -> Session | None:
    items = await srepo.session_items(ctx.db, ctx.org_id, thread_id, first, last)
    if not items:
        return None
    response_ids = tuple(dict.fromkeys(i["response_id"] for i in items if i["response_id"]))
    turns = await srepo.responses(ctx.db, ctx.org_id, response_ids)
    failed_calls = {i["tool"]["call_id"] for i in items
                    if i["type"] == "function_call_output" and i["tool"] and i["tool"].get("error")}
    tools = tuple({"name": str(i["tool"].get("name") or "?"),
                   "status": "failed" if i["tool"].get("call_id") in failed_calls
                   else str(i["tool"].get("status") or "completed")}
                  for i in items if i["type"] == "function_call" and i["tool"])
    last_turn = turns[-1] if turns else None
    agent = next((t for t in reversed(turns) if t["agent_id"]), None)
    return Session(first_item_id=items[0]["id"], last_item_id=items[-1]["id"],
                   started=_instant(items[0]["created_at"]), ended=_instant(items[-1]["created_at"]),
                   response_ids=tuple(t["id"] for t in turns), agent_id=agent["agent_id"] if agent else None,
                   agent_version=agent["agent_version"] if agent else None, tools=tools,
                   stopped_short=last_turn is not None and last_turn["status"] in STOPPED_SHORT)


def basis(session: Session, episode: Episode | None) -> tuple[str, str]:
    """(`result`, `result_basis`) in the spec's order: the person's reaction, else the records (the last response
    failed or stopped short: the result is `failed`), else the model's judgement."""
    if episode is not None and episode.result_basis == "reaction":
        return episode.result, "reaction"
    if session.stopped_short:
        return "failed", "records"
    return (episode.result if episode is not None else "unknown"), "judge"


def part(work: WindowWork, session: Session, episode: Episode | None) -> dict[str, Any]:
    result, result_basis = basis(session, episode)
    doc: dict[str, Any] = {"from": session.started, "to": session.ended, "thread_id": work.thread_id,
                           "first_item_id": session.first_item_id, "last_item_id": session.last_item_id}
    if episode is not None and episode.intent:
        doc["intent"] = work.restore(episode.intent)
    doc.update({"result": result, "result_basis": result_basis, "response_ids": list(session.response_ids),
                "agent_id": session.agent_id, "agent_version": session.agent_version, "tools": list(session.tools)})
    return doc


def text_of(work: WindowWork, episode: Episode | None, doc: dict[str, Any]) -> str:
    """The episode's text opens with the intent (EXT-12)."""
    said = work.restore(episode.text) if episode is not None else None
    said = said or f"A conversation that ended {doc['result']}."
    intent = doc.get("intent")
    if intent and not said.casefold().startswith(intent.casefold()):
        said = f"{intent.rstrip()} {said}"
    return said[:8000]


def _create(work: WindowWork, type_: str, text: str, **extra: Any) -> MemoryCreate:
    try:
        return msgspec.convert({"index_id": work.index_id, "type": type_, "text": text, **extra}, MemoryCreate)
    except msgspec.ValidationError as exc:
        raise ValidationFailed(f"A {type_} the model wrote is not valid: {exc}") from None


async def write_episode(ctx: RequestContext, work: WindowWork, session: Session, episode: Episode | None) -> str:
    """One `episode` record of the thread's person (shared for a thread naming nobody), confidence 1.0."""
    doc = part(work, session, episode)
    draft = await writes.prepare(ctx, _create(work, "episode", text_of(work, episode, doc), confidence=1.0),
                                 source="extraction", provenance=work.provenance(), episode=doc)
    ids, _ = await writes.write(ctx, [draft], started_at=work.started_at)
    return ids[0]


async def write_lessons(ctx: RequestContext, work: WindowWork, lessons: list[Lesson],
                        confirm: Callable[[RequestContext, str], Awaitable[None]]) -> dict[str, int]:
    """Up to three lessons of the session's person; none for a thread naming nobody (EXT-13). The same words
    confirm her lesson; nearly the same words too, when the index embeds and both have vectors."""
    counts = {"written": 0, "confirmed": 0}
    if work.person is None:
        return counts
    drafts = [await writes.prepare(ctx, _create(work, "lesson", work.restore(lesson.text) or lesson.text,
                                                metadata={"lesson": {"kind": lesson.kind, "basis": lesson.basis}}),
                                   source="extraction", provenance=work.provenance()) for lesson in lessons[:3]]
    await writes.lock_same_words(ctx, drafts)  # all before the first check, in one order (as `apply`'s records)
    for draft in drafts:
        if await writes.confirm_same_words(ctx, draft) is not None:
            counts["confirmed"] += 1
            continue
        if draft.index.get("embedding"):
            vector = (await embed(draft.index, [draft.values["text"]]))[0]
            model = model_of(draft.index, vector)
            near = None if vector is None or model is None else await srepo.nearest_lesson(
                ctx.db, ctx.org_id, work.index_id, work.person, vector, model, LESSON_SIMILARITY)
            if near is not None:
                await confirm(ctx, near)
                counts["confirmed"] += 1
                continue
        await writes.write(ctx, [draft], started_at=work.started_at)
        counts["written"] += 1
    return counts
