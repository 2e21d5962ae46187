"""HTTP route: `GET /memory/export` (EXP-2), the rows of `GET /memory` as one streamed file."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from litestar import Controller, get
from litestar.di import Provide
from litestar.params import Parameter
from litestar.response import Stream

from backend.access.context import RequestContext
from backend.domains.exports import formats, service
from backend.params import query_dependency
from shared.schemas.memory import MemoryQuery


class ExportController(Controller):
    path = "/memory/export"
    tags = ["memory", "export"]
    dependencies = {"filters": Provide(query_dependency(MemoryQuery))}

    @get("", summary="Export the records the request sees as Parquet, CSV or NDJSON (administrators, `management`)",
         description="The filters of `GET /memory` (`after`/`before` bound `created_at`, inclusive / exclusive); "
                     "every matching record, not a page. Columns and polars dtypes: docs/export.md. Audited as "
                     "`memory.export`.")
    async def export(
        self, ctx: RequestContext, filters: MemoryQuery,
        fmt: Annotated[str, Parameter(query="format", description="parquet, csv or ndjson")] = "parquet",
        key_id: Annotated[str | None, Parameter(description="Apply this key's half-lives (MEM-9)")] = None,
    ) -> Stream:
        chosen = service.check_format(fmt)
        export, rows = await service.for_request(ctx, filters, chosen, key_id=key_id)
        name = service.filename(export, chosen, datetime.now(UTC))
        return Stream(service.encoded(export, rows, chosen), media_type=formats.MEDIA_TYPES[chosen],
                      headers={"Content-Disposition": f'attachment; filename="{name}"'})
