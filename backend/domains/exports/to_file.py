"""Exports written to a file (EXP-1): the pipeline behind `coremem export`, also run by the benchmark.

The command reads as the organisation (every index and owner, its half-lives); the organisation comes from
`--org`, else from the index or thread named, else it is the only one. The file is written as a hidden `.part`
file beside OUT and renamed when complete, so a failed export leaves no half file.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from typing import Any

from backend.db.engine import make_engine, make_sessionmaker
from backend.domains.exports import service
from backend.errors import ValidationFailed


class Progress:
    """What the caller shows while rows are written (the CLI draws a bar; the default shows nothing)."""

    def start(self, total: int) -> None:
        """The rows counted in the export's snapshot, before the first is written."""

    def advance(self, rows: int) -> None:
        """`rows` more rows written."""

    def stop(self) -> None:
        """The file is complete, or writing it failed."""


async def _write(sessions: Any, secret: str, kind: str, fmt: str, out: str, *, org_id: str | None,
                 records: Any, items: Any, progress: Progress, block_bytes: int) -> int:
    # The part file first: a place that cannot be written is refused before the export is audited as made.
    try:
        handle, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(out)), prefix=".coremem-", suffix=".part")
    except OSError as exc:
        raise ValidationFailed(f"The export cannot be written beside {out!r}: {exc.strerror}.", param="--out") \
            from None
    blocks = None
    with os.fdopen(handle, "wb") as sink:
        try:
            async with sessions() as db, db.begin():
                export = await service.for_org(db, org_id, kind, records=records, items=items)
                blocks = await service.start(sessions.kw["bind"], export, block_bytes)
                total = await service.audit_cli(db, export, secret, fmt, blocks.count or 0)
            progress.start(total)
            written = 0

            def advance(rows: int) -> None:
                nonlocal written
                written += rows
                progress.advance(rows)

            try:
                async for chunk in service.encoded(export, blocks, service.check_format(fmt), advance):
                    sink.write(chunk)
                sink.close()
                os.replace(tmp, out)
            finally:
                progress.stop()
            return written
        finally:
            if os.path.exists(tmp):  # not renamed: the export failed, or was refused before its rows were written
                os.remove(tmp)
            if blocks is not None:
                blocks.abort()  # closes the COPY's connection if the file was not written; else a no-op


def export_to_file(url: str, secret: str, kind: str, fmt: str, out: str, *, org_id: str | None = None,
                   records: Any = None, items: Any = None, progress: Progress | None = None,
                   block_bytes: int | None = None) -> int:
    """Write one export file; returns the rows written. Raises ApiError for what the caller must fix."""

    async def go() -> int:
        engine = make_engine(url, pool_size=2)
        try:
            return await _write(make_sessionmaker(engine), secret, kind, fmt, out, org_id=org_id, records=records,
                                items=items, progress=progress or Progress(),
                                block_bytes=block_bytes or service.BLOCK_BYTES)
        finally:
            await engine.dispose()

    return asyncio.run(go())
