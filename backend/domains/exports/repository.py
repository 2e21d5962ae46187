"""SQL of exports: the rows of `GET /memory` (same Scope, same filters) and of thread items.

The rows leave PostgreSQL through `COPY (SELECT …) TO STDOUT WITH (FORMAT csv)`, cut into blocks of whole rows
that polars parses at once: no Python object per value. Instants travel as integer microseconds since the
epoch, JSON values and lists as JSON text (formats.py turns them into the documented dtypes).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import BigInteger, ColumnElement, Text, cast, func, select
from sqlalchemy.dialects.postgresql import TIMESTAMP
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.asyncio import AsyncSession

from backend.access.scope import Scope
from backend.db.models import KnowledgeIndex, Org, table_of
from backend.db.tenant import APP_ROLE, every_org_id, use_org
from backend.domains.memory.expressions import R, filter_clauses, readable, record_columns
from backend.domains.threads.repository import I, T
from shared.schemas.memory import MemoryQuery

IDX = table_of(KnowledgeIndex)
ORGS = table_of(Org)

PLAIN = ("id", "index_id", "subject", "type", "text")
AFTER_LABELS = ("confidence", "effective_confidence", "contested", "contested_with", "recall_count", "source",
                "verified", "key", "tags", "priority")
EPISODE_TEXT = ("thread_id", "first_item_id", "last_item_id", "intent", "result", "result_basis", "agent_id",
                "agent_version")


async def org_of_index(db: AsyncSession, index_id: str) -> str | None:
    return await _org_holding(db, select(IDX.c.org_id).where(IDX.c.id == index_id))


async def org_of_thread(db: AsyncSession, thread_id: str) -> str | None:
    return await _org_holding(db, select(T.c.org_id).where(T.c.id == thread_id))


async def _org_holding(db: AsyncSession, query: Any) -> str | None:
    """The CLI's lookup of whose index or thread an id is: organisation by organisation (row-level security)."""
    for org_id in await every_org_id(db):
        await use_org(db, org_id)
        found: str | None = (await db.execute(query)).scalar()
        if found is not None:
            return found
    return None


async def org_ids(db: AsyncSession, limit: int) -> list[str]:
    return list((await db.execute(select(ORGS.c.id).order_by(ORGS.c.id).limit(limit))).scalars())


def _micros(value: Any) -> ColumnElement[Any]:
    """An instant as integer microseconds since the epoch (exact: `extract` answers numeric)."""
    return cast(func.extract("epoch", value) * 1_000_000, BigInteger)


def _json_text(value: Any) -> ColumnElement[Any]:
    return cast(value, Text)


def _instant_in(part: Any, name: str) -> ColumnElement[Any]:
    return _micros(cast(part.op("->>")(name), TIMESTAMP(timezone=True)))


def _record_select(scope: Scope, half_lives: Mapping[str, float], f: MemoryQuery) -> Any:
    where = [*readable(scope), *filter_clauses(f, half_lives)]
    r = select(*record_columns(scope, half_lives)).where(*where).subquery("r")
    c = r.c
    commitment, episode = c.commitment, c.episode
    columns: list[Any] = [
        *[c[n] for n in PLAIN],
        _json_text(c.metadata).label("metadata"), _json_text(c.labels).label("labels"),
        *[_json_text(func.to_json(c.tags)).label("tags") if n == "tags" else c[n] for n in AFTER_LABELS],
        _micros(c.expires_at).label("expires_at"), c.status, c.replaces, c.replaced_by, c.confirmations,
        _micros(c.last_confirmed_at).label("last_confirmed_at"), _json_text(c.provenance).label("provenance"),
        c.version,
        commitment.op("->>")("status").label("commitment_status"),
        _instant_in(commitment, "due_at").label("commitment_due_at"),
        commitment.op("->>")("promised_to").label("commitment_promised_to"),
        _instant_in(episode, "from").label("episode_from"), _instant_in(episode, "to").label("episode_to"),
        *[episode.op("->>")(n).label(f"episode_{n}") for n in EPISODE_TEXT[:6]],
        _json_text(episode.op("->")("response_ids")).label("episode_response_ids"),
        *[episode.op("->>")(n).label(f"episode_{n}") for n in EPISODE_TEXT[6:]],
        _json_text(episode.op("->")("tools")).label("episode_tools"),
        _micros(c.created_at).label("created_at"), _micros(c.updated_at).label("updated_at"),
    ]
    return select(*columns).order_by(c.id)


