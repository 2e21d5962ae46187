"""HTTP routes: erasing a person (MEM-19)."""

from __future__ import annotations

from litestar import Controller, delete

from backend.access.context import RequestContext
from backend.domains.subjects import service
from shared.schemas.memory import ErasureOut


class SubjectController(Controller):
    path = "/subjects"
    tags = ["subjects"]

    @delete("/{subject_id:str}", status_code=200, summary="Erase a person: her records of every type; answers counts")
    async def erase(self, subject_id: str, ctx: RequestContext) -> ErasureOut:
        return ErasureOut(counts=await service.erase(ctx, subject_id))
