"""The MCP server (the official SDK's low-level `Server`): every request it answers is one transaction with the
request context `contexts.for_credential` builds for the caller's credential, as a REST route gets.

Over streamable HTTP the credential is the HTTP request's own headers (`Authorization`, `X-Core-Subject`,
`X-Core-Org`), read anew for every message; over stdio it is the one the process was started with.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import mcp_types as types
from litestar.datastructures import State
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

from backend import contexts
from backend.access.context import RequestContext
from backend.errors import ApiError
from backend.http import limit_exceeded, too_large, transaction
from backend.mcp import catalog
from backend.mcp.credential import Credential

log = logging.getLogger("coremem.mcp")
NAME = "coremem"
INSTRUCTIONS = ("Memory and conversation threads of coremem. The memory tools search and write the stores this "
                "credential reaches, for the person it acts for; the thread tools search and read her threads, keep "
                "notes and working state. memory://<index_id>/block shows the block a turn would be given.")


class Runtime:
    """The database and settings the server works with, known once the application has started."""

    def __init__(self, fixed: Credential | None = None) -> None:
        self.state: State | None = None  # `settings` and `sessionmaker`, as the Litestar application holds them
        self.fixed = fixed  # stdio: the process's credential; HTTP: None (each request brings its own)

    def start(self, state: State) -> None:
        self.state = state

    def credential(self, request: Any) -> Credential:
        if request is not None:
            return Credential.of_headers(request.headers)
        if self.fixed is None:
            return Credential(None)
        return self.fixed

    @asynccontextmanager
    async def context(self, credential: Credential) -> AsyncIterator[RequestContext]:
        """One transaction and the caller's request context; commits when the work returns."""
        if self.state is None:
            raise RuntimeError("the MCP server was used before the application started")
        async with transaction(self.state) as session:
            yield await contexts.for_credential(session, self.state.settings, authorization=credential.authorization,
                                                subject_header=credential.subject_header,
                                                org_header=credential.org_header)


def error_text(error: ApiError) -> str:
    """A refused tool call as its caller reads it: the PLT-14 body the REST route answers."""
    return json.dumps({"error": error.body()}, ensure_ascii=False)


def _internal(exc: BaseException) -> ApiError:
    limit = limit_exceeded(exc)  # content past a database limit is the request's, as over HTTP (PLT-14)
    if limit is not None:
        return too_large(limit)
    error_id = uuid.uuid4().hex
    log.error("unexpected error %s in an MCP call", error_id, exc_info=exc)
    return ApiError(f"Something went wrong on our side; quote error id {error_id}.", status=500,
                    code="internal_error")


@asynccontextmanager
async def _as_protocol_errors() -> AsyncIterator[None]:
    """Listing and reading refusals are MCP errors whose `data` is the PLT-14 body."""
    try:
        yield
    except ApiError as error:
        raise MCPError(types.INVALID_PARAMS, error.message, error.body()) from None
    except MCPError:
        raise
    except Exception as exc:
        internal = _internal(exc)
        raise MCPError(types.INTERNAL_ERROR, internal.message, internal.body()) from None


def build_server(runtime: Runtime) -> Server[Any]:
    Ctx = ServerRequestContext[Any, Any]

    async def list_tools(rctx: Ctx, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        async with _as_protocol_errors(), runtime.context(runtime.credential(rctx.request)) as ctx:
            return types.ListToolsResult(tools=await catalog.list_tools(ctx))

    async def call_tool(rctx: Ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
        # The caller's model reads a refusal as the tool's answer (MCP: tool errors are results, not protocol
        # errors); the transaction has rolled back by then, keeping a policy refusal's `denied` event.
        try:
            async with runtime.context(runtime.credential(rctx.request)) as ctx:
                text = await catalog.call_tool(ctx, params.name, params.arguments or {})
        except ApiError as error:
            return types.CallToolResult(content=[types.TextContent(text=error_text(error))], is_error=True)
        except Exception as exc:
            return types.CallToolResult(content=[types.TextContent(text=error_text(_internal(exc)))], is_error=True)
        return types.CallToolResult(content=[types.TextContent(text=text)])

    async def list_resources(rctx: Ctx, params: types.PaginatedRequestParams | None) -> types.ListResourcesResult:
        async with _as_protocol_errors(), runtime.context(runtime.credential(rctx.request)) as ctx:
            resources, next_cursor = await catalog.list_resources(ctx, params.cursor if params else None)
            return types.ListResourcesResult(resources=resources, next_cursor=next_cursor)

    async def list_templates(rctx: Ctx, params: types.PaginatedRequestParams | None
                             ) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(resource_templates=[catalog.block_template()])

    async def read_resource(rctx: Ctx, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        async with _as_protocol_errors(), runtime.context(runtime.credential(rctx.request)) as ctx:
            return types.ReadResourceResult(contents=[await catalog.read_resource(ctx, params.uri)])

    return Server(NAME, version="0.1.0", instructions=INSTRUCTIONS, on_list_tools=list_tools,
                  on_call_tool=call_tool, on_list_resources=list_resources,
                  on_list_resource_templates=list_templates, on_read_resource=read_resource)
