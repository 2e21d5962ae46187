"""Test infrastructure: a real PostgreSQL with pgvector, a migrated template, a fresh database per test."""

from __future__ import annotations

import gc
import itertools
import logging
import os
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from litestar.testing import TestClient

from backend.app import create_app
from backend.config import Settings
from backend.db import migrate
from tests.helpers import DroppedConnections, Org, bootstrap_org, bootstrapped

TEMPLATE = "coremem_template"
SECRET = "test-secret-" + "x" * 20
# The organisations of the `org` and `other_org` fixtures: (name, administrator's address).
ORGS = {"org": ("Acme", "admin@acme.test"), "other_org": ("Globex", "admin@globex.test")}
logging.getLogger("pgserver").setLevel(logging.WARNING)
_counter = itertools.count()


class Postgres:
    """One server for the whole session; `admin_url` reaches its maintenance database."""

    def __init__(self, admin_url: str, url_for: Any) -> None:
        self.admin_url = admin_url
        self.url_for = url_for

    def execute(self, sql: str) -> None:
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(sql)  # type: ignore[arg-type]


@pytest.fixture(scope="session", autouse=True)
def dropped_connections() -> Iterator[DroppedConnections]:
    """Fails the session when any connection was dropped unreturned (a transaction some code left open)."""
    with DroppedConnections() as handler:
        yield handler
        gc.collect()
    assert handler.count == 0, f"connections dropped unreturned, found during: {handler.during}"


@pytest.fixture(autouse=True)
def _name_the_running_test(request: pytest.FixtureRequest, dropped_connections: DroppedConnections) -> None:
    dropped_connections.current = request.node.nodeid


@pytest.fixture(scope="session")
def postgres() -> Iterator[Postgres]:
    given = os.environ.get("CORE_TEST_DATABASE_URL")
    if given:
        from sqlalchemy.engine import make_url

        base = make_url(given)
        admin = base.set(drivername="postgresql", database="postgres").render_as_string(hide_password=False)
        yield Postgres(admin, lambda name: base.set(database=name).render_as_string(hide_password=False))
        return
    from backend.db.embedded import socket_url, start_server

    # Not under pytest's basetemp: pytest prunes old session folders, which would pull the data directory
    # from under a long run whenever other pytest sessions start on the same machine.
    pgdata = Path(tempfile.mkdtemp(prefix="coremem-test-pg-"))
    server = start_server(pgdata, cleanup_mode="stop")
    admin = f"postgresql://postgres@/postgres?host={pgdata.resolve()}"
    pg = Postgres(admin, lambda name: socket_url(pgdata, name))
    # A throwaway server: durability buys nothing here, and skipping fsync makes each database clone cheap.
    for setting in ("fsync = off", "synchronous_commit = off", "full_page_writes = off"):
        pg.execute(f"ALTER SYSTEM SET {setting}")
    pg.execute("SELECT pg_reload_conf()")
    yield pg
    server.cleanup()
    shutil.rmtree(pgdata, ignore_errors=True)


@pytest.fixture(scope="session")
def template(postgres: Postgres) -> str:
    postgres.execute(f'DROP DATABASE IF EXISTS "{TEMPLATE}" WITH (FORCE)')
    postgres.execute(f'CREATE DATABASE "{TEMPLATE}"')
    migrate.upgrade(postgres.url_for(TEMPLATE))
    return TEMPLATE


class Templates:
    """Migrated databases a test's database is cloned from: the bare one, or one with the organisations the test
    asks for through `org` / `other_org` already bootstrapped, once a session. Bootstrapping hashes a password and
    checks it (argon2, about 0.3 s), which every test paid when each made its own."""

    def __init__(self, postgres: Postgres, bare: str) -> None:
        self.postgres = postgres
        self.made: dict[tuple[str, ...], tuple[str, dict[str, dict[str, Any]]]] = {(): (bare, {})}

    def with_orgs(self, wanted: tuple[str, ...]) -> tuple[str, dict[str, dict[str, Any]]]:
        """(template name, each fixture's bootstrap result) for the fixtures named in `wanted`, made on first use."""
        if wanted not in self.made:
            name = "_".join((TEMPLATE, *wanted))
            self.postgres.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            self.postgres.execute(f'CREATE DATABASE "{name}" TEMPLATE "{TEMPLATE}"')
            url = self.postgres.url_for(name)
            # A day's session tokens: the template outlives the hour a test's own bootstrap would give them.
            results = {fixture: bootstrapped(url, SECRET, *ORGS[fixture], ttl_seconds=86_400) for fixture in wanted}
            self.made[wanted] = (name, results)
        return self.made[wanted]


@pytest.fixture(scope="session")
def templates(postgres: Postgres, template: str) -> Templates:
    return Templates(postgres, template)


