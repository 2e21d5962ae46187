"""What the audit log page reads: one page of the trail at a time, on the API's cursor, and one page of record
changes from record history (DSH-8)."""

from __future__ import annotations

from typing import Any

import polars as pl

from dashboard.data import SHARED, _cached, events_frame
from dashboard.data.overview import READ_ACTIONS
from shared.client import CoreClient
from shared.schemas.activity import ChangeQuery
from shared.schemas.platform import AuditQuery

# Actions the platform writes today; the filter accepts any other name typed in (memory, threads, ...).
KNOWN_ACTIONS = ("audit.read", "index.created", "index.deleted", "injection.preview", "key.changed", "key.created",
                 "key.deleted", "key.revoked", "key.subject_token_minted", "memory.embedded", "memory.export",
                 "memory.read", "memory.verified", "org.updated", "org.vocabulary_changed", "store.settings_changed",
                 "subject.erased", "thread.deleted", "thread.read")


@_cached
def audit_page(client: CoreClient, filters: AuditQuery, cursor: str | None, limit: int,
               tz: str) -> tuple[pl.DataFrame, str | None]:
    """One page of events, newest first, and the cursor of the next (older) page."""
    page = client.audit(filters, cursor=cursor, limit=limit)
    return events_frame(page.data, tz), page.next_cursor


def exclusions(changes_only: bool, chosen: list[str]) -> list[str]:
    """*Changes only* leaves reads out, except those the filter names on purpose."""
    return [a for a in READ_ACTIONS if a not in chosen] if changes_only else []


# ---------------------------------------------------------------- record changes (from record history)

CHANGE_SCHEMA: dict[str, Any] = {
    "at": pl.Datetime("us", "UTC"), "action": pl.String, "by": pl.String, "record": pl.String, "version": pl.Int64,
    "store": pl.String, "type": pl.String, "owner": pl.String, "text": pl.String,
}
VERSION_ACTIONS = ("created", "updated", "confirmed", "replaced", "verified")


def change_filter(*, store: str | None, person: str, actions: list[str], actor_type: str | None,
                  actor_id: str) -> ChangeQuery:
    return ChangeQuery(index_id=store or None, subject=person.strip() or None, action=list(actions),  # type: ignore[arg-type]
                       actor_type=actor_type, actor_id=actor_id.strip() or None)  # type: ignore[arg-type]


@_cached
def changes_page(client: CoreClient, filters: ChangeQuery, cursor: str | None, limit: int, tz: str,
                 store_names: dict[str, str]) -> tuple[pl.DataFrame, str | None]:
    """One page of record versions across records, newest first: who wrote which record, when."""
    page = client.record_changes(filters, cursor=cursor, limit=limit)
    rows = [{"at": c.at, "action": c.action, "by": f"{c.actor.type} {c.actor.id or ''}".strip(),
             "record": c.record_id, "version": c.version, "store": store_names.get(c.index_id, c.index_id),
             "type": c.type, "owner": c.subject or SHARED, "text": c.text} for c in page.data]
    frame = pl.DataFrame(rows, schema=CHANGE_SCHEMA)
    return frame.with_columns(pl.col("at").dt.convert_time_zone(tz)), page.next_cursor
