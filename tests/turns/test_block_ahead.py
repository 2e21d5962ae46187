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
