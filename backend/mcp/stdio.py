"""The MCP server over stdin/stdout for a desktop assistant that starts a local process: one credential for the
process's life, from the environment, checked before the first message and used for every call."""

from __future__ import annotations

from litestar.datastructures import State
from mcp.server.stdio import stdio_server

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
            await server.run(read_stream, write_stream, server.create_initialization_options())
    finally:
        await engine.dispose()

