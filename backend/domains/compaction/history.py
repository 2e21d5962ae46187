"""What a turn sends of its thread (TRN-6): summaries, then items in full, never losing a position.

Turns are numbered from the thread's first. Every summary compaction wrote records the turns it covers, so the
newest summary tells the number of the turn after it: only the items after it are read to count the rest.
Summaries are used from the thread's start while they follow one another without a gap; from the first planned
summary that is missing, everything goes in full. So the summaries stay older than every item sent, a
missing one costs tokens but no information, and the items themselves are never changed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from backend.domains.compaction import repository as repo
from backend.domains.compaction.plan import Unit, leaves, plan
from backend.domains.compaction.settings import CompactionSettings
from backend.domains.compaction.turns import turn_starts

_WINDOW_PAGE = 64  # items read per step back when looking for the last turns of a `window`


@dataclass(frozen=True, slots=True)
class History:
    """`summaries`: `thread_summaries` rows to send, oldest first (`id`, `from_position`, `to_position`, `level`,
    `model`, `text`, ...); `items`: item rows to send in full, in position order, as the threads repository
    returns them; `pending`: planned segment summaries not written yet, whose items are in `items` instead."""

    summaries: tuple[dict[str, Any], ...]
    items: tuple[dict[str, Any], ...]
    pending: int = 0


async def history(db: AsyncSession, org_id: str, thread_id: str, settings: CompactionSettings, *,
                  before_position: int | None = None) -> History:
    """The thread as a turn sends it. `before_position` leaves out items from that position on (the turn's own
    input, when it was written before this is asked)."""
    before = before_position if before_position is not None else repo.NO_LIMIT
    if settings.mode == "window":
        return History((), tuple(await _last_turns(db, org_id, thread_id, settings.keep_recent_turns, before)))
    index = [row for row in await repo.summary_index(db, org_id, thread_id) if row["to_position"] < before]
    anchor = max(index, key=lambda row: row["to_position"], default=None)
    after, turns_before = (anchor["to_position"], anchor["to_turn"]) if anchor else (0, 0)
    tail = await repo.items_after(db, org_id, thread_id, after, before)
    units = plan(turns_before + len(turn_starts(tail)), settings)
    chosen = _contiguous(_resolve(units, {(r["level"], r["from_turn"], r["to_turn"]): r for r in index}))
    covered_to = chosen[-1]["to_position"] if chosen else 0
    covered_turn = chosen[-1]["to_turn"] if chosen else 0
    if covered_to < after:  # a summary before the newest is missing: read the items from there to it as well
        items = await repo.items_between(db, org_id, thread_id, covered_to + 1, after) + tail
    else:
        items = tail
    summaries = await repo.summaries_by_id(db, org_id, [row["id"] for row in chosen])
    pending = sum(1 for unit in leaves(units) if unit.first_turn > covered_turn)
    return History(tuple(summaries), tuple(items), pending)


def _resolve(units: tuple[Unit, ...], written: Mapping[tuple[int, int, int], dict[str, Any]]) -> list[dict[str, Any]]:
    """The written summaries standing for `units`, oldest first, up to the first one missing (a missing unit
    above level 1 is stood for by its children's)."""
    chosen: list[dict[str, Any]] = []
    for unit in units:
        row = written.get(unit.key)
        if row is not None:
            chosen.append(row)
            continue
        below = _resolve(unit.children, written) if unit.children else []
        chosen += below
        if not unit.children or not below or below[-1]["to_turn"] != unit.last_turn:
            break
    return chosen


def _contiguous(chosen: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The summaries that cover positions from 1 on without a gap (a guard: the turn numbers say they should)."""
    kept: list[dict[str, Any]] = []
    for row in chosen:
        if row["from_position"] != (kept[-1]["to_position"] + 1 if kept else 1):
            break
        kept.append(row)
    return kept


async def _last_turns(db: AsyncSession, org_id: str, thread_id: str, keep: int, before: int) -> list[dict[str, Any]]:
    """The items of the last `keep` turns, read backwards a page at a time until one more turn start shows (or
    the thread's first item), so a long thread is not read whole."""
    count = _WINDOW_PAGE
    while True:
        rows = await repo.last_items(db, org_id, thread_id, count, before)
        starts = turn_starts(rows)
        reached_start = len(rows) < count
        if reached_start or len(starts) > keep:
            first = starts[max(0, len(starts) - keep)] if starts else 0
            return [row for row in rows if row["position"] >= first]
        count *= 4
