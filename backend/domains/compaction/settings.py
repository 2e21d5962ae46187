"""Compaction settings (TRN-6): how many recent turns go in full, how many whole turns one summary covers, and
the mode. Keys and agents carry them as JSON; `parse` reads that JSON and refuses what TRN-6 retired."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from backend.errors import ValidationFailed

MODES = ("segments", "tiered", "window")
RETIRED = {"keep_recent": "keep_recent_turns", "segment_items": "segment_turns"}  # counted items, not turns
MAX_TURNS = 1000


@dataclass(frozen=True, slots=True)
class CompactionSettings:
    """`segments`: older turns cut into summaries of `segment_turns` whole turns; `tiered`: the oldest of
    those summarised again, level by level; `window`: only the last `keep_recent_turns` turns, nothing summarised."""

    mode: str = "segments"
    keep_recent_turns: int = 5
    segment_turns: int = 3

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}")
        # At least one recent turn in full: the turn being answered is never summarised away.
        for name in ("keep_recent_turns", "segment_turns"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_TURNS:
                raise ValueError(f"{name} must be a whole number from 1 to {MAX_TURNS}")

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def parse(cls, value: Mapping[str, Any] | None, param: str = "compaction") -> CompactionSettings:
        """Settings from a key's or an agent's JSON (absent names take the defaults); 422 naming the field for
        an unknown or retired name or a bad value."""
        if value is None:
            return cls()
        if not isinstance(value, Mapping):
            raise ValidationFailed("Compaction settings are an object.", param=param)
        for name in value:
            if name in RETIRED:
                raise ValidationFailed(f"`{name}` counted items and is no longer accepted; use `{RETIRED[name]}`, "
                                       "which counts turns.", param=f"{param}.{name}", code="retired_setting")
            if name not in cls.__dataclass_fields__:
                raise ValidationFailed(f"Unknown compaction setting `{name}`; the settings are mode, "
                                       "keep_recent_turns and segment_turns.", param=f"{param}.{name}")
        for name in value:
            try:
                cls(**{name: value[name]})
            except (TypeError, ValueError) as exc:
                raise ValidationFailed(f"Compaction setting `{name}`: {exc}.", param=f"{param}.{name}") from exc
        return cls(**value)
