"""The memory block of a turn, built while the turn is being accepted (TRN-2; issue 12's turn overhead).

The block depends on who asks, the key's (or the agent's) block and the turn's input: not on the thread, nor on
anything accepting the turn writes. So it is built in a task, on a session of its own (a read-only transaction
with the organisation set for row-level security, as every request's), while the request's session checks the
request and keeps its input. PostgreSQL then runs the block's statements while this process sends the accepting
ones, instead of the turn waiting for one after the other.

Erasure (MEM-19) stays as strict: the accepting transaction still checks, under the person's erasure lock,
before anything is kept or sent. An erasure that commits while the block is read is either seen by that check
(the turn is refused, the block never sent) or waits for the accepting commit, as it did when the block was read
in the accepting transaction itself.

A turn whose block cannot be chosen here (the key's policy refuses a request naming nobody, an agent's block
that does not parse) builds it as before, in `prepare`, where the same error is raised at the same step; so does a
turn arriving while the connection pool's own connections are all out (`_pool_has_room`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession
from sqlalchemy.pool import QueuePool

from backend.access.context import RequestContext
from backend.db.tenant import use_org
from backend.domains.injection import service as injection
from backend.domains.injection.config import ChosenBlock, choose_block
from backend.domains.memory import decay
from backend.domains.threads import rules as thread_rules
from backend.errors import ApiError
from shared.schemas.threads import ItemIn, MessageIn

log = logging.getLogger(__name__)
_discarded: set[asyncio.Task[injection.Built]] = set()  # the loop keeps only weak references to its tasks


def turn_input(items: Sequence[ItemIn]) -> str | None:
    """What the turn is about, for the block's relevance ranking: the last user message's words."""
    for item in reversed(items):
        if isinstance(item, MessageIn) and item.role == "user":
            return thread_rules.message_text(item.content)
    return None


def choose(ctx: RequestContext, agent_block: Any) -> ChosenBlock:
    """The block the turn injects: the agent's, else the key's (INJ-2)."""
    return choose_block(ctx.principal, ctx.scope, agent_block)


async def build(ctx: RequestContext, db: AsyncSession, chosen: ChosenBlock, items: Sequence[ItemIn]
                ) -> injection.Built:
    """The block as the turn sends it, read through `db` (the turn's own session or one of its own)."""
    return await injection.build(db, ctx.scope, decay.half_lives(ctx.org, ctx.principal.key), chosen,
                                 turn_input=turn_input(items), max_budget=ctx.settings.injection_max_budget_tokens)


def start(ctx: RequestContext, agent_block: Any, items: Sequence[ItemIn]) -> asyncio.Task[injection.Built] | None:
    """The block's build, started; None when it is built later in the turn's own session (see the module's text),
    or when no block is injected (nothing to read)."""
    try:
        chosen = choose(ctx, agent_block)
    except ApiError:
        return None
    engine = ctx.db.bind
    if chosen.reason is not None or not isinstance(engine, AsyncEngine) or not _pool_has_room(engine):
        return None
    return asyncio.get_running_loop().create_task(_build_apart(ctx, engine, chosen, items))


def _pool_has_room(engine: AsyncEngine) -> bool:
    """Whether the pool's own connections are not all out. A turn reading its block apart holds its own
    connection while it waits for the block's: were every connection held by such turns, each would wait for
    another until the pool's timeout. Past the pool's size (in its overflow) turns read the block in their own
    session, as before, and so always finish and give connections back."""
    pool = engine.pool
    return not isinstance(pool, QueuePool) or pool.checkedout() < pool.size()


async def _build_apart(ctx: RequestContext, engine: AsyncEngine, chosen: ChosenBlock,
                       items: Sequence[ItemIn]) -> injection.Built:
    async with AsyncSession(engine) as db:
        await use_org(db, ctx.org_id)
        async with db.begin():
            return await build(ctx, db, chosen, items)


async def discard(task: asyncio.Task[injection.Built] | None) -> None:
    """A build the turn no longer needs (refused, or answered from an earlier request). Waited for rather than
    cancelled: a cancellation reaching its session's cleanup could leave the connection checked out."""
    if task is None:
        return
    _discarded.add(task)
    task.add_done_callback(_discarded.discard)
    try:
        await asyncio.shield(task)  # should this request be cancelled meanwhile, the build still ends by itself
    except Exception:  # nobody reads this block; the turn's own error is what the caller gets
        log.debug("a memory block built ahead of a refused turn failed", exc_info=True)
