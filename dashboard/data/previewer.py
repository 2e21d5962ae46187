"""What the injection previewer reads: the keys a turn could use, and the preview as tables (DSH-6)."""

from __future__ import annotations

from typing import Any

import polars as pl

from dashboard.data import keys
from shared.client import CoreClient
from shared.schemas.stores import PreviewIn, PreviewOut

LEFT_OUT_SCHEMA: dict[str, Any] = {"id": pl.String, "section": pl.String, "type": pl.String, "reason": pl.String}


def active_keys(client: CoreClient, org: str) -> pl.DataFrame:
    return keys(client, org).filter(pl.col("status") == "active")


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
