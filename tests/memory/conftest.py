"""Fixtures of the memory tests.

One migrated database, one app and two organisations per test module (bootstrapping an organisation hashes
an administrator password with argon2, which is what makes a fresh database per test slow); each test gets
its own index and keys, and tests count and check rows of their own index only.
"""

from __future__ import annotations

import itertools
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import psycopg
import pytest
from litestar.testing import TestClient

from backend.access.policy import writer_policy
from backend.app import create_app
from backend.config import Settings
from tests.helpers import Org, bearer, bootstrap_org

_modules = itertools.count()
T = TypeVar("T")


@pytest.fixture(scope="module")
def database_url(postgres: Any, template: str) -> Iterator[str]:
    name = f"m{os.getpid()}_{next(_modules)}"
    postgres.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    yield postgres.url_for(name)
    postgres.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="module")
def settings(tmp_path_factory: pytest.TempPathFactory, database_url: str) -> Settings:
    return Settings(database_url=database_url, data_dir=tmp_path_factory.mktemp("data"),
                    secret="test-secret-" + "x" * 20)


@pytest.fixture(scope="module")
def client(settings: Settings, database_url: str) -> Iterator[TestClient[Any]]:
    with TestClient(create_app(settings, database_url)) as test_client:
        yield test_client


@pytest.fixture(scope="module")
def db(database_url: str) -> Iterator[psycopg.Connection[Any]]:
    from sqlalchemy.engine import make_url

    plain = make_url(database_url).set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(plain, autocommit=True) as conn:
        yield conn


@pytest.fixture(scope="module")
def org(client: TestClient[Any], settings: Settings, database_url: str) -> Org:
    return bootstrap_org(client, settings, database_url, "Acme", "admin@acme.test")


@pytest.fixture(scope="module")
def other_org(client: TestClient[Any], settings: Settings, database_url: str) -> Org:
    return bootstrap_org(client, settings, database_url, "Globex", "admin@globex.test")


@dataclass
class Mem:
    """One test's own index in the module's organisation, and a writer key that is offered both memory tools."""

    org: Org
    client: Any
    index_id: str
    key: str

    def anna(self, **attrs: list[str]) -> dict[str, str]:
        return bearer(self.key, "anna", attrs or None)

    def bob(self) -> dict[str, str]:
        return bearer(self.key, "bob")

    @property
    def nobody(self) -> dict[str, str]:
        return bearer(self.key)

    @property
    def admin(self) -> dict[str, str]:
        return self.org.admin

    def write(self, headers: dict[str, str], text: str, **fields: Any) -> dict[str, Any]:
        body = {"index_id": self.index_id, "type": "fact", "text": text, **fields}
        response = self.client.post("/memory", json=body, headers=headers)
        assert response.status_code in (200, 201), response.text
        return dict(response.json())

    def ids(self, response: Any) -> list[str]:
        assert response.status_code == 200, response.text
        return [r["id"] for r in response.json()["data"]]

    def list(self, headers: dict[str, str], **params: Any) -> list[str]:
        return self.ids(self.client.get("/memory", params={"index_id": self.index_id, **params}, headers=headers))

    def tool(self, kind: str) -> str:
        return f"/tools/memory__{self.index_id}__{kind}/call"

    def counts(self, db: Any) -> tuple[int, int]:
        """(records, versions) of this test's index."""
        row = db.execute("SELECT (SELECT count(*) FROM memory_records WHERE index_id = %(i)s), "
                         "(SELECT count(*) FROM memory_versions v JOIN memory_records r "
                         " ON r.org_id = v.org_id AND r.id = v.record_id WHERE r.index_id = %(i)s)",
                         {"i": self.index_id}).fetchone()
        return int(row[0]), int(row[1])


def make_index(org: Org, embedding: dict[str, Any] | None = None) -> str:
    response = org.client.post("/indexes", json={"name": f"notes-{uuid.uuid4().hex[:10]}", "embedding": embedding},
                               headers=org.admin)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def writer_key(org: Org, **memory: Any) -> str:
    config = {"retrieval_tool": True, "write_tool": True, **memory}
    return str(org.make_key(policy=writer_policy(), memory=config)["secret"])


@pytest.fixture
def mem(org: Org, client: Any) -> Mem:
    return Mem(org, client, make_index(org), writer_key(org))
