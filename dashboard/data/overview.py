"""What the overview page reads: keys by status, the latest events per day, records and threads counted (DSH-2)."""

from __future__ import annotations

from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

import polars as pl

from dashboard.data import SHARED, _cached, events_frame
from dashboard.forms import period
from shared.client import CoreClient
from shared.schemas.platform import AuditQuery
from shared.schemas.threads import ThreadStats

KEY_STATUSES = ("active", "revoked", "expired")


def keys_by_status(frame: pl.DataFrame) -> dict[str, int]:
    counts = dict.fromkeys(KEY_STATUSES, 0)
    for row in frame.group_by("status").len().iter_rows():
        counts[row[0]] = int(row[1])
    return counts


# ---------------------------------------------------------------- the latest events


@_cached
def recent_events(client: CoreClient, first_day: str, max_events: int, tz: str) -> pl.DataFrame:
    """The newest events (at most `max_events`) since the start of `first_day` in the organisation's zone."""
    since, _ = period(date.fromisoformat(first_day), None, tz)
    return events_frame(client.audit_events(AuditQuery(from_=since), max_events=max_events), tz)


def events_per_day(frame: pl.DataFrame) -> pl.DataFrame:
    """Event counts per local calendar day (`YYYY-MM-DD`) and action, for the stacked chart."""
    return (frame.with_columns(pl.col("at").dt.strftime("%Y-%m-%d").alias("day"))
            .group_by("day", "action").len(name="events").sort("day", "action"))


def last_days(days: int, tz: str) -> list[str]:
    """The last `days` calendar days in the organisation's time zone, oldest first, as `YYYY-MM-DD`."""
    today = datetime.now(ZoneInfo(tz)).date()
    return [(today - timedelta(days=n)).isoformat() for n in range(days - 1, -1, -1)]


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
