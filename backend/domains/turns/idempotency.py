"""TRN-8: a turn sent again with the same `Idempotency-Key` answers the response the first one kept."""

from __future__ import annotations

import hashlib
from typing import Any

import msgspec

from backend.access.context import RequestContext
from backend.domains.turns import abandoned, documents, reads
from backend.domains.turns import repository as repo
from backend.errors import Conflict, ValidationFailed
from shared.schemas.turns import ResponseCreate


def digest(body: ResponseCreate) -> str:
    return hashlib.sha256(msgspec.json.encode(body)).hexdigest()


def owner(ctx: RequestContext) -> str:
    """Whose names the key lives among: the credential and the person it speaks for. One key serves many people,
    and a name one of them chose must never answer another's stored turn."""
    credential = ctx.principal.key_id or str(ctx.actor.id)
    return f"{credential}/{ctx.person}" if ctx.person else credential


async def replayed(ctx: RequestContext, body: ResponseCreate, key: str | None) -> dict[str, Any] | None:
    """The same key and body answer the stored response; another body 422; still running 409 (abandoned: failed,
    see abandoned.py)."""
    if key is None:
        return None
    if not body.store or "threads" not in ctx.principal.capabilities:
        raise ValidationFailed("`Idempotency-Key` replays a kept response; this turn keeps nothing (`store: false` "
                               "or a key without `threads`).", param="Idempotency-Key", code="idempotency_unkept")
    if not 1 <= len(key) <= 256:
        raise ValidationFailed("`Idempotency-Key` is 1 to 256 characters.", param="Idempotency-Key")
    row = await repo.by_idempotency_key(ctx.db, ctx.org_id, owner(ctx), key)
    if row is None:
        return None
    if row["request_digest"] != digest(body):
        raise ValidationFailed("This `Idempotency-Key` was used with a different request body; use a new key for a "
                               "new request.", param="Idempotency-Key", code="idempotency_key_reused")
    if row["thread_id"] is not None:  # no longer a participant of its thread: 404, as any read of it (TRN-7)
        await reads.reachable(ctx, row["id"], param="Idempotency-Key")
    row = await abandoned.settled(ctx, row)  # a turn whose process stopped replays as failed
    if row["status"] == "in_progress":
        raise in_flight()
    return documents.document(row)


def in_flight() -> Conflict:
    return Conflict("The request with this `Idempotency-Key` is still running; retry when it has finished.",
                    param="Idempotency-Key", code="idempotency_in_flight")
