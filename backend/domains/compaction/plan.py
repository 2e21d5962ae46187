"""Which summaries a thread of N turns is sent (TRN-6), in turn numbers; no SQL, no model.

The last `keep_recent_turns` turns always go in full. The turns before them are cut, from the first turn on,
into segments of `segment_turns` whole turns; each complete segment is one level-1 summary, and turns of an
incomplete segment go in full. `tiered` keeps the newest `segment_turns` summaries of each level and groups the
older ones, `segment_turns` at a time from the oldest, into one summary of the next level, again and again, so
the further back a part of the conversation lies, the shorter it reads. `window` summarises nothing.
Segments and groups are cut from the thread's start, so a unit, once complete, never changes with later turns.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from backend.domains.compaction.settings import CompactionSettings


@dataclass(frozen=True, slots=True)
class Unit:
    """One summary: turns `first_turn`…`last_turn` (1-based, inclusive) at `level`; a unit above level 1 is
    written from its `children`'s summaries."""

    level: int
    first_turn: int
    last_turn: int
    children: tuple[Unit, ...] = ()

    @property
    def key(self) -> tuple[int, int, int]:
        return (self.level, self.first_turn, self.last_turn)


def plan(turns: int, settings: CompactionSettings) -> tuple[Unit, ...]:
    """The summaries sent, oldest first, for a thread of `turns` turns; the turns after the last go in full."""
    if settings.mode == "window":
        return ()
    size = settings.segment_turns
    segments = max(0, turns - settings.keep_recent_turns) // size
    units = tuple(Unit(1, i * size + 1, (i + 1) * size) for i in range(segments))
    return _tiers(units, size) if settings.mode == "tiered" else units


def _tiers(units: tuple[Unit, ...], size: int) -> tuple[Unit, ...]:
    groups = (len(units) - size) // size if len(units) > size else 0
    if groups == 0:
        return units
    grouped = tuple(Unit(units[0].level + 1, units[g * size].first_turn, units[g * size + size - 1].last_turn,
                         units[g * size:(g + 1) * size]) for g in range(groups))
    return _tiers(grouped, size) + units[groups * size:]


def leaves(units: tuple[Unit, ...]) -> Iterator[Unit]:
    """The level-1 units under `units`, oldest first."""
    for unit in units:
        if unit.children:
            yield from leaves(unit.children)
        else:
            yield unit


def first_full_turn(units: tuple[Unit, ...]) -> int:
    """The first turn sent in full when every planned summary exists."""
    return units[-1].last_turn + 1 if units else 1
