"""Export for analysts (EXP-1 … EXP-3): who may export what, the audit event, and the batch pipeline.

The pipeline is the same for the CLI and the HTTP route: `COPY (SELECT …) TO STDOUT` hands over blocks of
about `BLOCK_BYTES` of whole CSV rows, polars parses each into a typed DataFrame, and a `formats.Writer` turns
that into bytes (a Parquet row group, CSV or NDJSON lines). The COPY is read on a blocking psycopg connection
of its own in a worker thread (`repo.CsvBlocks`), since psycopg's async COPY takes one await per row. Memory
holds at most three blocks, whatever the row count.

The rows are read on that connection of their own from one read-only REPEATABLE READ snapshot, which first
counts them; the audit event (`memory.export`, `thread_items.export`) carries that count and is committed
before the first byte leaves, so the file holds exactly the rows the event counts (docs/decisions.md).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import polars as pl
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.asyncio import AsyncSession

from backend.access.actor import CLI_ACTOR, Actor
from backend.access.context import RequestContext
from backend.access.policy import Requester
from backend.access.scope import Scope
from backend.db.tenant import use_org
from backend.domains.audit import service as audit
from backend.domains.exports import formats
from backend.domains.exports import repository as repo
from backend.domains.memory import decay, reads
from backend.domains.orgs import repository as orgs_repo
from backend.errors import BadRequest, NotFound, ValidationFailed
from shared.schemas.memory import MemoryQuery

BLOCK_BYTES = 16 * 2**20


@dataclass(frozen=True)
class ItemFilters:
    thread_id: str | None = None
    subject: str | None = None
    since: datetime | None = None
    until: datetime | None = None


@dataclass(frozen=True)
class Export:
    """One export: what kind of rows, whose view (scope and half-lives) and which filters."""

    kind: str  # records | thread_items
    scope: Scope
    half_lives: Mapping[str, float] = field(default_factory=dict)
    records: MemoryQuery = field(default_factory=MemoryQuery)
    items: ItemFilters = field(default_factory=ItemFilters)

    @property
    def schema(self) -> dict[str, pl.DataType]:
        return formats.SCHEMAS[self.kind]

    def rows(self) -> Any:
        if self.kind == "records":
            return repo.record_rows(self.scope, self.half_lives, self.records)
        i = self.items
        return repo.item_rows(self.scope, i.thread_id, i.subject, i.since, i.until)

    def count(self) -> Any:
        if self.kind == "records":
            return repo.record_count(self.scope, self.half_lives, self.records)
        i = self.items
        return repo.item_count(self.scope, i.thread_id, i.subject, i.since, i.until)


def check_format(fmt: str) -> formats.Format:
    for known in formats.FORMATS:
        if fmt == known:
            return known
    raise ValidationFailed("`format` is one of parquet, csv, ndjson.", param="format", code="invalid_format")


# ---------------------------------------------------------------- who exports

async def for_request(ctx: RequestContext, f: MemoryQuery, fmt: str, key_id: str | None = None
                      ) -> tuple[Export, repo.CsvBlocks]:
    """EXP-2: administrators or keys with `management` (a subject token: 403); the view is `GET /memory`'s.

    Returns the export and its rows, already counted in the snapshot they are read from; the audit event
    (written in the request's transaction) carries that count."""
    ctx.require("memory")
    ctx.require_management()
    # PLT-7: a management route, so a key's `subjects_required` does not apply; a person named still narrows it.
    scope = ctx.management_scope
    await reads.check_filters(ctx, f, scope=scope)
    export = Export("records", scope, await decay.half_lives_for(ctx, key_id, bulk=True), f)
    blocks = await start(ctx.db.bind, export)
    try:
        await _audit(ctx.db, export, ctx.actor, ctx.settings.secret, fmt, reads.describe_filters(ctx, f),
                     "GET /memory/export", blocks.count or 0)
    except BaseException:
        blocks.abort()
        raise
    return export, blocks


async def organisation_of(db: AsyncSession, org_id: str | None, *, index_id: str | None = None,
                          thread_id: str | None = None) -> str:
    """Whose export it is: `--org`, else the organisation of the index or thread named, else the only one."""
    for kind, named, lookup in (("index", index_id, repo.org_of_index), ("thread", thread_id, repo.org_of_thread)):
        if named is None:
            continue
        owner = await lookup(db, named)
        if owner is None or (org_id is not None and owner != org_id):
            where = f" in the organisation {org_id!r}" if org_id is not None else ""
            raise NotFound(f"No {kind} {named!r}{where}.", param=kind)
        org_id = owner
    if org_id is None:
        found = await repo.org_ids(db, limit=6)
        if len(found) != 1:
            listed = ", ".join(found[:5]) + (", …" if len(found) > 5 else "")
            raise BadRequest("This database holds " + (f"several organisations ({listed})" if found else
                             "no organisation") + "; name one with --org.", param="org", code="org_required")
        org_id = found[0]
    return org_id


async def for_org(db: AsyncSession, org_id: str | None, kind: str, *, records: MemoryQuery | None = None,
                  items: ItemFilters | None = None) -> Export:
    """The CLI reads as the organisation: every index, every owner, the organisation's half-lives (MEM-9)."""
    f = records or MemoryQuery()
    i = items or ItemFilters()
    org_id = await organisation_of(db, org_id, index_id=f.index_id if kind == "records" else None,
                                   thread_id=i.thread_id if kind == "thread_items" else None)
    org = await orgs_repo.get(db, org_id)
    if org is None:
        raise NotFound(f"No organisation {org_id!r}.", param="org")
    await use_org(db, org_id)  # row-level security: the CLI's export and its audit event are this organisation's
    reads.check_owner_filters(f)
    scope = Scope(org_id, Requester(None, {}), None, (), unrestricted=True)
    return Export(kind, scope, decay.half_lives(org, None), f, i)


async def audit_cli(db: AsyncSession, export: Export, secret: str, fmt: str, count: int) -> int:
    if export.kind == "records":
        f = export.records
        filters: dict[str, Any] = {
            "index_id": f.index_id, "type": f.type or None, "shared": f.shared or None,
            "subject_hash": audit.subject_hash(secret, export.scope.org_id, f.subject),
            "after": f.after.isoformat() if f.after else None, "before": f.before.isoformat() if f.before else None,
        }
    else:
        i = export.items
        filters = {"thread_id": i.thread_id, "subject_hash": audit.subject_hash(secret, export.scope.org_id, i.subject),
                   "since": i.since.isoformat() if i.since else None, "until": i.until.isoformat() if i.until else None}
    return await _audit(db, export, CLI_ACTOR, secret, fmt, {k: v for k, v in filters.items() if v is not None},
                        f"coremem export {export.kind.replace('_', '-')}", count)


async def _audit(db: AsyncSession, export: Export, actor: Actor, secret: str, fmt: str, filters: dict[str, Any],
                 route: str, count: int) -> int:
    """PLT-2: an export is a read of many records; the event names the filters and the row count, no ids."""
    action = "memory.export" if export.kind == "records" else "thread_items.export"
    object_type = "memory_record" if export.kind == "records" else "thread_item"
    await audit.record(db, org_id=export.scope.org_id, actor=actor, action=action, secret=secret,
                       object_type=object_type,
                       detail={"route": route, "format": fmt, "filters": filters, "count": count})
    return count


# ---------------------------------------------------------------- the pipeline

def _convert(writer: formats.Writer, block: bytes, schema: dict[str, pl.DataType]) -> tuple[bytes, int]:
    df = formats.frame(block, schema)
    return writer.write(df), df.height


def _conninfo(bind: Any) -> tuple[str, Dialect]:
    """The libpq URL and dialect of the request's engine (the rows are read on a connection of their own)."""
    engine = getattr(bind, "engine", bind)
    return engine.url.set(drivername="postgresql").render_as_string(hide_password=False), engine.dialect


def _forget(future: asyncio.Future[Any]) -> None:
    """A read left behind when the export stops early: its outcome (often the cancelled COPY) is not wanted."""
    future.add_done_callback(lambda done: done.cancelled() or done.exception())


async def start(bind: Any, export: Export, block_bytes: int = BLOCK_BYTES) -> repo.CsvBlocks:
    """Open the export's rows on a connection of its own: count them, then start the COPY, in one snapshot."""
    conninfo, dialect = _conninfo(bind)
    blocks = repo.CsvBlocks(conninfo, dialect, export.rows(), block_bytes, count_query=export.count(),
                            org_id=export.scope.org_id)
    await asyncio.to_thread(blocks.open)
    return blocks


async def encoded(export: Export, blocks: repo.CsvBlocks, fmt: formats.Format,
                  progress: Callable[[int], None] | None = None) -> AsyncIterator[bytes]:
    """The file's bytes, block by block, from the rows `start` opened (the request's transaction has committed).

    Three things run at once: a worker thread reads block N+1 from PostgreSQL (`repo.CsvBlocks`, a blocking
    connection), another parses and encodes block N (polars and pyarrow release the GIL), and the event loop
    hands over the bytes of block N-1. At most three blocks are held, whatever the row count.
    """
    writer = formats.Writer(fmt, export.schema)
    reading: asyncio.Future[bytes | None] | None = None
    running: asyncio.Future[tuple[bytes, int]] | None = None
    try:
        reading = asyncio.ensure_future(asyncio.to_thread(blocks.read))
        while reading is not None:
            block = await reading
            reading = asyncio.ensure_future(asyncio.to_thread(blocks.read)) if block is not None else None
            if running is not None:
                chunk, rows = await running
                running = None
                if chunk:
                    yield chunk
                if progress is not None:
                    progress(rows)
            if block is not None:
                running = asyncio.ensure_future(asyncio.to_thread(_convert, writer, block, export.schema))
    finally:
        blocks.abort()  # no-op once every row has been read
        for left in (reading, running):
            if left is not None and not left.done():
                _forget(left)
    last = writer.close()
    if last:
        yield last


def filename(export: Export, fmt: str, at: datetime) -> str:
    name = "memory" if export.kind == "records" else "thread-items"
    return f"{name}-{export.scope.org_id}-{at.strftime('%Y%m%dT%H%M%SZ')}.{formats.EXTENSIONS[fmt]}"
