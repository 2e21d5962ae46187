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
    async def erase(self, subject_id: str, turn: RequestContext) -> ErasureOut:
        # `turn`: the context whose route commits between its steps (the erasure, then the time it records)
        return ErasureOut(counts=await service.erase_and_settle(turn, subject_id))
