"""HTTP routes: erasing a person (MEM-19)."""

from __future__ import annotations

from litestar import Controller, delete
from litestar.datastructures import State
from sqlalchemy.ext.asyncio import AsyncSession

from backend.access.principal import Principal
from backend.domains.subjects import service
from shared.schemas.memory import ErasureOut


class SubjectController(Controller):
    path = "/subjects"
    tags = ["subjects"]

    @delete("/{subject_id:str}", status_code=200, summary="Erase a person: her records of every type; answers counts")
    async def erase(self, subject_id: str, db: AsyncSession, principal: Principal, state: State) -> ErasureOut:
        counts = await service.erase(db, principal, subject_id, state.settings.secret)
        return ErasureOut(counts=counts)
