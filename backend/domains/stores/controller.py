"""HTTP routes: store settings."""

from __future__ import annotations

import msgspec
from litestar import Controller, get, patch, post
from litestar.datastructures import State
from sqlalchemy.ext.asyncio import AsyncSession

from backend.access.principal import Principal
from backend.domains.injection import service as injection
from backend.domains.stores import service
from shared.schemas.stores import PreviewIn, PreviewOut, StoreSettingsOut, StoreSettingsPatch


class StoreController(Controller):
    path = "/memory/stores"
    tags = ["stores"]

    @get("/{index_id:str}", summary="A store's settings: every section with its effective values and defaults")
    async def get_settings(self, index_id: str, db: AsyncSession, principal: Principal,
                           state: State) -> StoreSettingsOut:
        doc = await service.read(db, principal, index_id, state.settings.injection_max_budget_tokens)
        return msgspec.convert(doc, StoreSettingsOut)

    @patch("/{index_id:str}", summary="Replace the sections sent, whole; the others stay")
    async def patch_settings(self, index_id: str, data: StoreSettingsPatch, db: AsyncSession, principal: Principal,
                             state: State) -> StoreSettingsOut:
        doc = await service.patch(db, principal, index_id, data, max_budget=state.settings.injection_max_budget_tokens,
                                  secret=state.settings.secret)
        return msgspec.convert(doc, StoreSettingsOut)

    @post("/{index_id:str}/injection/preview", status_code=200,
          summary="The injection block a turn with that key for that person would get, with every left-out reason")
    async def preview(self, index_id: str, data: PreviewIn, db: AsyncSession, principal: Principal,
                      state: State) -> PreviewOut:
        doc = await injection.preview(db, principal, index_id, data,
                                      max_budget=state.settings.injection_max_budget_tokens,
                                      secret=state.settings.secret)
        return msgspec.convert(doc, PreviewOut)
