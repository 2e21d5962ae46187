"""HTTP route: `GET /memory/export` (EXP-2), the rows of `GET /memory` as one streamed file."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from litestar import Controller, get
from litestar.datastructures import State
from litestar.params import Parameter
from litestar.response import Stream
from sqlalchemy.ext.asyncio import AsyncSession

from backend.access.principal import Principal
from backend.domains.exports import formats, service
from backend.domains.memory.controller import MinConfidence, _filters
from shared.schemas.common import Instant


class ExportController(Controller):
    path = "/memory/export"
    tags = ["memory", "export"]

    @get("", summary="Export the records the request sees as Parquet, CSV or NDJSON (administrators, `management`)",
         description="Same view and filters as `GET /memory`; `since`/`until` bound `created_at` (inclusive / "
                     "exclusive). Columns and polars dtypes: docs/export.md. Audited as `memory.export`.")
    async def export(
        self, db: AsyncSession, principal: Principal, state: State,
        fmt: Annotated[str, Parameter(query="format", description="parquet, csv or ndjson")] = "parquet",
        index_id: str | None = None,
        type_: Annotated[list[str] | None, Parameter(query="type")] = None,
        subject: Annotated[str | None, Parameter(description="One person's records")] = None,
        shared: Annotated[bool, Parameter(description="Only shared records (nobody's)")] = False,
        since: Instant | None = None,
        until: Instant | None = None,
        metadata: list[str] | None = None,
        label: list[str] | None = None,
        tag: list[str] | None = None,
        min_confidence: MinConfidence = None,
        include_expired: bool = False,
        include_replaced: bool = False,
        q: str | None = None,
        key_id: Annotated[str | None, Parameter(description="Administrators: this key's half-lives")] = None,
    ) -> Stream:
        chosen = service.check_format(fmt)
        f = _filters(index_id, type_, subject, metadata, label, tag, min_confidence, since, until, include_expired,
                     include_replaced, q, shared=shared)
        export, rows = await service.for_request(db, state.sessionmaker, principal, state.settings.secret, f, chosen,
                                                 key_id=key_id)
        name = service.filename(export, chosen, datetime.now(UTC))
        return Stream(service.encoded(export, rows, chosen), media_type=formats.MEDIA_TYPES[chosen],
                      headers={"Content-Disposition": f'attachment; filename="{name}"'})
