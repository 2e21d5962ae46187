"""The MCP server over stdin/stdout for a desktop assistant that starts a local process: one credential for the
process's life, from the environment, checked before the first message and used for every call."""

from __future__ import annotations

import json
from collections.abc import Mapping

from litestar.datastructures import State
from mcp.server.stdio import stdio_server

from backend.config import Settings
from backend.db.engine import make_engine, make_sessionmaker
from backend.mcp.server import Credential, Runtime, build_server

KEY_ENV = "CORE_MCP_KEY"
SUBJECT_ENV = "CORE_MCP_SUBJECT"


class MissingCredential(ValueError):
    pass


def credential_from_env(env: Mapping[str, str]) -> Credential:
    """`CORE_MCP_KEY` is a key's secret or a subject token; `CORE_MCP_SUBJECT` names the person as the
    `X-Core-Subject` header does (JSON, with attributes), or as a bare id."""
    key = (env.get(KEY_ENV) or "").strip()
    if not key:
        raise MissingCredential(f"Set {KEY_ENV} to a key's secret (ck_…) or a subject token (cst_…).")
    subject = (env.get(SUBJECT_ENV) or "").strip() or None
    if subject is not None and not subject.startswith("{"):
        subject = json.dumps({"id": subject})
    return Credential(f"Bearer {key}", subject)


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

