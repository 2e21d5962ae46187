"""The promotion analyses (EXT-15), run by the maintenance pass while the organisation's `improvements.enabled`
and the store's `promotion.enabled` are on: the same normalised text held by two or more people, nearly the same
text by embeddings when the index embeds, and (with a helper model) one person's fact judged general knowledge.
Never proposed: a fact about a person, or one holding an address, phone number, e-mail address or link."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from backend.access.context import RequestContext
from backend.domains.maintenance.helper import Asked, ask, hide, may_read, meter, names_personal_data
from backend.domains.proposals import repository as repo
from backend.ids import new_id
from backend.providers.chat import ModelSpec
from backend.providers.embeddings import fingerprint

SIMILARITY = 0.92  # two people's facts this alike (cosine, same embedding setting) propose the earlier words
GROUPS_PER_PASS = 200
JUDGED_PER_PASS = 30
JUDGE = """You read statements people's assistants noted. For each, decide whether it is general knowledge of \
the organisation: true and useful whoever said it, not about the speaker or any other person. Answer JSON only: \
{"general": [the numbers of the general statements]}."""
JUDGE_SCHEMA = {"type": "object", "additionalProperties": False, "required": ["general"],
                "properties": {"general": {"type": "array", "items": {"type": "integer"}}}}


def analyses_on(org: Mapping[str, Any], sections: Any) -> bool:
    """The organisation holds `improvements` and has `improvements.enabled` on, and the store asks for promotion."""
    return ("improvements" in (org.get("capabilities") or []) and bool((org.get("improvements") or {}).get("enabled"))
            and bool(sections.promotion.enabled))


async def _propose(ctx: RequestContext, index_id: str, type_: str, text: str, norm_hash: str, basis: str,
                   evidence: Sequence[tuple[str, str]]) -> bool:
    people = sorted({subject for _, subject in evidence})
    if names_personal_data(text, people):
        return False
    return await repo.insert_proposal(ctx.db, {"org_id": ctx.org_id, "id": new_id("prp"), "index_id": index_id,
                                               "type": type_, "text": text, "norm_hash": norm_hash, "basis": basis},
                                      evidence)


async def by_records(ctx: RequestContext, index: Mapping[str, Any]) -> int:
    """Proposals from what two or more people hold: the same normalised words, or (embedding indexes) nearly."""
    made = 0
    for group in await repo.same_text_groups(ctx.db, ctx.org_id, index["id"], GROUPS_PER_PASS):
        evidence = [(str(record_id), str(subject)) for record_id, subject in group["records"]]
        made += await _propose(ctx, index["id"], group["type"], group["text"], group["norm_hash"], "same_text",
                               evidence)
    embedding = index.get("embedding")
    if embedding:
        pairs = await repo.similar_pairs(ctx.db, ctx.org_id, index["id"], str(fingerprint(embedding)),
                                         int(embedding["dimensions"]), SIMILARITY, GROUPS_PER_PASS)
        for pair in pairs:
            evidence = [(pair["id"], pair["subject"]), (pair["other_id"], pair["other_subject"])]
            made += await _propose(ctx, index["id"], pair["type"], pair["text"], pair["norm_hash"], "similar",
                                   evidence)
    return made


@dataclass(frozen=True)
class Judging:
    """One person's facts to put to the helper model, hidden, with what a proposal of each needs."""

    index_id: str
    spec: ModelSpec
    facts: tuple[dict[str, Any], ...]
    hidden: tuple[str, ...]


async def to_judge(ctx: RequestContext, index_id: str, spec: ModelSpec | None) -> Judging | None:
    """The facts the helper model may judge: never-proposed ones and those of people it may not read left out."""
    if spec is None:
        return None
    facts, hidden = [], []
    for fact in await repo.single_facts(ctx.db, ctx.org_id, index_id, JUDGED_PER_PASS):
        if names_personal_data(fact["text"], [fact["subject"]]) or not may_read(ctx.org, fact["subject"]):
            continue
        words = hide(fact["text"], ctx.settings.pii_detector)
        if words is not None:
            facts.append(fact)
            hidden.append(words)
    return Judging(index_id, spec, tuple(facts), tuple(hidden)) if facts else None


async def judge(work: Judging) -> Asked:
    """The helper model's judgement, asked while no transaction is open."""
    lines = "\n".join(f"{n}. {text}" for n, text in enumerate(work.hidden))
    return await ask(work.spec, JUDGE, lines, JUDGE_SCHEMA)


async def by_judgement(ctx: RequestContext, work: Judging, asked: Asked) -> int:
    """Proposals of the facts judged general knowledge that are still active and still nobody's proposal."""
    await meter(ctx, asked)
    raw = (asked.answer or {}).get("general")
    picks = sorted({p for p in raw if isinstance(p, int) and 0 <= p < len(work.facts)}) if isinstance(
        raw, list) else []
    made = 0
    current = {f["id"] for f in await repo.single_facts(ctx.db, ctx.org_id, work.index_id, JUDGED_PER_PASS * 4)}
    for n in picks:
        fact = work.facts[n]
        if fact["id"] in current:
            made += await _propose(ctx, work.index_id, fact["type"], fact["text"], fact["norm_hash"], "general",
                                   [(fact["id"], fact["subject"])])
    return made
