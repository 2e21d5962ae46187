"""What the records page reads and changes: pages of memory records, one record and its history, edits, exports
(DSH-3, DSH-10). The API audits every read; a change forgets the cached answers it affects."""

from __future__ import annotations

import io
from typing import Any

import msgspec
import polars as pl

from dashboard.data import SHARED, _cached
from dashboard.data.overview import store_counts
from shared.client import ApiError, CoreClient
from shared.schemas.memory import MemoryHistory, MemoryOut, MemoryQuery

# Record types the filter offers; any other lowercase name can be typed in.
KNOWN_TYPES = ("fact", "preference", "behaviour", "commitment", "lesson", "episode")
EXPORT_MEDIA = {"parquet": "application/vnd.apache.parquet", "csv": "text/csv", "ndjson": "application/x-ndjson"}
RECORD_SCHEMA: dict[str, Any] = {
    "id": pl.String, "store": pl.String, "owner": pl.String, "type": pl.String, "text": pl.String,
    "effective": pl.Float64, "stored": pl.Float64, "tags": pl.List(pl.String), "priority": pl.String,
    "status": pl.String, "verified": pl.Boolean, "contested": pl.Boolean, "source": pl.String,
    "version": pl.Int64, "updated_at": pl.Datetime("us", "UTC"), "expires_at": pl.Datetime("us", "UTC"),
}


# ---------------------------------------------------------------- the list


@_cached
def memory_page(client: CoreClient, filters: MemoryQuery, cursor: str | None, limit: int
                ) -> tuple[list[MemoryOut], str | None]:
    """One page of records, newest first, and the cursor of the next page (the API audits the read)."""
    page = client.memory(filters, cursor=cursor, limit=limit)
    return page.data, page.next_cursor


@_cached
def matching_records(client: CoreClient, filters: MemoryQuery) -> int:
    """How many records the filter keeps over every page (`GET /memory/stats`, audited by the API). Unfiltered it
    is the Overview's count, the same call, so the page opened after the Overview does not ask again (at a million
    records the count is most of the page's time)."""
    if filters == MemoryQuery():
        return organisation_total(client)
    return client.memory_stats(filters).records


def organisation_total(client: CoreClient) -> int:
    """Every active record of the organisation (the overview's cached count): tells "nothing yet" from "nothing
    matches"."""
    counts, _ = store_counts(client)
    return int(counts["records"].sum())


def matching_words(matching: int) -> str:
    return "1 record matches" if matching == 1 else f"{matching:,} records match"


def span_shown(pages_walked: int, page_size: int, shown: int) -> str:
    """Which of the matching records this page shows (`showing 51–100`): the cursor walks forward, so no page count
    is computed or shown (DSH-3: never page numbers over a million rows)."""
    first = (pages_walked - 1) * page_size + 1
    if shown == 0:
        return "none shown"
    return f"showing {first:,}" if shown == 1 else f"showing {first:,}–{first + shown - 1:,}"


def records_frame(records: list[MemoryOut], tz: str, store_names: dict[str, str] | None = None) -> pl.DataFrame:
    names = store_names or {}
    rows = [{"id": r.id, "store": names.get(r.index_id, r.index_id), "owner": r.subject or SHARED, "type": r.type,
             "text": r.text, "effective": r.effective_confidence, "stored": r.confidence, "tags": r.tags,
             "priority": r.priority, "status": r.status, "verified": r.verified, "contested": r.contested,
             "source": r.source, "version": r.version, "updated_at": r.updated_at, "expires_at": r.expires_at}
            for r in records]
    frame = pl.DataFrame(rows, schema=RECORD_SCHEMA)
    return frame.with_columns(pl.col("updated_at", "expires_at").dt.convert_time_zone(tz))


def export_file(client: CoreClient, filters: MemoryQuery, fmt: str) -> bytes:
    """The records of the page's filter as a file, through `GET /memory/export` (audited by the API)."""
    buffer = io.BytesIO()
    client.export_records(buffer, filters, format=fmt)  # type: ignore[arg-type]
    return buffer.getvalue()


