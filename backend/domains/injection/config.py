"""Which injection block applies to a turn (INJ-1, INJ-2), and checking blocks where they are saved."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec
from sqlalchemy.ext.asyncio import AsyncSession

from backend.access.principal import Principal
from backend.access.scope import Scope
from backend.domains.indexes import repository as indexes_repo
from backend.errors import ValidationFailed, msgspec_error_parts
from shared.schemas.platform import InjectionBlock


@dataclass(frozen=True)
class ChosenBlock:
    block: InjectionBlock | None
    reason: str | None  # why nothing is injected, when nothing is


def parse_block(raw: Any, param: str) -> InjectionBlock:
    try:
        block = msgspec.convert(raw, InjectionBlock)
    except msgspec.ValidationError as error:
        text, path, _ = msgspec_error_parts(str(error))
        raise ValidationFailed(text, param=param + (path or "")) from None
    require_store(block, param)
    return block


def require_store(block: InjectionBlock, param: str) -> None:
    """A block that injects names its store; `{"enabled": false}` alone switches injection off (INJ-1)."""
    if block.enabled and block.index_id is None:
        raise ValidationFailed("Name the store to inject from in `index_id`, or send `enabled: false` to inject "
                               "nothing.", param=f"{param}.index_id")


async def check_saved_block(db: AsyncSession, scope: Scope, raw: Any, param: str) -> InjectionBlock:
    """An agent's (or key's) block must name an index of the organisation that the saving key's policy names."""
    block = parse_block(raw, param)
    if block.index_id is not None and await indexes_repo.get(db, scope, block.index_id) is None:
        raise ValidationFailed(f"{block.index_id!r} is not an index of this organisation that this key's policy "
                               "names.", param=f"{param}.index_id", code="index_not_reachable")
    return block


def choose_block(principal: Principal, scope: Scope, agent_block: Any | None = None) -> ChosenBlock:
    """The agent's block replaces the key's whole; the key still needs `memory` and its policy the store."""
    if "memory" not in principal.capabilities:
        return ChosenBlock(None, "capability_missing")
    raw = agent_block
    if raw is None and principal.key is not None:
        raw = (principal.key.get("memory") or {}).get("injection")
    if raw is None:
        return ChosenBlock(None, "no_injection_block")
    block = parse_block(raw, "memory_injection")
    if not block.enabled:
        return ChosenBlock(block, "disabled")
    assert block.index_id is not None  # parse_block: an enabled block names its store
    if not scope.reaches_index(block.index_id):
        return ChosenBlock(block, "index_not_named")
    return ChosenBlock(block, None)
