"""What the overview page reads: keys by status, the latest events, the trends per day, records and threads counted
(DSH-2)."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from dashboard.data import SHARED, _cached, events_frame
from shared.client import CoreClient
from shared.schemas.activity import DailyCounts
from shared.schemas.platform import AuditQuery
from shared.schemas.threads import ThreadStats

KEY_STATUSES = ("active", "revoked", "expired")
# An administrator's (or key's) reads: *Changes only* leaves them out of the trail and its chart.
READ_ACTIONS = ("audit.read", "memory.read", "thread.read", "injection.preview")


def keys_by_status(frame: pl.DataFrame) -> dict[str, int]:
    counts = dict.fromkeys(KEY_STATUSES, 0)
    for row in frame.group_by("status").len().iter_rows():
        counts[row[0]] = int(row[1])
    return counts


# ---------------------------------------------------------------- the latest events and the trends


@_cached
def latest_events(client: CoreClient, limit: int, changes_only: bool, tz: str) -> pl.DataFrame:
    """The newest events (one page of the trail); with `changes_only`, reads are left out."""
    query = AuditQuery(exclude_action=list(READ_ACTIONS) if changes_only else [])
    return events_frame(client.audit(query, limit=limit).data, tz)


@dataclass(frozen=True)
class Trends:
    days: list[str]  # every day of the period, oldest first (the organisation's calendar days)
    records: pl.DataFrame  # day, name (version action), count
    messages: pl.DataFrame  # day, name (role), count
    events: pl.DataFrame  # day, name (event action), count


def daily_frame(counts: DailyCounts) -> pl.DataFrame:
    rows = [{"day": c.day, "name": c.name, "count": c.count} for c in counts.data]
    return pl.DataFrame(rows, schema={"day": pl.String, "name": pl.String, "count": pl.Int64})


@_cached
def trends(client: CoreClient, days: int) -> Trends:
    """Records written, messages and audit events per day over the last `days` days, counted by the API (three
    audited reads, whatever the organisation's size)."""
    records = client.activity_records(days)
    return Trends(days=records.days, records=daily_frame(records),
                  messages=daily_frame(client.activity_messages(days)),
                  events=daily_frame(client.activity_audit(days)))


def without_reads(events: pl.DataFrame) -> pl.DataFrame:
    return events.filter(~pl.col("name").is_in(list(READ_ACTIONS)))


# ---------------------------------------------------------------- records and threads, counted by the API


@_cached
def store_counts(client: CoreClient) -> tuple[pl.DataFrame, int]:
    """Active, unexpired records per store, type and owner kind (`GET /memory/stats`, exact over every page),
    and how many people own at least one of them."""
    stats = client.memory_stats()
    rows = [{"store": g.index_id, "type": g.type, "owner": SHARED if g.shared else "personal", "records": g.records}
            for g in stats.groups]
    schema = {"store": pl.String, "type": pl.String, "owner": pl.String, "records": pl.UInt32}
    return pl.DataFrame(rows, schema=schema), stats.people


def counts_by_store(counts: pl.DataFrame, names: dict[str, str]) -> pl.DataFrame:
    """One row per store and type: personal, shared and all records."""
    wide = (counts.pivot(on="owner", index=["store", "type"], values="records", aggregate_function="sum")
            if not counts.is_empty() else pl.DataFrame(schema={"store": pl.String, "type": pl.String}))
    for column in ("personal", SHARED):
        if column not in wide.columns:
            wide = wide.with_columns(pl.lit(0, dtype=pl.UInt32).alias(column))
    wide = wide.with_columns(pl.col("personal", SHARED).fill_null(0))
    return (wide.with_columns((pl.col("personal") + pl.col(SHARED)).alias("records"),
                              pl.col("store").replace(names).alias("store"))
            .select("store", "type", "records", "personal", SHARED).sort("store", "type"))


@_cached
def thread_counts(client: CoreClient) -> ThreadStats:
    """Threads of the organisation and their messages per role (`GET /threads/stats`, audited by the API)."""
    return client.thread_stats()
