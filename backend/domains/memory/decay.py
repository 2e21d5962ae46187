"""Confidence decay (MEM-9): which half-lives a reader uses. The formula itself runs in SQL (repository)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def _half_lives(raw: Any) -> dict[str, float]:
    out: dict[str, float] = {}
    if not isinstance(raw, Mapping):
        return out
    for type_name, setting in raw.items():
        if isinstance(setting, Mapping):
            value = setting.get("half_life_days")
            if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
                out[str(type_name)] = float(value)
    return out


def half_lives(org: Mapping[str, Any] | None, key: Mapping[str, Any] | None) -> dict[str, float]:
    """The organisation's default half-lives, overridden type by type by the key's `memory.decay`."""
    merged = _half_lives((org or {}).get("memory_decay"))
    if key is not None:
        merged.update(_half_lives((key.get("memory") or {}).get("decay")))
    return merged