def record_rows(scope: Scope, half_lives: Mapping[str, float], f: MemoryQuery) -> Any:
    """The columns of formats.RECORD_SCHEMA for every record the scope reaches and the filters keep, by id."""
    return _record_select(scope, half_lives, f)


def record_count(scope: Scope, half_lives: Mapping[str, float], f: MemoryQuery) -> Any:
    """How many rows `record_rows` gives."""
    return select(func.count()).select_from(R).where(*readable(scope), *filter_clauses(f, half_lives))


def _item_where(scope: Scope, thread_id: str | None, subject: str | None, since: datetime | None,
                until: datetime | None) -> list[ColumnElement[bool]]:
    seen = (select(T.c.id).where(T.c.org_id == scope.org_id, T.c.deleted_at.is_(None),
                                 scope.visible("thread", "see", T.c.subject, T.c.labels)))
    where: list[ColumnElement[bool]] = [I.c.org_id == scope.org_id, I.c.thread_id.in_(seen)]
    if thread_id is not None:
        where.append(I.c.thread_id == thread_id)
    if subject is not None:
        where.append(I.c.subject == subject)
    if since is not None:
        where.append(I.c.created_at >= since)
    if until is not None:
        where.append(I.c.created_at < until)
    return where


def item_rows(scope: Scope, thread_id: str | None, subject: str | None, since: datetime | None,
              until: datetime | None) -> Any:
    """The columns of formats.ITEM_SCHEMA for every item of the threads the scope sees, by thread and position."""
    return (select(I.c.id, I.c.thread_id, I.c.position, I.c.type, I.c.role, I.c.subject, I.c.response_id, I.c.text,
                   _json_text(I.c.body).label("body"), _micros(I.c.created_at).label("created_at"))
            .where(*_item_where(scope, thread_id, subject, since, until))
            .order_by(I.c.thread_id, I.c.position))


def item_count(scope: Scope, thread_id: str | None, subject: str | None, since: datetime | None,
               until: datetime | None) -> Any:
    """How many rows `item_rows` gives."""
    return select(func.count()).select_from(I).where(*_item_where(scope, thread_id, subject, since, until))


def _row_end(block: bytearray | bytes, end: int) -> int:
    """The last row boundary before `end`: a newline outside quotes (CSV doubles quotes inside a field, so an
    even count of quotes before a newline puts it outside every field). -1 when there is none."""
    pos = block.rfind(b"\n", 0, end)
    quotes = block.count(b'"', 0, pos) if pos >= 0 else 0
    while pos >= 0 and quotes % 2:
        prev = block.rfind(b"\n", 0, pos)
        quotes -= block.count(b'"', prev + 1, pos)
        pos = prev
    return pos


def _in_utc(params: Mapping[str, Any]) -> dict[str, Any]:
    """Instants in UTC: psycopg sends an instant as text with its offset, and PostgreSQL reads offsets up to ±15:59
    only, where an API instant may carry any (asyncpg, elsewhere, sends them as UTC). One within hours of the start
    of year 1 or the end of year 9999 has no UTC form in Python: it becomes that start or end, which no record is
    near."""
    def utc(value: Any) -> Any:
        if not isinstance(value, datetime) or value.tzinfo is None:
            return value
        try:
            return value.astimezone(UTC)
        except OverflowError:
            return (datetime.min if value.year == 1 else datetime.max).replace(tzinfo=UTC)

    return {name: utc(value) for name, value in params.items()}


