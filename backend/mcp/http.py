"""`/mcp` in the Litestar application: the MCP server over streamable HTTP.

Stateless and answering plain JSON: every POST stands alone and names its caller with the REST headers, so any
API process can serve any message and no MCP session outlives its request. A request whose credential does not
resolve is refused before the SDK sees it, with the REST status and PLT-14 body (401 for a bad key, 400 for a
subject token naming someone else), so a client learns at connection time rather than at its first tool call.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager

from litestar import Litestar
from litestar.datastructures import Headers
from litestar.handlers import ASGIRouteHandler, asgi
from litestar.types import Receive, Scope, Send
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from backend.config import Settings
from backend.errors import ApiError
from backend.http import limit_rate
from backend.mcp.credential import Credential
from backend.mcp.messages import invalid_request, read_body, refuse_other_media, send_json_rpc_error
from backend.mcp.server import Runtime, build_server

PATH = "/mcp"


class McpEndpoint:
    """The route handler and the lifespan step that runs the SDK's session manager inside the application."""

    def __init__(self, settings: Settings) -> None:
        self.runtime = Runtime()
        self.manager = StreamableHTTPSessionManager(build_server(self.runtime), stateless=True, json_response=True,
                                                    max_request_body_size=settings.max_body_bytes)
        runtime, manager = self.runtime, self.manager

        async def mcp_endpoint(scope: Scope, receive: Receive, send: Send) -> None:
            if scope.get("method") == "GET":  # a stateless server has no stream of its own to offer (it would idle)
                raise ApiError("This MCP endpoint answers POSTed messages only; it opens no event stream.",
                               status=405, code="method_not_allowed", headers={"Allow": "POST"})
            # Resolves the credential (401/400 as PLT-14 bodies through the application's handlers) and spends one
            # of the key's tokens for the message (429): the tool calls inside it are not counted again.
            headers = Headers.from_scope(scope)
            async with runtime.context(Credential.of_headers(headers)) as ctx:
                limit_rate(runtime.state, ctx)  # type: ignore[arg-type]
            refuse_other_media(headers)
            body, replay = await read_body(receive, settings.max_body_bytes)
            if (refusal := invalid_request(body)) is not None:
                await send_json_rpc_error(send, refusal)
                return
            await manager.handle_request(scope, replay, send)  # type: ignore[arg-type]

        self.handler: ASGIRouteHandler = asgi(PATH, copy_scope=True, name="mcp")(mcp_endpoint)

    @asynccontextmanager
    async def lifespan(self, app: Litestar) -> AsyncGenerator[None, None]:
        """After the database lifespan: the server reads the application's engine; the manager's task group
        lives as long as the application."""
        self.runtime.start(app.state)
        async with self.manager.run():
            yield

