"""The injection block (INJ-5, INJ-6, INJ-10, INJ-11): line format and the bounded walk over candidates.

Pure code: the repository fetches a bounded, ranked list of candidates per section; this module decides
which of them fit and renders the block exactly as a model receives it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import msgspec

from backend.providers.tokens import TokenEstimator, utf8_bytes_over_four

SECTIONS = ("commitments", "behaviour", "about_this_person", "organisation", "past_sessions")
COUNTED_SECTIONS = frozenset({"about_this_person", "organisation"})  # `limit` bounds these two together
SHARED_SHARE = 0.4  # on a turn for a person, shared lines may use at most this part of the budget
BEHAVIOUR_MAX = 10
# Characters that some readers treat as line breaks although JSON leaves them raw: escaped so no line splits.
_LINE_BREAKERS = {"\u2028": "\\u2028", "\u2029": "\\u2029", "\u0085": "\\u0085"}


@dataclass(slots=True)  # not frozen: its __init__ costs three times as much, and a build makes up to ~250 of these
class Candidate:
    """One record that may be injected, with what its line needs. Read-only by convention."""

    id: str
    section: str
    type: str
    text: str
    effective_confidence: float
    owner: str | None = None
    contested: bool = False
    due_at: datetime | None = None
    promised_to: str | None = None
    episode: Mapping[str, Any] | None = None  # from, to, thread_id, first_item_id


def percent(confidence: float) -> str:
    """A whole percentage, rounding half up: floor(100*c + 0.5)."""
    return f"{math.floor(100 * confidence + 0.5)}%"


def instant(value: datetime | str | None) -> str | None:
    """RFC 3339 in UTC with `+00:00` (INJ-6), whatever the stored form: `Z` (extraction and commitments store
    that), another offset, or naive (read as UTC). A string that does not parse is left as it is."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            return value
    else:
        moment = value
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat()


_JSON = msgspec.json.Encoder()  # writes what json.dumps(…, ensure_ascii=False, separators=(",", ":")) does, ~15× faster


def compact_json(document: Mapping[str, Any]) -> str:
    text = _JSON.encode(document).decode()
    for raw, escaped in _LINE_BREAKERS.items():
        text = text.replace(raw, escaped)
    return text


def render_line(c: Candidate) -> str:
    """One record as one line of compact JSON, fields in the order INJ-6 fixes."""
    doc: dict[str, Any] = {"type": c.type, "confidence": percent(c.effective_confidence)}
    if c.section == "past_sessions":
        episode = c.episode or {}
        doc.update({"from": instant(episode.get("from")), "to": instant(episode.get("to")),
                    "thread_id": episode.get("thread_id"), "first_item_id": episode.get("first_item_id")})
        doc["text"] = c.text
    else:
        doc["text"] = c.text
        if c.type == "commitment":
            doc["due_at"] = instant(c.due_at)
            doc["promised_to"] = c.promised_to
    if c.contested:
        doc["contested"] = True
    return compact_json(doc)


@dataclass(frozen=True)
class Limits:
    budget_tokens: int
    limit: int = 20
    commitments_limit: int = 5
    episodes_limit: int = 0
    section_budgets: Mapping[str, int] = field(default_factory=dict)
    for_person: bool = False


@dataclass
class LeftOut:
    id: str
    section: str
    type: str
    reason: str  # dropped_by_count | dropped_by_budget (whole, section or shared share) | a filter reason


@dataclass
class Block:
    text: str
    lines: list[tuple[str, Candidate]]  # (line, candidate) in print order
    estimated_tokens: int
    budget_tokens: int
    dropped_by_count: int
    dropped_by_budget: int
    sections: dict[str, int]
    left_out: list[LeftOut]

    @property
    def injected_ids(self) -> list[str]:
        return [c.id for _, c in self.lines]


def build_block(candidates: Mapping[str, Sequence[Candidate]], limits: Limits,
                estimate: TokenEstimator = utf8_bytes_over_four) -> Block:
    """Walk the sections in print order; the count stops the walk, the budget skips and tries the next.

    `candidates[section]` is already ranked and bounded by the repository.
    """
    used = 0
    shared_used = 0
    shared_cap = math.floor(limits.budget_tokens * SHARED_SHARE) if limits.for_person else None
    counted = 0
    out_lines: list[str] = []
    kept: list[tuple[str, Candidate]] = []
    left: list[LeftOut] = []
    per_section = dict.fromkeys(SECTIONS, 0)
    section_caps = {"commitments": limits.commitments_limit, "behaviour": BEHAVIOUR_MAX,
                    "past_sessions": limits.episodes_limit}

    for section in SECTIONS:
        label = f"[{section}]"
        label_cost = estimate(label)
        section_used = 0
        section_budget = limits.section_budgets.get(section)
        for c in candidates.get(section, ()):
            over_count = (counted >= limits.limit if section in COUNTED_SECTIONS
                          else per_section[section] >= section_caps[section])
            if over_count:
                left.append(LeftOut(c.id, section, c.type, "dropped_by_count"))
                continue
            line = render_line(c)
            cost = estimate(line) + (label_cost if per_section[section] == 0 else 0)
            if used + cost > limits.budget_tokens:
                left.append(LeftOut(c.id, section, c.type, "dropped_by_budget"))
                continue
            if section_budget is not None and section_used + cost > section_budget:
                left.append(LeftOut(c.id, section, c.type, "dropped_by_budget"))
                continue
            line_cost = estimate(line)
            if shared_cap is not None and c.owner is None and shared_used + line_cost > shared_cap:
                left.append(LeftOut(c.id, section, c.type, "dropped_by_budget"))
                continue
            if per_section[section] == 0:
                out_lines.append(label)
            out_lines.append(line)
            kept.append((line, c))
            used += cost
            section_used += cost
            if c.owner is None:
                shared_used += line_cost
            per_section[section] += 1
            if section in COUNTED_SECTIONS:
                counted += 1
    return Block(
        text="\n".join(out_lines),
        lines=kept,
        estimated_tokens=used,
        budget_tokens=limits.budget_tokens,
        dropped_by_count=sum(1 for x in left if x.reason == "dropped_by_count"),
        dropped_by_budget=sum(1 for x in left if x.reason == "dropped_by_budget"),
        sections={s: n for s, n in per_section.items()},
        left_out=left,
    )
