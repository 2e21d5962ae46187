"""THR-6: the failure of a turn whose thread was deleted (or its owner erased) while it ran. Whichever write of
the turn's end finds the thread gone raises it; the turn then keeps nothing of its end and answers the 404 a read
of the thread answers now."""

from __future__ import annotations

from backend.errors import NotFound


def thread_deleted(thread_id: str | None) -> NotFound:
    return NotFound(f"The thread {thread_id!r} was deleted while this turn ran.", param="thread_id")
