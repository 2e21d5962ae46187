"""TRN-2: the memory block is read on a session of its own while the turn is accepted (turns/block_ahead.py);
a turn refused meanwhile waits for that read and gives its connection back before it answers."""

from __future__ import annotations

from typing import Any

from tests.helpers import Org, assert_error, bearer
from tests.turns.conftest import anna, turn
from tests.turns.test_responses import _memory_setup


def _checked_out(client: Any) -> int:
    return int(client.app.state.engine.pool.checkedout())


def test_trn_2_the_block_read_ahead_is_the_one_the_model_gets(client: Any, org: Org, scripted: Any) -> None:
    _, key = _memory_setup(client, org)
    turn(client, anna(org, key), input="Hello")
    block = scripted.messages(0)[0]["content"]
    assert "Answer in Dutch" in block and "Has a dog named Rex" in block and "The office closes at six" in block
    # another person's records never enter it, read ahead or not
    turn(client, bearer(key, subject="bob"), input="Hello")
    assert "Rex" not in scripted.messages(1)[0]["content"]


def test_trn_2_a_turn_refused_while_its_block_is_read_returns_every_connection(
        client: Any, org: Org, scripted: Any, db: Any) -> None:
    _, key = _memory_setup(client, org)
    assert _checked_out(client) == 0
    # refused after the block's read began: an unknown thread (404), an unknown model (422)
    assert_error(client.post("/responses", json={"model": "scripted", "input": "Hi", "thread_id": "thr_missing"},
                             headers=anna(org, key)), 404)
    assert _checked_out(client) == 0
    assert_error(client.post("/responses", json={"model": "nope", "input": "Hi"}, headers=anna(org, key)), 422)
    assert _checked_out(client) == 0
    # answered from an earlier request (TRN-8): the second read is not needed and is waited for too
    first = client.post("/responses", json={"model": "scripted", "input": "Hi"},
                        headers={**anna(org, key), "Idempotency-Key": "once"})
    again = client.post("/responses", json={"model": "scripted", "input": "Hi"},
                        headers={**anna(org, key), "Idempotency-Key": "once"})
    assert first.status_code == again.status_code == 201 and again.json() == first.json()
    assert _checked_out(client) == 0
    assert scripted.requests and len(scripted.requests) == 1
    assert db.execute("SELECT count(*) FROM responses").fetchone()[0] == 1


def test_trn_2_with_the_pool_s_own_connections_all_out_a_turn_reads_its_block_in_its_own_session(
        client: Any, org: Org, scripted: Any) -> None:
    """A turn reading its block apart holds one connection while it waits for another. With all but one of the
    pool's connections held elsewhere, the turn still answers (it reads the block through its own connection);
    waiting for a second one instead, it would stall until the pool's timeout."""
    _, key = _memory_setup(client, org)
    engine = client.app.state.engine
    capacity = engine.pool.size() + engine.pool._max_overflow

    async def hold(n: int) -> list[Any]:
        held = []
        for _ in range(n):
            connection = engine.connect()
            await connection.start()
            held.append(connection)
        return held

    async def release(held: list[Any]) -> None:
        for connection in held:
            await connection.close()

    held = client.blocking_portal.call(hold, capacity - 1)
    try:
        answer = turn(client, anna(org, key), input="Hello")
    finally:
        client.blocking_portal.call(release, held)
    assert answer["status"] == "completed"
    assert "Has a dog named Rex" in scripted.messages(0)[0]["content"]
    assert _checked_out(client) == 0
