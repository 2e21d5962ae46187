"""The plans a turn's accepting transaction leaves its writes (backend/db/plan_mode.py): the input items' key
checks may keep generic plans, set by the response's insert itself, and the next transaction plans for its values."""

from __future__ import annotations

from typing import Any

import msgspec

from tests.helpers import Org
from tests.plans import modes_around
from tests.turns.conftest import anna


def test_trn_1_the_accepting_transaction_lets_the_input_items_key_checks_keep_plans(
        org: Org, client: Any, settings: Any, database_url: str, scripted: Any) -> None:
    from backend.domains.turns import service
    from backend.domains.turns.turn import Turn
    from shared.schemas.turns import ResponseCreate

    async def accepted(ctx: Any) -> None:
        body = msgspec.convert({"model": "scripted", "input": "Hallo"}, ResponseCreate)
        assert isinstance(await service.accept(ctx, body, None), Turn)

    assert modes_around(anna(org), settings, database_url, accepted) == ("auto", "force_custom_plan")


def test_trn_1_the_closing_transaction_lets_its_writes_keep_plans(org: Org, client: Any, settings: Any,
                                                                  database_url: str, scripted: Any) -> None:
    """Set by the erasure check's round trip when the turn is kept, by a statement of its own when it is not."""
    from sqlalchemy import text

    from backend.domains.turns import service
    from backend.domains.turns.turn import Turn
    from shared.schemas.turns import ResponseCreate

    def closing(store: bool) -> Any:
        async def closed(ctx: Any) -> None:
            body = msgspec.convert({"model": "scripted", "input": "Hallo", "store": store}, ResponseCreate)
            turn = await service.accept(ctx, body, None)
            assert isinstance(turn, Turn)
            await ctx.db.execute(text("SET LOCAL plan_cache_mode = force_custom_plan"))  # as a build leaves it
            await service.finish(turn, None)
        return closed

    for store in (True, False):
        assert modes_around(anna(org), settings, database_url, closing(store)) == ("auto", "force_custom_plan")
