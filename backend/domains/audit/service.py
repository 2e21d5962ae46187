"""The audit trail (PLT-12): append-only events, hash-chained per organisation, written in the caller's transaction."""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from backend.access.actor import Actor
from backend.domains.audit import repository
from backend.ids import new_id

GENESIS = "0" * 64


def subject_hash(secret: str, org_id: str, subject_id: str | None) -> str | None:
    """A keyed hash of a person's id, so the trail never holds a readable name (and survives erasure)."""
    if subject_id is None:
        return None
    return hmac.new(secret.encode(), f"{org_id}\x00{subject_id}".encode(), hashlib.sha256).hexdigest()


def chain_hash(prev_hash: str, event: dict[str, Any]) -> str:
    canonical = json.dumps(event, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256((prev_hash + canonical).encode()).hexdigest()


def hashed_fields(row: Any) -> dict[str, Any]:
    """The fields a row's hash covers, in a form that reads back identically from the database."""
    at: datetime = row["at"]
    return {
        "id": row["id"], "seq": row["seq"], "org_id": row["org_id"],
        "at": at.astimezone(UTC).isoformat(timespec="microseconds"),
        "actor_type": row["actor_type"], "actor_id": row["actor_id"], "subject_hash": row["subject_hash"],
        "action": row["action"], "object_type": row["object_type"], "object_id": row["object_id"],
        "outcome": row["outcome"], "detail": row["detail"],
    }


def as_stored(value: Any) -> Any:
    """A detail as jsonb hands it back, so that the hash written is the hash verified: jsonb keeps numbers as
    `numeric`, so a float Python writes with a positive exponent (`1e+20`, a half-life of 1e20 days) reads back as
    the integer it spells, and -0.0 as 0.0."""
    if isinstance(value, float):
        if value == 0:
            return 0.0
        spelled = repr(value)
        return int(Decimal(spelled)) if "e+" in spelled else value
    if isinstance(value, list):
        return [as_stored(item) for item in value]
    if isinstance(value, dict):
        return {key: as_stored(item) for key, item in value.items()}
    return value


async def record(
    db: AsyncSession,
    *,
    org_id: str,
    actor: Actor,
    action: str,
    secret: str,
    subject_id: str | None = None,
    object_type: str | None = None,
    object_id: str | None = None,
    outcome: str = "allowed",
    detail: dict[str, Any] | None = None,
) -> str:
    """Append one event in the current transaction; returns its id."""
    last = await repository.lock_chain_head(db, org_id)
    seq, prev = (last[0] + 1, last[1]) if last else (1, GENESIS)
    row = {
        "org_id": org_id, "seq": seq, "id": new_id("evt"), "at": datetime.now(UTC),
        "actor_type": actor.type, "actor_id": actor.id, "subject_hash": subject_hash(secret, org_id, subject_id),
        "action": action, "object_type": object_type, "object_id": object_id, "outcome": outcome,
        "detail": as_stored(json.loads(json.dumps(detail or {}, default=str))),
    }
    row["prev_hash"] = prev
    row["hash"] = chain_hash(prev, hashed_fields(row))
    await repository.insert_event(db, row)
    return str(row["id"])


@dataclass(frozen=True)
class ChainReport:
    org_id: str
    events: int
    broken_at_seq: int | None
    problem: str | None

    @property
    def intact(self) -> bool:
        return self.broken_at_seq is None


class ChainVerifier:
    """Walks one organisation's events in `seq` order and finds the first that breaks the chain."""

    def __init__(self, org_id: str) -> None:
        self.org_id = org_id
        self.prev = GENESIS
        self.count = 0
        self.broken_at: int | None = None
        self.problem: str | None = None

    def feed(self, rows: list[Any]) -> None:
        for row in rows:
            if self.broken_at is not None:
                return
            self.count += 1
            if row["seq"] != self.count:
                self._break(row["seq"], f"sequence gap: expected {self.count}")
            elif row["prev_hash"] != self.prev:
                self._break(row["seq"], "prev_hash does not match the previous row")
            elif chain_hash(self.prev, hashed_fields(row)) != row["hash"]:
                self._break(row["seq"], "row content does not match its hash")
            else:
                self.prev = row["hash"]

    def _break(self, seq: int, problem: str) -> None:
        self.broken_at, self.problem = seq, problem

    def report(self) -> ChainReport:
        return ChainReport(self.org_id, self.count, self.broken_at, self.problem)


async def verify_org(db: AsyncSession, org_id: str) -> ChainReport:
    verifier = ChainVerifier(org_id)
    async for rows in repository.stream_chain(db, org_id):
        verifier.feed(rows)
        if verifier.broken_at is not None:
            break
    return verifier.report()