# ---------------------------------------------------------------- one record


@_cached
def memory_record(client: CoreClient, record_id: str) -> MemoryOut:
    return client.memory_record(record_id)


def record_document(record: MemoryOut) -> dict[str, Any]:
    """Every field of a record as JSON-ready values (instants as ISO text)."""
    found: dict[str, Any] = msgspec.to_builtins(record)
    return found


@_cached
def memory_history(client: CoreClient, record_id: str) -> MemoryHistory:
    return client.memory_history(record_id)


def history_frame(history: MemoryHistory, tz: str) -> pl.DataFrame:
    rows = [{"version": v.version, "at": v.at, "action": v.action,
             "actor": f"{v.actor.type} {v.actor.id or ''}".strip(),
             "partner": v.partner_id, "text": v.text, "confidence": v.confidence, "status": v.status,
             "verified": v.verified, "tags": v.tags, "priority": v.priority} for v in history.versions]
    frame = pl.DataFrame(rows, schema={"version": pl.Int64, "at": pl.Datetime("us", "UTC"), "action": pl.String,
                                       "actor": pl.String, "partner": pl.String, "text": pl.String,
                                       "confidence": pl.Float64, "status": pl.String, "verified": pl.Boolean,
                                       "tags": pl.List(pl.String), "priority": pl.String})
    return frame.with_columns(pl.col("at").dt.convert_time_zone(tz))


ACTORS = {"key": "key", "admin": "administrator", "subject": "person (with a subject token)", "system": "the platform"}


@_cached
def response_agent(client: CoreClient, response_id: str) -> str | None:
    """The agent that answered in a turn (`GET /responses/{id}`); None when no agent did or the turn is gone."""
    try:
        return client.response(response_id).agent_id
    except ApiError:
        return None


def written_by(client: CoreClient, record: MemoryOut, history: MemoryHistory) -> str:
    """Who wrote the record, in words, from what the API answers: its source, its first version's actor and its
    provenance (the turn's agent, or the extraction window)."""
    first = history.versions[0] if history.versions else None
    actor = f"{ACTORS[first.actor.type]} `{first.actor.id}`" if first and first.actor.id else (
        ACTORS[first.actor.type] if first else "unknown")
    provenance = record.provenance or {}
    if record.source == "extraction":
        window, thread = provenance.get("window_id"), provenance.get("thread_id")
        return "extraction" + (f", reading window `{window}` of thread `{thread}`" if window and thread else "")
    if record.source == "model":
        response = provenance.get("response_id")
        agent = response_agent(client, str(response)) if response else None
        return (f"a model's write tool, with {actor}" + (f" and agent `{agent}`" if agent else "")
                + (f" in response `{response}`" if response else ""))
    if record.source == "maintenance":
        return "maintenance (the platform's own upkeep)"
    return actor


def thread_ids(provenance: dict[str, Any] | None) -> list[str]:
    """Every thread id a record's provenance names (`thread_id`, `threads`, nested ones)."""
    found: list[str] = []

    def walk(value: Any, key: str = "") -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                walk(v, str(k))
        elif isinstance(value, list):
            for v in value:
                walk(v, key)
        elif isinstance(value, str) and "thread" in key and value not in found:
            found.append(value)

    walk(provenance or {})
    return found


# ---------------------------------------------------------------- changes


def forget_memory() -> None:
    """After a change: the next run asks the API again for lists, the record and its history."""
    for fn in (memory_page, matching_records, memory_record, memory_history, store_counts):
        fn.clear()


def edit_record(client: CoreClient, record_id: str, changes: dict[str, Any]) -> MemoryOut:
    try:
        return client.update_memory(record_id, changes)
    finally:
        forget_memory()


def verify_record(client: CoreClient, record_id: str) -> MemoryOut:
    try:
        return client.verify_memory(record_id)
    finally:
        forget_memory()


def delete_record(client: CoreClient, record_id: str) -> None:
    try:
        client.delete_memory(record_id)
    finally:
        forget_memory()
