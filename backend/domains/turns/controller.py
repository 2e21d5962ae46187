"""HTTP routes: turns (POST /responses, GET /responses/{id}; TRN-1, TRN-7, TRN-8)."""

from __future__ import annotations

from typing import Annotated, Any

from litestar import Controller, Response, get, post
from litestar.di import Provide
from litestar.params import Parameter

from backend.access.context import RequestContext
from backend.domains.turns import service
from backend.http import provide_turn_context
from shared.schemas.turns import ResponseCreate, ResponseOut

THREAD_HEADER = "X-Core-Thread-Id"


def answered(doc: dict[str, Any]) -> Response[Any]:
    headers = {THREAD_HEADER: doc["thread_id"]} if doc.get("thread_id") else {}
    return Response(doc, status_code=201, headers=headers)


class ResponseController(Controller):
    path = "/responses"
    tags = ["turns"]

    @post("", dependencies={"turn": Provide(provide_turn_context)}, responses=None,
          summary="Run a turn: the model answers with memory injected and tools run; kept in a thread")
    async def create(
        self, data: ResponseCreate, turn: RequestContext,
        idempotency_key: Annotated[str | None, Parameter(header="Idempotency-Key")] = None,
    ) -> Response[ResponseOut]:
        return answered(await service.run(turn, data, idempotency_key))

    @get("/{response_id:str}", summary="A response with its trace (injection, tools, model, usage, timings)")
    async def read(self, response_id: str, ctx: RequestContext) -> ResponseOut:
        import msgspec

        return msgspec.convert(await service.read(ctx, response_id), ResponseOut)
