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
