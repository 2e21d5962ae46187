"""Fixtures of the MCP tests: one database, one API under uvicorn on loopback and one organisation per module;
the SDK's own client over streamable HTTP (`/mcp`) and over stdio (`coremem mcp --stdio` as a subprocess)."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import socket
import sys
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx
import httpx2
import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from backend.access.policy import writer_policy
from backend.app import create_app
from backend.config import Settings
from tests.helpers import Org, bearer, bootstrap_org

T = TypeVar("T")
_modules = itertools.count()
COREMEM = str(Path(sys.executable).parent / "coremem")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def database_url(postgres: Any, template: str) -> Iterator[str]:
    name = f"mcp{os.getpid()}_{next(_modules)}"
    postgres.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    yield postgres.url_for(name)
    postgres.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="module")
def settings(tmp_path_factory: pytest.TempPathFactory, database_url: str) -> Settings:
    return Settings(database_url=database_url, data_dir=tmp_path_factory.mktemp("data"),
                    secret="test-secret-" + "x" * 20)


@pytest.fixture(scope="module")
def live(settings: Settings, database_url: str) -> Iterator[str]:
    """The API (with /mcp) under uvicorn on a free loopback port."""
    import uvicorn

    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(settings, database_url), host="127.0.0.1", port=port,
                                           log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=10)


@pytest.fixture(scope="module")
def api(live: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=live, timeout=30) as client:
        yield client


@pytest.fixture(scope="module")
def db(database_url: str) -> Iterator[Any]:
    import psycopg
    from sqlalchemy.engine import make_url

    plain = make_url(database_url).set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(plain, autocommit=True) as conn:
        yield conn


@pytest.fixture(scope="module")
def org(api: httpx.Client, settings: Settings, database_url: str) -> Org:
    return bootstrap_org(api, settings, database_url, "Acme", "admin@acme.test")


@dataclass
class Setup:
    """One test's own store in the module's organisation and a key offered both memory tools and threads."""

    org: Org
    api: httpx.Client
    live: str
    settings: Settings
    database_url: str
    index_id: str
    key: str

    def tool(self, kind: str) -> str:
        return f"memory__{self.index_id}__{kind}"

    def http(self, headers: dict[str, str], work: Callable[[Client], Awaitable[T]], mode: str = "auto") -> T:
        """Run `work(client)` with the SDK's client over streamable HTTP, sending these headers."""

        async def go() -> T:
            async with httpx2.AsyncClient(headers=headers, timeout=30) as http, \
                    Client(streamable_http_client(f"{self.live}/mcp", http_client=http), mode=mode) as client:
                return await work(client)

        return asyncio.run(go())

    def stdio_params(self, credential: str, subject: str | None = None) -> StdioServerParameters:
        env = {"CORE_DATABASE_URL": self.database_url, "CORE_SECRET": self.settings.secret,
               "CORE_DATA_DIR": str(self.settings.data_dir), "CORE_MCP_KEY": credential}
        if subject is not None:
            env["CORE_MCP_SUBJECT"] = subject
        return StdioServerParameters(command=COREMEM, args=["mcp", "--stdio"], env=env)

    def stdio(self, credential: str, subject: str | None, work: Callable[[Client], Awaitable[T]]) -> T:
        """Run `work(client)` with the SDK's client against `coremem mcp --stdio` started for this credential."""

        async def go() -> T:
            async with Client(self.stdio_params(credential, subject)) as client:
                return await work(client)

        return asyncio.run(go())

    def anna(self) -> dict[str, str]:
        return bearer(self.key, "anna")

    def bob(self) -> dict[str, str]:
        return bearer(self.key, "bob")


def make_index(org: Org) -> str:
    response = org.client.post("/indexes", json={"name": f"notes-{uuid.uuid4().hex[:10]}"}, headers=org.admin)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def writer_key(org: Org, capabilities: list[str] | None = None, **memory: Any) -> str:
    config = {"retrieval_tool": True, "write_tool": True, **memory}
    return str(org.make_key(capabilities, policy=writer_policy(), memory=config)["secret"])


@pytest.fixture
def setup(org: Org, api: httpx.Client, live: str, settings: Settings, database_url: str) -> Setup:
    return Setup(org, api, live, settings, database_url, make_index(org), writer_key(org))


def text_of(result: Any) -> str:
    assert len(result.content) == 1 and result.content[0].type == "text", result
    return str(result.content[0].text)


def answer(result: Any) -> Any:
    """A successful call's JSON answer."""
    assert not result.is_error, text_of(result)
    return json.loads(text_of(result))


def tool_error(result: Any) -> dict[str, Any]:
    """A refused call's PLT-14 body, as the caller's model reads it."""
    assert result.is_error, text_of(result)
    return dict(json.loads(text_of(result))["error"])
