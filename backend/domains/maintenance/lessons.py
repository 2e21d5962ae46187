"""Maintenance lessons (EXT-14): when at least `min_episodes` of a person's episodes went alike (all `succeeded`
or all `failed`) and taught no lesson before, the helper model is asked for one short sentence, stored as her
`lesson` record with `source: maintenance`. What is sent is pseudonymised; nothing is sent for a person the
helper model may not read."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from backend.access.context import RequestContext
from backend.domains.maintenance import repository as repo
from backend.domains.maintenance.helper import Asked, ask, hide, may_read, meter
from backend.domains.memory import writes
from backend.errors import ApiError, storable
from backend.providers.chat import ModelSpec
from shared.schemas.memory import MemoryCreate

log = logging.getLogger("coremem.maintenance")
MOST_PEOPLE = 20  # people asked about per store and pass
ASK = """The numbered lines are sessions of one person with an assistant that all ended {result}. Write one \
short sentence for the assistant: {what}. Answer JSON only: {{"text": "the sentence"}}."""
WHAT = {"succeeded": "a way of working with this person that went well", "failed": "a pitfall to avoid with this "
        "person"}
SCHEMA = {"type": "object", "additionalProperties": False, "required": ["text"],
          "properties": {"text": {"type": "string"}}}


@dataclass(frozen=True)
class Question:
    person: str
    result: str
    episode_ids: tuple[str, ...]
    lines: tuple[str, ...]


@dataclass(frozen=True)
class LessonWork:
    index_id: str
    spec: ModelSpec
    questions: tuple[Question, ...]
    started_at: datetime


async def to_ask(ctx: RequestContext, index_id: str, spec: ModelSpec | None, min_episodes: int,
                 started_at: datetime) -> LessonWork | None:
    if spec is None:
        return None
    groups: dict[tuple[str, str], list[dict[str, str]]] = {}
    for row in await repo.unused_episodes(ctx.db, ctx.org_id, index_id):
        groups.setdefault((row["subject"], row["result"]), []).append(row)
    questions = []
    for (person, result), rows in groups.items():
        if len(rows) < min_episodes or not may_read(ctx.org, person):
            continue
        chosen = rows[:min_episodes]
        hidden = [hide(r["text"], ctx.settings.pii_detector) for r in chosen]
        if any(h is None for h in hidden):
            continue
        questions.append(Question(person, result, tuple(r["id"] for r in chosen),
                                  tuple(f"{n}. {h}" for n, h in enumerate(hidden))))
        if len(questions) >= MOST_PEOPLE:
            break
    return LessonWork(index_id, spec, tuple(questions), started_at) if questions else None


async def ask_all(work: LessonWork) -> list[Asked]:
    return [await ask(work.spec, ASK.format(result=q.result, what=WHAT[q.result]), "\n".join(q.lines), SCHEMA)
            for q in work.questions]


async def write(ctx: RequestContext, work: LessonWork, answers: list[Asked]) -> int:
    """Her lesson records, each with the episodes it was drawn from (never used again)."""
    written = 0
    for question, asked in zip(work.questions, answers, strict=True):
        await meter(ctx, asked)
        text = (asked.answer or {}).get("text")
        if not isinstance(text, str) or not text.strip() or "<" in text or not storable(text):
            continue  # nothing usable, placeholders the real values of which are not known here, or a NUL or
            # lone surrogate (JSON's `\u0000`, `\ud800`), which PostgreSQL cannot hold
        if await repo.still_unused(ctx.db, ctx.org_id, question.episode_ids) != set(question.episode_ids):
            continue
        kind = "workflow" if question.result == "succeeded" else "pitfall"
        body = MemoryCreate(index_id=work.index_id, type="lesson", text=text.strip()[:8000],
                            metadata={"lesson": {"kind": kind, "basis": "model"}})
        try:  # a lesson refused (the memory rules, her erasure) is skipped; the rest of the pass still commits
            async with ctx.db.begin_nested():
                draft = await writes.prepare(ctx, body, source="maintenance",
                                             provenance={"episode_ids": list(question.episode_ids)})
                draft.values["subject"] = question.person
                ids, _ = await writes.write(ctx, [draft], started_at=work.started_at)
                await repo.use_episodes(ctx.db, ctx.org_id, ids[0], question.episode_ids)
        except ApiError as refused:
            log.warning("maintenance: a lesson for %s in %s/%s was not written: %s", question.person, ctx.org_id,
                        work.index_id, refused.message)
            continue
        written += 1
    return written
