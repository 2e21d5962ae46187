"""The block a credential's own turns would be given from one store, read without a turn (INJ-12's rules, for
the request's person): the builder a turn runs, with no recall count changed. The MCP resource
`memory://<index>/block` serves it, so an assistant can read what it would have been given."""

from __future__ import annotations

from typing import Any

import msgspec

from backend.access.context import RequestContext
from backend.domains.indexes.service import reachable
from backend.domains.injection.config import choose_block
from backend.domains.injection.service import build
from backend.domains.memory import decay
from backend.domains.memory.reads import audit_read
from backend.domains.memory.rules import memory_scope
from shared.schemas.platform import InjectionBlock


async def read_block(ctx: RequestContext, index_id: str, *, route: str) -> dict[str, Any]:
    """The key's own block when it injects from this store (exactly a turn's, `enabled: false` included);
    otherwise the key's block settings, or the default block, applied to this store (`store_override`), as the
    previewer's override does. An unknown store and one the credential does not reach are the same 404."""
    scope = memory_scope(ctx)
    await reachable(ctx.db, scope, index_id)
    chosen = choose_block(ctx.principal, scope)
    override = chosen.block is None or chosen.block.index_id != index_id
    if override:
        raw = ((ctx.principal.key or {}).get("memory") or {}).get("injection")
        block = msgspec.convert(raw, InjectionBlock) if raw else InjectionBlock(index_id=index_id)
        chosen = choose_block(ctx.principal, scope, msgspec.to_builtins(msgspec.structs.replace(block,
                                                                                              index_id=index_id)))
    built = await build(ctx.db, scope, decay.half_lives(ctx.org, ctx.principal.key), chosen, turn_input=None,
                        max_budget=ctx.settings.injection_max_budget_tokens)
    trace = built.trace()
    await audit_read(ctx, route, trace["injected_ids"], {"index_id": index_id})
    return {"block": built.text, "store_override": override, "reason": built.reason,
            "injected_ids": trace["injected_ids"], "estimated_tokens": trace["estimated_tokens"]}
