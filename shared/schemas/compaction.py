"""Compaction settings (TRN-6): how a turn shortens a long thread. Keys carry them in `memory.compaction`,
agents in `compaction`; an agent's settings replace its key's for the agent's turns."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from shared.schemas.common import Model

Turns = Annotated[int, msgspec.Meta(ge=1, le=1000)]

# Settings of an earlier design counted items, not turns; they are refused with a word on what replaced them
# (backend/http.py turns msgspec's "unknown field" into this message when the field sits under `compaction`).
RETIRED_COMPACTION_FIELDS = {
    "keep_recent": "`keep_recent` is no longer a compaction setting: use `keep_recent_turns`, the number of most "
                   "recent whole turns sent in full (default 5).",
    "segment_items": "`segment_items` is no longer a compaction setting: use `segment_turns`, the number of whole "
                     "turns each summary replaces (default 3).",
}


class CompactionSettings(Model):
    """`segments` summarises older turns in groups, `tiered` groups the oldest summaries again, `window` summarises
    nothing and sends only the recent turns."""

    mode: Literal["segments", "tiered", "window"] = "segments"
    keep_recent_turns: Turns = 5
    segment_turns: Turns = 3


__all__ = ("RETIRED_COMPACTION_FIELDS", "CompactionSettings", "Turns")
