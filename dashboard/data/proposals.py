"""What the proposals page reads and does: promotion proposals of the organisation's stores with the records they
rest on (only those the administrator sees, as the API filters them), and applying or dismissing one. Every read
is audited by the API."""

from __future__ import annotations

from typing import Any

import polars as pl

from shared.client import CoreClient
from shared.schemas.proposals import ProposalOut, ProposalQuery

SHOWN = 200
BASIS_WORDS = {"same_text": "several people hold it", "similar": "several people hold it in nearly the same words",
               "general": "the helper model judged it general knowledge"}
SCHEMA: dict[str, Any] = {"id": pl.String, "store": pl.String, "type": pl.String, "text": pl.String,
                          "why": pl.String, "people": pl.Int64, "status": pl.String,
                          "created_at": pl.Datetime("us", "UTC")}


def proposals(client: CoreClient, status: str, index_id: str | None) -> list[ProposalOut]:
    query = ProposalQuery(status=status, index_id=index_id)  # type: ignore[arg-type]
    return client.proposals(query, limit=SHOWN).data


def frame(found: list[ProposalOut], store_names: dict[str, str]) -> pl.DataFrame:
    rows = [{"id": p.id, "store": store_names.get(p.index_id, p.index_id), "type": p.type, "text": p.text,
             "why": BASIS_WORDS.get(p.basis, p.basis), "people": p.people, "status": p.status,
             "created_at": p.created_at} for p in found]
    return pl.DataFrame(rows, schema=SCHEMA)


def evidence(proposal: ProposalOut) -> pl.DataFrame:
    return pl.DataFrame([{"person": e.subject or "shared", "type": e.type, "text": e.text, "record": e.record_id}
                         for e in proposal.evidence],
                        schema={"person": pl.String, "type": pl.String, "text": pl.String, "record": pl.String})
