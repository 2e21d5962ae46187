"""Confidence decay (MEM-9): which half-lives a reader uses. The formula itself runs in SQL (repository)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from backend.access.context import RequestContext
from backend.domains.keys import repository as keys_repo
from backend.errors import BadRequest, NotFound


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


async def half_lives_for(ctx: RequestContext, key_id: str | None = None, *, bulk: bool = False) -> dict[str, float]:
    """The half-lives a read applies (MEM-9): a key's own; administrators' and bulk reads (exports) use the
    organisation's, unless `key_id` names the key whose half-lives to apply."""
    key = None if (bulk or ctx.is_admin) else ctx.principal.key
    if key_id is not None:
        if not (ctx.is_admin or bulk):
            raise BadRequest("Only an administrator chooses whose half-lives to apply; a key uses its own.",
                             param="key_id", code="key_id_not_allowed")
        key = await keys_repo.get(ctx.db, ctx.org_id, key_id)
        if key is None:
            raise NotFound("No such key.", param="key_id")
    return half_lives(ctx.org, key)
