"""Counting turns in a thread's items (TRN-6).

A turn is one request with everything the platform added to the thread for it: its input, the answer and the
tool calls it ran with their results. Those items carry the request's `response_id`. Items a client added
itself carry none: a client's user message or tool result starts the next turn, and the request that follows
it belongs to that turn (it answers it); anything else a client added (an assistant or developer message, a tool
call) belongs to the turn it follows. A turn is never split: while a request of the turn still has items
further on (two people writing in one thread at once), nothing before its last item starts a turn. Items ahead
of the first user message or request belong to the first turn.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def client_starts_turn(row: Mapping[str, Any]) -> bool:
    """A client-added item that starts a turn: a user message or a tool result."""
    return row["type"] == "function_call_output" or (row["type"] == "message" and row["role"] == "user")


def turn_starts(rows: Sequence[Mapping[str, Any]]) -> list[int]:
    """The positions where turns begin, for rows in position order whose first row begins a turn (the thread's
    first item, or the first after a run of whole turns). Each row needs `position`, `response_id`, `type`
    and `role`."""
    last_of: dict[str, int] = {}
    for row in rows:
        if row["response_id"] is not None:
            last_of[row["response_id"]] = row["position"]
    starts: list[int] = []
    responses: set[str] = set()
    open_until = 0  # the last position a request of the current turn wrote
    has_starter = has_response = False
    for row in rows:
        position, response = row["position"], row["response_id"]
        if response is None:
            starter = client_starts_turn(row)
            opens = starter and has_starter
        else:
            starter = response not in responses
            opens = starter and has_response
        if not starts or (opens and position > open_until):
            starts.append(position)
            responses.clear()
            open_until, has_starter, has_response = 0, False, False
        has_starter = has_starter or starter
        if response is not None:
            has_response = True
            responses.add(response)
            open_until = max(open_until, last_of[response])
    return starts


def count_turns(rows: Sequence[Mapping[str, Any]]) -> int:
    return len(turn_starts(rows))
