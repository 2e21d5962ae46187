"""What the audit log page reads: one page of the trail at a time, on the API's cursor (DSH-8)."""

from __future__ import annotations

import polars as pl

from dashboard.data import _cached, events_frame
from shared.client import CoreClient
from shared.schemas.platform import AuditQuery

# Actions the platform writes today; the filter accepts any other name typed in (memory, threads, ...).
KNOWN_ACTIONS = ("audit.read", "index.created", "index.deleted", "key.changed", "key.created", "key.deleted",
                 "key.revoked", "org.updated", "org.vocabulary_changed", "store.settings_changed")


@_cached
def audit_page(client: CoreClient, filters: AuditQuery, cursor: str | None, limit: int,
               tz: str) -> tuple[pl.DataFrame, str | None]:
    """One page of events, newest first, and the cursor of the next (older) page."""
    page = client.audit(filters, cursor=cursor, limit=limit)
    return events_frame(page.data, tz), page.next_cursor
