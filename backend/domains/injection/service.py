"""The injection builder (INJ-4 … INJ-12): one code path for turns and for the previewer."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from backend.access.context import RequestContext
from backend.access.scope import Scope
from backend.domains.injection import repository as repo
from backend.domains.injection.block import SECTIONS, Block, Candidate, Limits, build_block
from backend.domains.injection.config import ChosenBlock, choose_block
from backend.domains.memory import decay, recall_tally
from backend.domains.memory import repository as memory_repo
from backend.domains.memory.vectors import embed
from backend.domains.stores import repository as stores_repo
from backend.domains.stores.service import effective_sections
from backend.providers.embeddings import fingerprint

FILTER_REASON_BOUND = 50  # left-out candidates listed per section by the previewer


@dataclass
class Built:
    block: Block | None
    reason: str | None  # why nothing was injected, when nothing was
    index_id: str | None
    budget_tokens: int
    filtered: list[dict[str, Any]]
    truncated: frozenset[str] = frozenset()  # sections that held more candidates than were fetched

    @property
    def text(self) -> str:
        return self.block.text if self.block else ""

    @property
    def count_is_lower_bound(self) -> bool:
        """A section cut at its fetch bound that also reached its count had more to drop than the walk saw."""
        left = self.block.left_out if self.block else []
        return any(x.reason == "dropped_by_count" and x.section in self.truncated for x in left)

    def trace(self, *, left_out: bool = True) -> dict[str, Any]:
        """INJ-11's account of the block. The previewer also lists each left-out candidate with its reason
        (`left_out`, DSH-6); a turn's stored trace leaves that list out (up to a few hundred candidates, nine tenths
        of a trace's size), so `dropped_by_count` and `dropped_by_budget` are its account of what was left out."""
        block = self.block
        trace = {
            "enabled": block is not None, "reason": self.reason, "index_id": self.index_id,
            "budget_tokens": self.budget_tokens, "estimated_tokens": block.estimated_tokens if block else 0,
            "dropped_by_count": block.dropped_by_count if block else 0,
            "dropped_by_count_is_lower_bound": self.count_is_lower_bound,
            "dropped_by_budget": block.dropped_by_budget if block else 0,
            "sections": block.sections if block else dict.fromkeys(SECTIONS, 0),
            "injected_ids": block.injected_ids if block else [],
        }
        if left_out:
            trace["left_out"] = [{"id": x.id, "section": x.section, "type": x.type, "reason": x.reason}
                                 for x in (block.left_out if block else [])] + self.filtered
        return trace


def _candidate(row: dict[str, Any], section: str) -> Candidate:
    commitment = row.get("commitment") or {}
    episode = dict(row.get("episode") or {})
    if section == "past_sessions":
        provenance = row.get("provenance") or {}
        episode.setdefault("thread_id", provenance.get("thread_id"))
        episode.setdefault("first_item_id", provenance.get("first_item_id"))
    due = commitment.get("due_at")
    return Candidate(
        id=row["id"], section=section, type=row["type"], text=row["text"],
        effective_confidence=float(row["effective_confidence"]), owner=row["subject"],
        contested=bool(row["contested"]),
        due_at=datetime.fromisoformat(due) if isinstance(due, str) else due,
        promised_to=commitment.get("promised_to"), episode=episode or None)


