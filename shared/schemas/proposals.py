"""HTTP contract of promotion proposals (EXT-15)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

import msgspec

from shared.schemas.common import Model

ProposalStatus = Literal["open", "applied", "dismissed"]
ProposalBasis = Literal["same_text", "similar", "general"]


class ProposalEvidence(Model):
    """One record the proposal rests on; only records the reader sees are listed."""

    record_id: str
    subject: str | None
    type: str
    text: str


class ProposalOut(Model):
    id: str
    index_id: str
    type: str
    text: str
    basis: ProposalBasis
    status: ProposalStatus
    people: int  # how many people's records it rests on (whether or not the reader sees them)
    evidence: list[ProposalEvidence]
    record_id: str | None  # the shared record applying wrote
    created_at: datetime
    decided_at: datetime | None


class ProposalPage(Model):
    data: list[ProposalOut]
    next_cursor: str | None


class ProposalQuery(Model):
    status: ProposalStatus | Literal["all"] = "open"
    index_id: Annotated[str, msgspec.Meta(min_length=1, max_length=64)] | None = None


__all__ = (
    "ProposalBasis",
    "ProposalEvidence",
    "ProposalOut",
    "ProposalPage",
    "ProposalQuery",
    "ProposalStatus",
)
