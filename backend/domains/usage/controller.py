"""HTTP routes: usage metering (PLT-18)."""

from __future__ import annotations

import msgspec
from litestar import Controller, get
from litestar.di import Provide

from backend.access.context import RequestContext
from backend.domains.usage import service
from backend.params import query_dependency
from shared.schemas.turns import UsageQuery, UsageReport


class UsageController(Controller):
    path = "/usage"
    tags = ["usage"]
    dependencies = {"filters": Provide(query_dependency(UsageQuery))}

    @get("", summary="Model tokens per day, key and model (administrators and `management` keys)")
    async def usage(self, ctx: RequestContext, filters: UsageQuery) -> UsageReport:
        return msgspec.convert(await service.report(ctx, filters), UsageReport)
