"""THR-6 with TRN-4: the working-state write at a turn's end finds the thread deleted (or its owner erased) since
the turn read it: the turn's own "thread deleted" failure (the 404 at `thread_id` a turn whose closing append
finds the thread gone answers), nothing written, never an internal error.

A turn's closing append holds the thread's row before the state is written, so over HTTP the append is what
finds the deletion; the state write is checked here on its own, with the request context a turn has."""

from __future__ import annotations

from typing import Any

import pytest

from backend.domains.turns import state_tool
from backend.errors import NotFound
from tests.helpers import Org, as_request
from tests.turns.conftest import anna


def test_thr_6_the_turn_s_state_write_on_a_deleted_thread_is_the_turn_s_thread_deleted_failure(
        client: Any, org: Org, settings: Any, database_url: str, db: Any) -> None:
    opened = client.post("/threads", headers=anna(org), json={})
    assert opened.status_code == 201, opened.text
    thread_id = opened.json()["id"]
    assert client.delete(f"/threads/{thread_id}", headers=anna(org)).status_code == 204
    pending = state_tool.PendingState(0, {"goal": "move house"}, len('{"goal":"move house"}'), patched=True)

    async def write(ctx: Any) -> bool:
        return await state_tool.apply(ctx, thread_id, pending, "resp_late", None)

    with pytest.raises(NotFound) as failed:
        as_request(database_url, settings, org.key, "anna", write)
    assert failed.value.param == "thread_id"
    assert failed.value.message == f"The thread {thread_id!r} was deleted while this turn ran."
    assert db.execute("SELECT count(*) FROM thread_states WHERE thread_id = %s", (thread_id,)).fetchone()[0] == 0
