"""The MCP server over stdin/stdout for a desktop assistant that starts a local process: one credential for the
process's life, from the environment, checked before the first message and used for every call."""

from __future__ import annotations

from types import TracebackType
from typing import Any, Self

import anyio
import mcp_types as types
import pydantic
from litestar.datastructures import State
from mcp.server.stdio import stdio_server
from mcp.shared._stream_protocols import ReadStream, WriteStream
from mcp.shared.message import SessionMessage

from backend.config import Settings
from backend.db.engine import make_engine, make_sessionmaker
from backend.mcp.credential import Credential
from backend.mcp.server import Runtime, build_server


async def serve(settings: Settings, database_url: str, credential: Credential) -> None:
    """Refuse a credential that does not resolve (raises ApiError), then answer until stdin closes."""
    engine = make_engine(database_url, pool_size=2)
    runtime = Runtime(fixed=credential)
    runtime.start(State({"settings": settings, "sessionmaker": make_sessionmaker(engine)}))
    try:
        async with runtime.context(credential):
            pass
        server = build_server(runtime)
        async with stdio_server() as (read_stream, write_stream):
            answered = AnsweringUnreadable(read_stream, write_stream)
            await server.run(answered, write_stream, server.create_initialization_options())
    finally:
        await engine.dispose()



class AnsweringUnreadable:
    """The server's read stream, answering the lines the SDK could not read instead of passing them on as
    exceptions, which its server only logs: a line that is not JSON gets -32700 and a message that is not JSON-RPC
    (a batch, an `id` that is an object) -32600, as over HTTP, so the caller is not left waiting."""

    def __init__(self, inner: ReadStream[SessionMessage | Exception], answers: WriteStream[SessionMessage]) -> None:
        self._inner, self._answers = inner, answers

    @property
    def last_context(self) -> Any:  # the sender's context, which the server restores per message
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> SessionMessage:
        while True:
            item = await self._inner.receive()
            if not isinstance(item, Exception):
                return item
            await self._answers.send(SessionMessage(unreadable_answer(item)))

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> SessionMessage:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> Self:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc_val: BaseException | None,
                        exc_tb: TracebackType | None) -> bool | None:
        return await self._inner.__aexit__(exc_type, exc_val, exc_tb)


def unreadable_answer(error: Exception) -> types.JSONRPCError:
    not_json = isinstance(error, pydantic.ValidationError) and any(
        e["type"] == "json_invalid" for e in error.errors())
    if not_json:
        data = types.ErrorData(code=types.PARSE_ERROR, message="Parse error: this line is not JSON; send one "
                               "JSON-RPC message per line.")
    else:
        data = types.ErrorData(code=types.INVALID_REQUEST, message="Invalid request: this line is no JSON-RPC 2.0 "
                               "message (one object with `jsonrpc`, `method`, and for a request a string or integer "
                               "`id`; batches are not taken).")
    return types.JSONRPCError(jsonrpc="2.0", id=None, error=data)
