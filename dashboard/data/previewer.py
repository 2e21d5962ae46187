"""What the injection previewer reads: the keys a turn could use, and the preview as tables (DSH-6)."""

from __future__ import annotations

from typing import Any

import polars as pl

from dashboard.data import _cached, keys
from shared.client import CoreClient
from shared.schemas.stores import PreviewIn, PreviewOut

LEFT_OUT_SCHEMA: dict[str, Any] = {"id": pl.String, "section": pl.String, "type": pl.String, "reason": pl.String}


def active_keys(client: CoreClient, org: str) -> pl.DataFrame:
    return keys(client, org).filter(pl.col("status") == "active")


@_cached
def agents(client: CoreClient) -> dict[str, str]:
    """The organisation's agents, id to name (a preview may mirror an agent's turns)."""
    return {a.id: a.name for a in client.all_agents()}


def run_preview(client: CoreClient, index_id: str, body: PreviewIn) -> PreviewOut:
    # Not cached: every preview is an audited read the administrator asked for.
    return client.injection_preview(index_id, body)


def section_breakdown(result: PreviewOut) -> pl.DataFrame:
    """Records and tokens per section, in the order sections print."""
    rows = [{"section": section, "records": count,
             "tokens": sum(r.tokens for r in result.records if r.section == section)}
            for section, count in result.trace.sections.items()]
    return pl.DataFrame(rows, schema={"section": pl.String, "records": pl.Int64, "tokens": pl.Int64})


def left_out_frame(result: PreviewOut) -> pl.DataFrame:
    rows = [{"id": x.id, "section": x.section, "type": x.type, "reason": x.reason} for x in result.trace.left_out]
    return pl.DataFrame(rows, schema=LEFT_OUT_SCHEMA)


SHARED_SHARE = 0.4  # on a turn for a person, shared lines may use at most this share of the budget
RECORD_SCHEMA: dict[str, Any] = {"section": pl.String, "type": pl.String, "owner": pl.String, "tokens": pl.Int64,
                                 "line": pl.String, "id": pl.String}


def token_parts(result: PreviewOut) -> pl.DataFrame:
    """The block's tokens by whose lines they are: the person's, shared, and section labels (attributed to
    neither), in the order they stack."""
    hers = sum(r.tokens for r in result.records if r.owner is not None)
    shared = sum(r.tokens for r in result.records if r.owner is None)
    labels = max(result.trace.estimated_tokens - hers - shared, 0)
    return pl.DataFrame({"part": ["the person's", "shared", "section labels"], "tokens": [hers, shared, labels],
                         "order": [0, 1, 2]})


def shared_share(result: PreviewOut) -> float:
    """Shared lines' tokens as a share of the budget."""
    shared = sum(r.tokens for r in result.records if r.owner is None)
    return shared / result.trace.budget_tokens if result.trace.budget_tokens else 0.0


def records_per_section(result: PreviewOut) -> pl.DataFrame:
    """Every injected record, section by section in print order: its type, owner, tokens and line."""
    order = {name: n for n, name in enumerate(result.trace.sections)}
    rows = [{"section": r.section, "type": r.type, "owner": r.owner or "shared", "tokens": r.tokens, "line": r.line,
             "id": r.id} for r in sorted(result.records, key=lambda r: order.get(r.section, len(order)))]
    return pl.DataFrame(rows, schema=RECORD_SCHEMA)
