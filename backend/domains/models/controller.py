"""HTTP routes: the chat models offered (EXT-1)."""

from __future__ import annotations

from typing import Annotated

import msgspec
from litestar import Controller, delete, get, post
from litestar.params import Parameter

from backend.access.context import RequestContext
from backend.domains.models import service
from shared.schemas.turns import ModelCreate, ModelOut, ModelPage


class ModelController(Controller):
    path = "/models"
    tags = ["models"]

    @get("", summary="The chat models offered to the caller's organisation")
    async def list_models(self, ctx: RequestContext) -> ModelPage:
        return msgspec.convert({"data": await service.list_models(ctx), "next_cursor": None}, ModelPage)


class AdminModelController(Controller):
    path = "/admin/models"
    tags = ["models"]

    @post("", summary="Offer a chat model to one organisation or, for operators, to every one")
    async def add_model(self, data: ModelCreate, ctx: RequestContext) -> ModelOut:
        return msgspec.convert(await service.add_for(ctx, data), ModelOut)

    # A `path` parameter: a model id may hold `/` (`meta/llama`), which a client sends as is or as `%2F`.
    @delete("/{model_id:path}", status_code=204, summary="Stop offering a chat model")
    async def remove_model(
        self, model_id: str, ctx: RequestContext,
        org_id: Annotated[str | None, Parameter(description="The organisation it was offered to (operators); "
                                                              "without it: the every-organisation entry")] = None,
    ) -> None:
        await service.remove_for(ctx, model_id.removeprefix("/"), org_id)
