"""Contested marking (MEM-16): pairs of records that may contradict each other are put to the helper model; the
pairs it names are marked `contested`, each naming its partner. Pairs are only made within one owner's records
plus the shared ones, of the same type, with different normalised words that share most of their words."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from backend.access.context import RequestContext
from backend.domains.maintenance import repository as repo
from backend.domains.maintenance.helper import Asked, ask, hide, may_read, meter
from backend.domains.memory import repository as memory_repo
from backend.providers.chat import ModelSpec

READ = 200  # newest uncontested records of a store looked at per pass
MOST_PAIRS = 20  # pairs put to the helper model per pass
OVERLAP = 0.5  # shared words / all words of the two texts, for a pair to be asked about
ASK = """Each numbered line holds two statements noted about the same person (or the organisation). Name the \
pairs whose statements cannot both be true now. Answer JSON only: {"contradictions": [pair numbers]}."""
SCHEMA = {"type": "object", "additionalProperties": False, "required": ["contradictions"],
          "properties": {"contradictions": {"type": "array", "items": {"type": "integer"}}}}


@dataclass(frozen=True)
class Pairs:
    spec: ModelSpec
    pairs: tuple[tuple[str, str], ...]
    lines: tuple[str, ...]


def _words(text: str) -> set[str]:
    return {w.strip(".,;:!?()\"'").casefold() for w in text.split() if len(w) > 2}


def candidates(rows: Sequence[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    found = []
    words = [_words(r["text"]) for r in rows]  # once per record, not once per pair
    for i, a in enumerate(rows):
        for j in range(i + 1, len(rows)):
            b = rows[j]
            if a["type"] != b["type"] or a["norm_hash"] == b["norm_hash"]:
                continue
            if a["subject"] != b["subject"] and None not in (a["subject"], b["subject"]):
                continue  # never across two people
            wa, wb = words[i], words[j]
            if wa and wb and (shared := len(wa & wb)) / (len(wa) + len(wb) - shared) >= OVERLAP:
                found.append((a, b))
                if len(found) >= MOST_PAIRS:
                    return found
    return found


async def to_ask(ctx: RequestContext, index_id: str, spec: ModelSpec | None) -> Pairs | None:
    if spec is None:
        return None
    rows = [r for r in await repo.contestable(ctx.db, ctx.org_id, index_id, READ) if may_read(ctx.org, r["subject"])]
    pairs: list[tuple[str, str]] = []
    lines: list[str] = []
    for a, b in candidates(rows):
        first, second = hide(a["text"], ctx.settings.pii_detector), hide(b["text"], ctx.settings.pii_detector)
        if first is None or second is None:
            continue
        lines.append(f"{len(pairs)}. {first} | {second}")
        pairs.append((a["id"], b["id"]))
    return Pairs(spec, tuple(pairs), tuple(lines)) if pairs else None


async def ask_pairs(work: Pairs) -> Asked:
    return await ask(work.spec, ASK, "\n".join(work.lines), SCHEMA)


async def mark(ctx: RequestContext, work: Pairs, asked: Asked) -> int:
    """Mark the pairs the helper model named, when both records are still active and uncontested."""
    await meter(ctx, asked)
    named = (asked.answer or {}).get("contradictions")
    if not isinstance(named, list):
        return 0
    marked = 0
    for n in sorted({p for p in named if isinstance(p, int) and 0 <= p < len(work.pairs)}):
        first, second = work.pairs[n]
        if await repo.still_contestable(ctx.db, ctx.org_id, [first, second]) != {first, second}:
            continue
        for record_id, partner in ((first, second), (second, first)):
            await memory_repo.update_record(ctx.db, ctx.org_id, record_id,
                                            {"contested": True, "contested_with": partner}, touch=False, bump=True)
            await memory_repo.snapshot_versions(ctx.db, ctx.org_id, [record_id], action="updated",
                                                actor_type=ctx.actor.type, actor_id=ctx.actor.id, partner_id=partner)
        marked += 1
    return marked
