"""Reading memory records (MEM-6, MEM-10 … MEM-13, MEM-17): every read route returns exactly what the request
sees (PLT-8), and every administrator's read is audited (PLT-2)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import msgspec

from backend.access.context import RequestContext
from backend.access.scope import Scope
from backend.domains.audit.service import subject_hash
from backend.domains.indexes import service as indexes
from backend.domains.memory import decay, search_repository
from backend.domains.memory import repository as repo
from backend.domains.memory.question import parse
from backend.domains.memory.rules import document, memory_scope, version_document
from backend.domains.memory.vectors import query_vectors
from backend.domains.memory.writes import reachable_record
from backend.errors import Forbidden, ValidationFailed
from backend.params import Page, pairs
from shared.schemas.memory import MemoryQuery


def describe_filters(ctx: RequestContext, f: MemoryQuery, **extra: Any) -> dict[str, Any]:
    """What an administrator's read asked for, for the audit trail: never a person's id or free text."""
    out: dict[str, Any] = {
        "index_id": f.index_id, "type": f.type or None,
        "subject_hash": subject_hash(ctx.settings.secret, ctx.org_id, f.subject) if f.subject else None,
        "shared": f.shared or None,
        "metadata": [k for k, _ in pairs(f.metadata, "metadata")] or None,
        # Tags are record content and may name a person (PLT-12): only that the read filtered by one is kept.
        "label": [k for k, _ in pairs(f.label, "label")] or None, "tag": True if f.tag else None,
        "min_confidence": f.min_confidence,
        "after": f.after.isoformat() if f.after else None, "before": f.before.isoformat() if f.before else None,
        "include_expired": f.include_expired or None, "include_replaced": f.include_replaced or None,
        "q": True if f.q else None,
    }
    out.update(extra)
    return {k: v for k, v in out.items() if v is not None}


async def audit_read(ctx: RequestContext, route: str, ids: Sequence[str], filters: dict[str, Any] | None = None,
                     *, count: int | None = None) -> None:
    """PLT-2: every administrator read of memory records is written to the audit trail."""
    if not ctx.is_admin:
        return
    await ctx.audit("memory.read", object_type="memory_record", object_id=ids[0] if len(ids) == 1 else None,
                    detail={"route": route, "filters": filters or {}, "ids": list(ids),
                            "count": len(ids) if count is None else count})


def check_owner_filters(f: MemoryQuery) -> None:
    if f.subject is not None and f.shared:
        raise ValidationFailed("Choose `subject` (one person's records) or `shared` (nobody's), not both.",
                               param="shared", code="subject_and_shared")


async def check_filters(ctx: RequestContext, f: MemoryQuery, *, read_index: bool = True,
                        scope: Scope | None = None) -> dict[str, Any] | None:
    """A read's filters: `subject` only for requests naming nobody and administrators; a named index must be
    reachable (404 otherwise) in `scope` (default: the request's data scope). Returns that index; with
    `read_index` False the caller checks it (`index_seen`)."""
    scope = scope if scope is not None else memory_scope(ctx)
    check_owner_filters(f)
    pairs(f.metadata, "metadata")
    pairs(f.label, "label")
    if f.subject is not None and ctx.person is not None and not ctx.is_admin:
        raise Forbidden("The `subject` filter is for requests that name nobody and for administrators.",
                        param="subject", code="subject_filter_forbidden")
    if f.index_id is None or not read_index:
        return None
    return await indexes.reachable(ctx.db, scope, f.index_id)


async def index_seen(ctx: RequestContext, f: MemoryQuery, rows: Sequence[Any]) -> None:
    """A page with rows of the named index proves the scope reaches it; only an empty page asks (404 if not)."""
    if f.index_id is not None and not rows:
        await indexes.reachable(ctx.db, ctx.scope, f.index_id)


async def get(ctx: RequestContext, record_id: str, key_id: str | None = None) -> dict[str, Any]:
    row = await reachable_record(ctx, record_id, half_lives=await decay.half_lives_for(ctx, key_id))
    await audit_read(ctx, "GET /memory/{id}", [record_id])
    return row


async def list_records(ctx: RequestContext, f: MemoryQuery, page: Page, key_id: str | None = None,
                       route: str = "GET /memory") -> tuple[list[dict[str, Any]], str | None]:
    await check_filters(ctx, f, read_index=False)  # one round trip fewer on the hottest read
    lives = await decay.half_lives_for(ctx, key_id)
    rows = await repo.list_page(ctx.db, ctx.scope, lives, f, page.after(str), page.fetch())
    await index_seen(ctx, f, rows)
    rows, next_cursor = page.cut(rows, lambda row: row["id"])
    await audit_read(ctx, route, [row["id"] for row in rows], describe_filters(ctx, f))
    return rows, next_cursor


async def stats(ctx: RequestContext, f: MemoryQuery, key_id: str | None = None) -> dict[str, Any]:
    """Counts over every page of `GET /memory` with these filters; an administrator's is audited like a list
    (the filters and the number counted, no ids)."""
    await check_filters(ctx, f)
    groups, people = await repo.counts(ctx.db, ctx.scope, await decay.half_lives_for(ctx, key_id), f)
    total = sum(g["records"] for g in groups)
    await audit_read(ctx, "GET /memory/stats", [], describe_filters(ctx, f), count=total)
    return {"records": total, "shared": sum(g["records"] for g in groups if g["shared"]), "people": people,
            "groups": groups}


async def history(ctx: RequestContext, record_id: str) -> dict[str, Any]:
    lives = await decay.half_lives_for(ctx)
    current = await reachable_record(ctx, record_id, half_lives=lives)
    # Each version names its partner only when the reader may see it, decided in SQL (MEM-16, MEM-17).
    versions = await repo.versions(ctx.db, ctx.scope, record_id)
    partners: dict[str, dict[str, Any] | None] = {}
    for name in ("replaces", "replaced_by"):
        partner_id = current[name]
        partners[name] = await repo.get(ctx.db, ctx.scope, lives, partner_id) if partner_id else None
    visible_partners = {p["id"] for p in partners.values() if p}
    await audit_read(ctx, "GET /memory/{id}/history", [record_id, *sorted(visible_partners)])
    return {"id": record_id, "versions": [version_document(v) for v in versions],
            "replaces": document(partners["replaces"]) if partners["replaces"] else None,
            "replaced_by": document(partners["replaced_by"]) if partners["replaced_by"] else None}


async def expiring(ctx: RequestContext, f: MemoryQuery, window: timedelta, page: Page, key_id: str | None = None
                   ) -> tuple[list[dict[str, Any]], str | None]:
    await check_filters(ctx, f)
    cursor = page.after(list)
    after = None
    if cursor is not None:
        try:
            after = (datetime.fromisoformat(cursor[0]), str(cursor[1]))
        except (TypeError, ValueError, IndexError):
            raise page.invalid() from None
    rows = await repo.expiring(ctx.db, ctx.scope, await decay.half_lives_for(ctx, key_id), f, window, after,
                               page.fetch())
    rows, next_cursor = page.cut(rows, lambda row: [row["expires_at"].isoformat(), row["id"]])
    await audit_read(ctx, "GET /memory/expiring", [row["id"] for row in rows],
                     describe_filters(ctx, f, within_seconds=int(window.total_seconds())))
    return rows, next_cursor


def in_force_only(f: MemoryQuery, route: str) -> None:
    """Recall and search show the records in force (MEM-10, MEM-11, MEM-13): never an expired record or one a
    correction replaced. `include_expired` and `include_replaced` are for the lists; here they are 422."""
    for name in ("include_expired", "include_replaced"):
        if getattr(f, name):
            raise ValidationFailed(f"`{name}` is for lists (GET /memory, by-tag); {route} always leaves expired and "
                                   "replaced records out.", param=name)


async def recall(ctx: RequestContext, f: MemoryQuery, limit: int, key_id: str | None = None
                 ) -> tuple[list[dict[str, Any]], int, int]:
    in_force_only(f, "GET /memory/recall")
    await check_filters(ctx, f)
    rows, total, verified = await repo.recall(ctx.db, ctx.scope, await decay.half_lives_for(ctx, key_id), f, limit)
    await count_recalls(ctx, [row["id"] for row in rows])
    await audit_read(ctx, "GET /memory/recall", [row["id"] for row in rows], describe_filters(ctx, f))
    return rows, total, verified


async def count_recalls(ctx: RequestContext, ids: Sequence[str]) -> None:
    """Recall text and search-tool results put records before a model; an administrator's reading does not."""
    if not ctx.is_admin:
        await repo.bump_recall(ctx.db, ctx.org_id, ids)


async def search(ctx: RequestContext, f: MemoryQuery, limit: int, *, key_id: str | None = None,
                 route: str = "GET /memory/search", q_param: str = "q") -> list[dict[str, Any]]:
    """MEM-13: the question's words (plain words as ranked alternatives, with stems and without stop words;
    web-search operators) fused with vector similarity in every index that embeds."""
    if not f.q:
        raise ValidationFailed("Give the question in `q`.", param="q")
    in_force_only(f, route)
    index = await check_filters(ctx, f)
    question = parse(f.q, param=q_param)
    vectors = await query_vectors(ctx.db, ctx.scope, index, question)
    rows = await search_repository.search(ctx.db, ctx.scope, await decay.half_lives_for(ctx, key_id),
                             msgspec.structs.replace(f, q=None), question, vectors, limit)
    await audit_read(ctx, route, [row["id"] for row in rows], describe_filters(ctx, f, q=True))
    return rows
