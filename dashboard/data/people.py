"""What the people page reads and does for one person: what the organisation holds of her (records per store and
type, threads, notes she wrote), a subject token to try her view, and her erasure. Every read is the API's and is
audited by it; a look-up is cached for the session like other pages' reads, and an erasure forgets it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl

from dashboard import data
from dashboard.data import _cached, overview
from shared.client import CoreClient
from shared.schemas.memory import MemoryQuery
from shared.schemas.platform import SubjectIn, SubjectTokenIn, SubjectTokenOut
from shared.schemas.threads import ItemSearchQuery, ThreadQuery, ThreadStats

NOTES_SHOWN = 50
THREADS_SHOWN = 50
NOTE_SCHEMA: dict[str, Any] = {"at": pl.Datetime("us", "UTC"), "thread": pl.String, "role": pl.String,
                               "note": pl.String, "message": pl.String, "item": pl.String}
THREAD_SCHEMA: dict[str, Any] = {"id": pl.String, "messages": pl.Int64, "labels": pl.String,
                                 "created_at": pl.Datetime("us", "UTC"), "updated_at": pl.Datetime("us", "UTC")}
# What the erasure's counts mean, in words (the API names them after what it removed).
ERASED_WORDS = {
    "memory_records": "her memory records", "memory_versions": "versions of those records",
    "memory_records_relabelled": "records that no longer name her in a label", "threads": "her threads",
    "items": "thread items (hers, and those in her threads)", "notes": "notes (hers, and those on her items)",
    "working_states": "working states of her threads", "summaries": "summaries of her threads",
    "labelled_threads": "threads that no longer name her in a label",
    "memory_proposals": "promotion proposals that rested on her records alone",
    "labelled_responses": "responses that no longer name her in a label",
    "extraction_windows": "extraction windows of her threads",
    "extraction_cursors": "extraction positions in her threads",
}


@dataclass(frozen=True)
class Holdings:
    records: pl.DataFrame  # store, type, records (hers: `subject` = her id)
    total: int
    threads: ThreadStats
    thread_list: pl.DataFrame
    more_threads: bool
    notes: pl.DataFrame
    notes_searched_to: str | None
    more_notes: bool


@_cached
def holdings(client: CoreClient, person: str, tz: str, store_names: dict[str, str]) -> Holdings:
    """Her records per store and type, her threads, and the newest notes she wrote (four audited reads)."""
    stats = client.memory_stats(MemoryQuery(subject=person))
    rows = [{"store": g.index_id, "type": g.type, "owner": "personal", "records": g.records} for g in stats.groups]
    counts = pl.DataFrame(rows, schema={"store": pl.String, "type": pl.String, "owner": pl.String,
                                        "records": pl.UInt32})
    records = overview.counts_by_store(counts, store_names).select("store", "type", "records")
    owned = ThreadQuery(subject=person)
    page = client.threads(owned, limit=THREADS_SHOWN)
    thread_rows = [{"id": t.id, "messages": t.message_counts.user + t.message_counts.assistant
                    + t.message_counts.developer, "labels": ", ".join(f"{k}:{v}" for k, v in sorted(t.labels.items())),
                    "created_at": t.created_at, "updated_at": t.updated_at} for t in page.data]
    noted = client.search_messages(ItemSearchQuery(metadata_by=person), limit=NOTES_SHOWN)
    note_rows = [{"at": h.created_at, "thread": h.thread_id, "role": h.role or h.type,
                  "note": ", ".join(f"{k}:{v}" for k, v in sorted((h.metadata or {}).items())),
                  "message": h.snippet, "item": h.item_id} for h in noted.data]
    return Holdings(
        records=records, total=stats.records, threads=client.thread_stats(owned),
        thread_list=pl.DataFrame(thread_rows, schema=THREAD_SCHEMA).with_columns(
            pl.col("created_at", "updated_at").dt.convert_time_zone(tz)),
        more_threads=page.next_cursor is not None,
        notes=pl.DataFrame(note_rows, schema=NOTE_SCHEMA).with_columns(pl.col("at").dt.convert_time_zone(tz)),
        notes_searched_to=noted.searched_to.isoformat() if noted.searched_to else None,
        more_notes=noted.next_cursor is not None)


def subject_token(client: CoreClient, org: str, key_id: str, person: str, attributes: dict[str, list[str]],
                  minutes: int) -> SubjectTokenOut:
    """A token bound to that key for her (audited); it acts with the key's capabilities, narrowed to her."""
    body = SubjectTokenIn(subject=SubjectIn(id=person, attributes=attributes), ttl_seconds=minutes * 60)
    return client.subject_token_for_key(org, key_id, body)


def erase(client: CoreClient, person: str) -> pl.DataFrame:
    """Erase her (`DELETE /subjects/{id}`); the counts the API answers, in words. Every page's cached answers are
    forgotten, so none still shows anything of hers."""
    try:
        counts = client.erase_subject(person).counts
    finally:
        data.refresh()
    rows = [{"removed": ERASED_WORDS.get(name, name.replace("_", " ")), "count": count, "name": name}
            for name, count in counts.items()]
    return pl.DataFrame(rows, schema={"removed": pl.String, "count": pl.Int64, "name": pl.String})