def _uses_this_files_fixture(request: pytest.FixtureRequest, name: str) -> bool:
    """Whether the test gets `name` from this file, directly or through overrides that wrap it (tests/agents): a
    module with an `org` of its own bootstraps what it needs itself."""
    definitions = request._fixturemanager.getfixturedefs(name, request.node) or ()
    for definition in reversed(definitions):
        if definition.func.__module__ == __name__:
            return True
        if name not in definition.argnames:
            return False
    return False


# database URL -> the organisations its template held (bootstrap results by fixture name)
_premade: dict[str, dict[str, dict[str, Any]]] = {}


@pytest.fixture
def database_url(request: pytest.FixtureRequest, postgres: Postgres, templates: Templates) -> Iterator[str]:
    """A fresh database cloned from the migrated template (with the test's organisations made), dropped afterwards."""
    wanted = tuple(fixture for fixture in ORGS
                   if fixture in request.fixturenames and _uses_this_files_fixture(request, fixture))
    template, made = templates.with_orgs(wanted)
    name = f"t{os.getpid()}_{next(_counter)}"
    postgres.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    url = postgres.url_for(name)
    _premade[url] = made
    yield url
    del _premade[url]
    postgres.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def db(database_url: str) -> Iterator[psycopg.Connection[Any]]:
    """A direct connection for checking what the API wrote (autocommit, plain SQL)."""
    from sqlalchemy.engine import make_url

    plain = make_url(database_url).set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(plain, autocommit=True) as conn:
        yield conn


@pytest.fixture
def settings(tmp_path: Path, database_url: str) -> Settings:
    return Settings(database_url=database_url, data_dir=tmp_path / "data", secret=SECRET)


@pytest.fixture
def client(settings: Settings, database_url: str) -> Iterator[TestClient[Any]]:
    with TestClient(create_app(settings, database_url)) as test_client:
        yield test_client


def _organisation(fixture: str, client: TestClient[Any], settings: Settings, database_url: str) -> Org:
    made = _premade.get(database_url, {}).get(fixture)
    if made is not None and settings.secret == SECRET:
        return Org(client=client, **made)
    return bootstrap_org(client, settings, database_url, *ORGS[fixture])


@pytest.fixture
def org(client: TestClient[Any], settings: Settings, database_url: str) -> Org:
    return _organisation("org", client, settings, database_url)


@pytest.fixture
def other_org(client: TestClient[Any], settings: Settings, database_url: str) -> Org:
    return _organisation("other_org", client, settings, database_url)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def live_api(settings: Settings, database_url: str) -> Iterator[str]:
    """The API under uvicorn on a free loopback port, for end-to-end tests over real HTTP."""
    import httpx
    import uvicorn

    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(settings, database_url), host="127.0.0.1", port=port,
                                           log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(0.1)
    yield base
    server.should_exit = True
    thread.join(timeout=10)


@pytest.fixture(scope="session")
def model_server() -> Iterator[Any]:
    """The scripted OpenAI-compatible server (tests/model_server.py), once per session on a loopback port."""
    import uvicorn

    from tests.model_server import ScriptedModel

    app = ScriptedModel()
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    app.url = f"http://127.0.0.1:{port}/v1"
    yield app
    server.should_exit = True
    thread.join(timeout=10)


@pytest.fixture
def scripted(model_server: Any, org: Org) -> Any:
    """The scripted server, emptied, and offered to `org` as the model `scripted`."""
    model_server.reset()
    response = org.client.post("/admin/models", headers=org.admin,
                               json={"id": "scripted", "provider": "openai_compatible", "base_url": model_server.url})
    assert response.status_code == 201, response.text
    return model_server


@pytest.fixture
def run_jobs(database_url: str, settings: Settings) -> Any:
    """Runs a real job-queue worker (backend/jobs) in this process until no job may run now; returns when done."""
    import asyncio

    from backend.jobs.worker import run_worker

    def run(concurrency: int = 1) -> None:  # with more, the worker stops at the first empty fetch while a job
        # that queues others still runs (procrastinate's wait=False)
        asyncio.run(run_worker(database_url, settings, concurrency=concurrency, wait=False,
                               install_signal_handlers=False, listen_notify=False))

    return run


@pytest.fixture
def background_worker(database_url: str, settings: Settings) -> Iterator[Any]:
    """Starts real workers on threads of their own (as `coremem run` does), each stopped when the test ends."""
    from backend.jobs.worker import BackgroundWorker

    started: list[BackgroundWorker] = []

    def start(concurrency: int = 1) -> BackgroundWorker:
        started.append(BackgroundWorker(database_url, settings, concurrency=concurrency).start())
        return started[-1]

    yield start
    for worker in started:
        worker.stop()
