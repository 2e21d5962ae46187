"""Activity over time (DSH-2 trends; the audit log's record changes): counts per calendar day of record versions,
messages and audit events, and the feed of record versions across records ("who changed what").

These are organisation-wide views: administrators and keys holding `management` (audit counts: administrators
only, like the trail itself). Each reads what the request's scope reaches, and an administrator's read is audited
like the reads it summarises (`memory.read`, `thread.read`, `audit.read`), with counts and never text.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from backend.access.context import RequestContext
from backend.access.scope import Scope
from backend.domains.activity import repository as repo
from backend.domains.audit.service import subject_hash
from backend.domains.memory.reads import audit_read
from backend.domains.threads import rules as thread_rules
from backend.errors import Forbidden
from backend.params import Page, day_window
from shared.schemas.activity import ChangeQuery


def _window(ctx: RequestContext, days: int) -> tuple[str, datetime, list[str]]:
    return day_window(str(ctx.org.get("timezone") or "UTC"), days)


def _management_scope(ctx: RequestContext, capability: str) -> Scope:
    """The capability gate of the data read (PLT-6), then management; these organisation-wide views name nobody by
    nature, so a key's `subjects_required` does not apply (PLT-7), while a person the request names still narrows."""
    if capability == "threads":
        ctx.require_threads()
    else:
        ctx.require(capability)
    ctx.require_management()
    return ctx.management_scope


def _answer(timezone: str, days: list[str], rows: list[dict[str, Any]]) -> dict[str, Any]:
    return {"timezone": timezone, "days": days, "data": rows}


async def records_per_day(ctx: RequestContext, days: int) -> dict[str, Any]:
    scope = _management_scope(ctx, "memory")
    timezone, since, listed = _window(ctx, days)
    rows = await repo.versions_per_day(ctx.db, scope, since, timezone)
    await audit_read(ctx, "GET /activity/records", [], {"days": days}, count=sum(r["count"] for r in rows))
    return _answer(timezone, listed, rows)


async def messages_per_day(ctx: RequestContext, days: int) -> dict[str, Any]:
    scope = _management_scope(ctx, "threads")
    timezone, since, listed = _window(ctx, days)
    rows = await repo.messages_per_day(ctx.db, scope, since, timezone)
    await thread_rules.admin_read(ctx, "GET /activity/messages", filters={"days": days},
                                  count=sum(r["count"] for r in rows))
    return _answer(timezone, listed, rows)


async def events_per_day(ctx: RequestContext, days: int) -> dict[str, Any]:
    ctx.require_admin()
    timezone, since, listed = _window(ctx, days)
    rows = await repo.events_per_day(ctx.db, ctx.org_id, since, timezone)
    await ctx.audit("audit.read", object_type="audit", detail={"route": "GET /activity/audit",
                                                               "filters": {"days": days},
                                                               "count": sum(r["count"] for r in rows)})
    return _answer(timezone, listed, rows)


def _change_cursor(page: Page) -> tuple[datetime, str, int] | None:
    cursor = page.after(list)
    if cursor is None:
        return None
    try:
        at, record_id, version = datetime.fromisoformat(cursor[0]), str(cursor[1]), int(cursor[2])
    except (TypeError, ValueError, IndexError, OverflowError):  # OverflowError: int(inf) of `Infinity`, `1e400`
        raise page.invalid() from None
    if not -2 ** 31 <= version < 2 ** 31:  # memory_versions.version is an integer; the database refuses others
        raise page.invalid()
    return at, record_id, version


async def changes(ctx: RequestContext, f: ChangeQuery, page: Page) -> tuple[list[dict[str, Any]], str | None]:
    """Record versions across records, newest first: who wrote what, when, to which record."""
    scope = _management_scope(ctx, "memory")
    if f.subject is not None and ctx.person is not None and not ctx.is_admin:
        raise Forbidden("The `subject` filter is for requests that name nobody and for administrators.",
                        param="subject", code="subject_filter_forbidden")
    rows = await repo.changes(ctx.db, scope, f, _change_cursor(page), page.fetch())
    rows, next_cursor = page.cut(rows, lambda r: [r["at"].isoformat(), r["record_id"], r["version"]])
    described = {"index_id": f.index_id, "action": f.action or None, "actor_type": f.actor_type,
                 "actor_id": f.actor_id,
                 "subject_hash": subject_hash(ctx.settings.secret, ctx.org_id, f.subject) if f.subject else None}
    await audit_read(ctx, "GET /activity/changes", sorted({r["record_id"] for r in rows}),
                     {k: v for k, v in described.items() if v is not None}, count=len(rows))
    docs = [{"record_id": r["record_id"], "index_id": r["index_id"], "type": r["type"], "subject": r["subject"],
             "version": r["version"], "at": r["at"], "action": r["action"],
             "actor": {"type": r["actor_type"], "id": r["actor_id"]}, "text": r["text"], "status": r["status"]}
            for r in rows]
    return docs, next_cursor