class CsvBlocks:
    """`COPY (query) TO STDOUT` as CSV, handed over in blocks of whole rows of about `block_bytes`.

    The COPY runs on a psycopg connection of its own, not async, in a read-only REPEATABLE READ transaction
    (one snapshot per file); with `count_query`, `open` first counts the rows in that same snapshot, so `count`
    is exactly the number of rows the COPY hands over. Its methods block: call them from a worker thread, one at
    a time. The async
    interface takes one await per row (PostgreSQL sends one CopyData message per row), which made reading the
    stream alone about 1.6 times slower than COPY itself; a blocking read in a thread runs at COPY's rate
    while the event loop and the encoder go on.
    """

    def __init__(self, conninfo: str, dialect: Dialect, query: Any, block_bytes: int,
                 count_query: Any | None = None, *, org_id: str | None = None) -> None:
        self._org_id = org_id  # row-level security: the connection acts as coremem_app for this organisation
        compiled = query.compile(dialect=dialect, compile_kwargs={"render_postcompile": True})
        self._statement = f"COPY ({compiled.string}) TO STDOUT WITH (FORMAT csv)"
        self._params = _in_utc(compiled.params)
        self._count: tuple[str, Any] | None = None
        if count_query is not None:
            counting = count_query.compile(dialect=dialect, compile_kwargs={"render_postcompile": True})
            self._count = (counting.string, _in_utc(counting.params))
        self.count: int | None = None  # set by `open` when a count query was given
        self._conninfo = conninfo
        self._block_bytes = block_bytes
        self._conn: Any = None
        self._copying: Any = None
        self._copy: Any = None
        self._pending = bytearray()
        self._lock = threading.Lock()
        self._aborted = False

    def open(self) -> None:
        """Connect, start the transaction and the COPY."""
        import psycopg
        from psycopg.types.json import JsonbDumper

        try:
            with self._lock:
                if self._aborted:
                    return
                self._conn = psycopg.connect(self._conninfo, options=f"-c role={APP_ROLE}")
                self._conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                if self._org_id is not None:  # its snapshot is the one the count and the COPY read
                    self._conn.execute("SELECT set_config('core.org_id', %s, true)", (self._org_id,))
                # COPY takes no server-side parameters: psycopg's client-side cursor quotes them into the statement.
                cursor = psycopg.ClientCursor(self._conn)
                cursor.adapters.register_dumper(dict, JsonbDumper)  # the JSONB filters (metadata=k:v, label=k:v)
                if self._count is not None:  # the first statement: it takes the snapshot the COPY reads too
                    row = cursor.execute(*self._count).fetchone()
                    self.count = int(row[0]) if row else 0
                # Keep the context manager: once collected, its generator would end (and cancel) the COPY.
                self._copying = cursor.copy(self._statement, self._params)
                self._copy = self._copying.__enter__()
        except BaseException:
            self.abort()
            raise
        finally:
            self._close_if_aborted()

    def read(self) -> bytes | None:
        """The next block of whole rows; None once the rows are over (the connection is then closed)."""
        try:
            with self._lock:
                if self._aborted or self._copy is None:
                    return None
                pending, read = self._pending, self._copy.read
                while data := read():
                    pending += data
                    if len(pending) >= self._block_bytes:
                        cut = _row_end(pending, len(pending))
                        if cut >= 0:
                            block = bytes(pending[:cut + 1])
                            del pending[:cut + 1]
                            return block
                self._copying.__exit__(None, None, None)
                self._copy = self._copying = None
                self._conn.commit()
                self._conn.close()
                block, self._pending = bytes(pending), bytearray()
                return block or None
        except BaseException:
            self.abort()
            raise
        finally:
            self._close_if_aborted()

    def abort(self) -> None:
        """Stop early and close (the reader went away, or a read failed). Safe from any thread at any time; never
        waits for a read in flight: that read is cancelled and its thread closes the connection."""
        self._aborted = True
        if not self._close_if_aborted() and (conn := self._conn) is not None:
            conn.cancel_safe(timeout=5)

    def _close_if_aborted(self) -> bool:
        """Close if aborted and no read is in flight; False when a read holds the connection."""
        if not self._aborted:
            return True
        if not self._lock.acquire(blocking=False):
            return False
        try:
            if self._conn is not None:
                self._conn.close()
            self._copy = self._copying = None
            self._pending = bytearray()
        finally:
            self._lock.release()
        return True
