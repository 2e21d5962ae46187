"""HTTP routes: turns (POST /responses, GET /responses/{id}, POST /messages; TRN-1, TRN-7, TRN-8, TRN-9)."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from litestar import Controller, Response, get, post
from litestar.params import Parameter

from backend.access.context import RequestContext
from backend.domains.turns import anthropic, inputs, reads, service
from backend.errors import ApiError, ValidationFailed
from shared.schemas.turns import MessageOut, MessagesCreate, ResponseCreate, ResponseOut

THREAD_HEADER = "X-Core-Thread-Id"
IdempotencyKey = Annotated[str | None, Parameter(header="Idempotency-Key", required=False)]
ThreadHeader = Annotated[str | None, Parameter(header=THREAD_HEADER, required=False)]


def _thread_header(doc: dict[str, Any]) -> dict[str, str]:
    return {THREAD_HEADER: doc["thread_id"]} if doc.get("thread_id") else {}


class ResponseController(Controller):
    path = "/responses"
    tags = ["turns"]

    @post("",
          summary="Run a turn: the model answers with memory injected and tools run; kept in a thread")
    async def create(self, data: ResponseCreate, turn: RequestContext, thread: ThreadHeader = None,
                     idempotency_key: IdempotencyKey = None) -> Response[ResponseOut]:
        doc = await service.run(turn, inputs.with_thread_header(data, thread), idempotency_key)
        return Response(msgspec.convert(doc, ResponseOut), status_code=201, headers=_thread_header(doc))

    @get("/{response_id:str}", summary="A response with its trace (injection, tools, model, usage, timings)")
    async def read(self, response_id: str, ctx: RequestContext) -> ResponseOut:
        return msgspec.convert(await reads.read(ctx, response_id), ResponseOut)


async def _messages(data: MessagesCreate, turn: RequestContext, thread: str | None,
                    idempotency_key: str | None) -> Response[Any]:
    try:
        body = msgspec.convert(anthropic.as_turn(data, thread), ResponseCreate)
    except msgspec.ValidationError as exc:
        raise ValidationFailed(f"The request cannot be read as a turn: {exc}", param="messages") from None
    doc = await service.run(turn, body, idempotency_key)
    if doc["status"] == "failed":
        # The Anthropic shape has no failed message: a failed turn is an error naming the kept response.
        error = doc["error"]
        raise ApiError(f"{error['message']} (response {doc['id']})", code=error["code"], status=502,
                       headers=_thread_header(doc))
    answer = anthropic.answer(doc, anthropic.client_functions(body))
    return Response(msgspec.convert(answer, MessageOut), status_code=200, headers=_thread_header(doc))


class MessagesController(Controller):
    path = "/"
    tags = ["turns"]

    @post("/messages", status_code=200,
          summary="Run a turn in the Anthropic Messages shapes; the thread travels in X-Core-Thread-Id")
    async def messages(self, data: MessagesCreate, turn: RequestContext, thread: ThreadHeader = None,
                       idempotency_key: IdempotencyKey = None) -> Response[MessageOut]:
        return await _messages(data, turn, thread, idempotency_key)

    @post("/v1/messages", status_code=200,
          include_in_schema=False, summary="POST /messages where the official Anthropic SDK sends it")
    async def messages_v1(self, data: MessagesCreate, turn: RequestContext, thread: ThreadHeader = None,
                          idempotency_key: IdempotencyKey = None) -> Response[MessageOut]:
        return await _messages(data, turn, thread, idempotency_key)
