"""HTTP routes: store settings and the injection previewer."""

from __future__ import annotations

import msgspec
from litestar import Controller, get, patch, post

from backend.access.context import RequestContext
from backend.domains.injection import preview as injection_preview
from backend.domains.stores import service
from shared.schemas.stores import PreviewIn, PreviewOut, StoreSettingsOut, StoreSettingsPatch


class StoreController(Controller):
    path = "/memory/stores"
    tags = ["stores"]

    @get("/{index_id:str}", summary="A store's settings: every section with its effective values and defaults")
    async def get_settings(self, index_id: str, ctx: RequestContext) -> StoreSettingsOut:
        return msgspec.convert(await service.read(ctx, index_id), StoreSettingsOut)

    @patch("/{index_id:str}", summary="Replace the sections sent, whole; the others stay")
    async def patch_settings(self, index_id: str, data: StoreSettingsPatch, ctx: RequestContext) -> StoreSettingsOut:
        return msgspec.convert(await service.patch(ctx, index_id, data), StoreSettingsOut)

    @post("/{index_id:str}/injection/preview", status_code=200,
          summary="The injection block a turn with that key for that person would get, with every left-out reason")
    async def preview(self, index_id: str, data: PreviewIn, ctx: RequestContext) -> PreviewOut:
        return msgspec.convert(await injection_preview.preview(ctx, index_id, data), PreviewOut)