async def build(db: AsyncSession, scope: Scope, half_lives: dict[str, float], chosen: ChosenBlock, *,
                turn_input: str | None, max_budget: int, at: datetime | None = None,
                explain: bool = False) -> Built:
    """The block for one turn (or preview). Fetches at most a bounded number of candidates per section."""
    block_cfg = chosen.block
    if block_cfg is None or chosen.reason is not None:
        return Built(None, chosen.reason, block_cfg.index_id if block_cfg else None, 0, [])
    assert block_cfg.index_id is not None  # choose_block gives a reason for a block without a store
    index, sections = await stores_repo.index_and_sections(db, scope, block_cfg.index_id)
    if index is None:
        return Built(None, "index_missing", block_cfg.index_id, 0, [])
    store = effective_sections(sections, max_budget)
    store_budget = store.injection.budget_tokens  # None: not set, the ceiling; 0 is a real budget
    budget = min(block_cfg.budget_tokens, max_budget if store_budget is None else store_budget, max_budget)
    person = scope.subject_id
    sel = repo.Selection(block_cfg.index_id, person, block_cfg.types, block_cfg.metadata, block_cfg.min_confidence,
                         at)
    text_query = repo.or_query(turn_input)
    vector = None
    wants_relevance = store.injection.rank != "confidence" or store.injection.episodes_limit > 0
    if turn_input and wants_relevance and index.get("embedding"):
        vector = (await embed(index, [turn_input]))[0]
    ranking = repo.Ranking(store.injection.rank, text_query, vector, fingerprint(index.get("embedding")))
    limits = Limits(budget_tokens=budget, limit=block_cfg.limit, commitments_limit=store.commitments.inject_limit,
                    episodes_limit=store.injection.episodes_limit,
                    section_budgets={str(k): v for k, v in store.injection.section_budgets.items()},
                    for_person=person is not None)
    bounds = {"commitments": limits.commitments_limit + repo.SLACK, "behaviour": 10 + repo.SLACK,
              "about_this_person": limits.limit + repo.SLACK, "organisation": limits.limit + repo.SLACK,
              "past_sessions": limits.episodes_limit + repo.SLACK if limits.episodes_limit > 0 else 0}
    if person is None:  # a turn for nobody has no person of its own
        bounds["behaviour"] = bounds["about_this_person"] = 0
    rows = await repo.candidates(db, scope, half_lives, sel, bounds, ranking)
    candidates = {section: [_candidate(r, section) for r in found] for section, found in rows.items()}
    block = build_block(candidates, limits)
    filtered: list[dict[str, Any]] = []
    if explain:
        seen = [c.id for section in candidates.values() for c in section]
        wanted = [section for section in SECTIONS if bounds[section] > 0]
        found_out = await repo.filtered_out(db, scope, half_lives, sel, wanted, FILTER_REASON_BOUND, seen)
        filtered = [{"id": r["id"], "section": section, "type": r["type"], "reason": r["reason"]}
                    for section, rows_out in found_out.items() for r in rows_out]
    empty = None if block.lines else why_empty(block)
    truncated = frozenset(section for section, found in rows.items() if len(found) >= bounds[section])
    return Built(block, empty, block_cfg.index_id, budget, filtered, truncated)


def why_empty(block: Block) -> str:
    """Why a block has no line: the budget only when it left something out, since raising it is what the reason
    tells an administrator to do; candidates left out by a count alone (`limit: 0`, `inject_limit: 0`) say so."""
    if block.dropped_by_budget:
        return "nothing_fits_budget"
    if block.dropped_by_count:
        return "limit_reached"
    return "no_records"


async def for_turn(ctx: RequestContext, *, agent_block: Any | None, turn_input: str | None,
                   bump: bool = True) -> Built:
    """What a turn injects; the injected records' recall counts go up (never on a preview). A turn that calls a
    model passes `bump=False` and calls `count_recalls_soon` once it has committed."""
    built = await build(ctx.db, ctx.scope, decay.half_lives(ctx.org, ctx.principal.key),
                        choose_block(ctx.principal, ctx.scope, agent_block), turn_input=turn_input,
                        max_budget=ctx.settings.injection_max_budget_tokens)
    if bump:
        await count_recalls(ctx, built)
    return built


async def count_recalls(ctx: RequestContext, built: Built) -> None:
    if built.block and built.block.injected_ids:
        await memory_repo.bump_recall(ctx.db, ctx.org_id, built.block.injected_ids)


def count_recalls_soon(ctx: RequestContext, built: Built) -> None:
    """A completed turn's recalls, once it has committed: added up in this process and written together
    (memory.recall_tally)."""
    if built.block and built.block.injected_ids:
        recall_tally.add(ctx.db, ctx.org_id, built.block.injected_ids, ctx.settings.recall_flush_seconds)
