"""Message search (THR-7) and search by note (THR-8): in exactly the threads `GET /threads` shows the request,
one fixed slice of history per page, newest first."""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

from backend.access.context import RequestContext
from backend.domains.threads import rules, search_sql
from backend.domains.threads import search as search_mod
from backend.errors import BadRequest
from backend.params import Page, encode_cursor, pairs
from shared.schemas.common import has_utc_time
from shared.schemas.threads import ItemSearchQuery


async def search(ctx: RequestContext, f: ItemSearchQuery, page: Page) -> dict[str, Any]:
    scope = rules.threads_scope(ctx)
    note_pairs = pairs(f.metadata, "metadata")
    thread_metadata = pairs(f.thread_metadata, "thread_metadata")
    if f.q is None and not note_pairs and f.metadata_by is None:
        raise BadRequest("Give `q`, or `metadata` (with `metadata_by`) to find messages by note.", param="q",
                         code="query_required")
    if f.q is not None:
        search_mod.check_query(f.q)
    if f.from_ is not None and f.to is not None and f.from_ >= f.to:
        raise BadRequest("`from` must be before `to`.", param="from", code="invalid_range")
    note_author: str | None = None
    if note_pairs or f.metadata_by is not None:
        own = ctx.person or ""
        note_author = own if f.metadata_by is None else f.metadata_by
        if ctx.is_subject_token and note_author != own:
            return {"data": [], "next_cursor": None, "searched_to": None}  # her own notes only (THR-8)
    upper, upper_id, fixed_lower = f.to, None, None
    cursor = page.after(dict)
    if cursor is not None:
        try:
            upper = datetime.fromisoformat(cursor["u"])
            upper_id = cursor.get("i")
            fixed_lower = datetime.fromisoformat(cursor["l"]) if cursor.get("l") else None
        except (TypeError, KeyError, ValueError):
            raise page.invalid() from None
        # A forged bound the database would hand back and its driver could not read (`0001-01-01T00:00:00+14:00`).
        if not all(has_utc_time(bound) for bound in (upper, fixed_lower) if bound is not None):
            raise page.invalid()
    limit = page.limit(20)
    window, rows = await search_sql.search_items(
        ctx.db, scope, query=f.q, headline_options=search_mod.HEADLINE_OPTIONS, upper=upper, upper_id=upper_id,
        fixed_lower=fixed_lower, from_=f.from_, window_days=search_mod.WINDOW_DAYS, thread_id=f.thread_id,
        thread_metadata=thread_metadata, role=f.role, note_author=note_author, note_pairs=note_pairs,
        limit=limit + 1)
    if f.thread_id is not None and window is not None and not window["reachable"]:
        raise rules.unreachable(f.thread_id)  # as GET /threads/{id} answers: nothing of its days shows (PLT-9)
    tz = (window or {}).get("tz") or "UTC"
    next_cursor: dict[str, Any] | None = None
    searched_to: date | None
    if len(rows) > limit and window is not None:
        rows = rows[:limit]
        last = rows[-1]
        next_cursor = {"u": last["created_at"].isoformat(), "i": last["id"], "l": window["lower"].isoformat()}
        searched_to = search_mod.local_date(last["created_at"], tz)
    elif window is not None and window["lower"] is not None:
        searched_to = search_mod.local_date(window["lower"], tz)
        if window["older"]:
            next_cursor = {"u": window["lower"].isoformat()}
    else:
        searched_to = search_mod.local_date(f.from_, tz) if f.from_ is not None else None
    hits = [search_mod.hit_document(r, note_author is not None) for r in rows]
    await rules.admin_read(ctx, "GET /thread-items", ids=[h["item_id"] for h in hits],
                           filters={"q": f.q is not None, "thread_id": f.thread_id, "role": f.role,
                                    "metadata": [k for k, _ in note_pairs], "metadata_by": f.metadata_by is not None})
    return {"data": hits, "next_cursor": encode_cursor(next_cursor) if next_cursor else None,
            "searched_to": searched_to}
