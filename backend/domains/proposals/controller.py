"""HTTP routes: promotion proposals (EXT-15). Registered before MemoryController, whose `/memory/{record_id}`
would otherwise be tried first; Litestar prefers the static segment either way."""

from __future__ import annotations

import msgspec
from litestar import Controller, get, post
from litestar.di import Provide

from backend.access.context import RequestContext
from backend.domains.proposals import service
from backend.params import Page, query_dependency
from shared.schemas.proposals import ProposalOut, ProposalPage, ProposalQuery


class ProposalController(Controller):
    path = "/memory/proposals"
    tags = ["memory"]

    @get("", summary="Shared records the analysis proposes, with the evidence records the reader sees",
         dependencies={"filters": Provide(query_dependency(ProposalQuery))})
    async def list_proposals(self, ctx: RequestContext, filters: ProposalQuery, page: Page) -> ProposalPage:
        rows = await service.page(ctx, filters, page.after(str), page.fetch())
        data, next_cursor = page.cut(rows, lambda row: row["id"])
        return msgspec.convert({"data": data, "next_cursor": next_cursor}, ProposalPage)

    @post("/{proposal_id:str}/apply", status_code=200,
          summary="Write the proposed shared record (labels: the store's promotion labels)")
    async def apply(self, proposal_id: str, ctx: RequestContext) -> ProposalOut:
        return msgspec.convert(await service.apply(ctx, proposal_id), ProposalOut)

    @post("/{proposal_id:str}/dismiss", status_code=200, summary="Dismiss the proposal; it is not made again")
    async def dismiss(self, proposal_id: str, ctx: RequestContext) -> ProposalOut:
        return msgspec.convert(await service.dismiss(ctx, proposal_id), ProposalOut)
