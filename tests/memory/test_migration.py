"""The migrations match the ORM models exactly, and go down to the foundation and up again cleanly."""

from __future__ import annotations

import os
import warnings
from typing import Any

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine

from backend.db import migrate
from backend.db.engine import normalise_url
from backend.db.schema import include_object, metadata


def differences(url: str) -> list[Any]:
    engine = create_engine(normalise_url(url))
    try:
        with engine.connect() as conn, warnings.catch_warnings():
            warnings.simplefilter("error")  # an index alembic cannot compare would hide drift: fail instead
            # The job queue's tables are procrastinate's own schema, left out (backend/db/schema.include_object).
            context = MigrationContext.configure(conn, opts={"compare_server_default": True, "compare_type": True,
                                                             "include_object": include_object})
            return list(compare_metadata(context, metadata))
    finally:
        engine.dispose()


def test_mem_migration_0002_has_no_drift_and_round_trips(postgres: Any, template: str) -> None:
    name = f"drift{os.getpid()}"
    postgres.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    postgres.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    url = postgres.url_for(name)
    try:
        assert differences(url) == []
        command.downgrade(migrate.alembic_config(url), "0001")
        assert migrate.current_revision(url) == "0001"
        migrate.upgrade(url)
        assert differences(url) == []
    finally:
        postgres.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_plt_16_openapi_describes_the_memory_routes(client: Any) -> None:
    response = client.get("/schema/openapi.json")
    assert response.status_code == 200, response.text
    paths = response.json()["paths"]
    for path, methods in {
        "/memory": {"get", "post"}, "/memory/batch": {"post"}, "/memory/expiring": {"get"},
        "/memory/recall": {"get"}, "/memory/by-tag": {"get"}, "/memory/search": {"get"},
        "/memory/{record_id}": {"get", "patch", "delete"}, "/memory/{record_id}/history": {"get"},
        "/memory/{record_id}/verify": {"post"}, "/tools": {"get"}, "/tools/{name}/call": {"post"},
        "/subjects/{subject_id}": {"delete"},
    }.items():
        assert methods <= set(paths[path]), path
    create = paths["/memory"]["post"]["responses"]
    assert {"200", "201"} <= set(create)
    assert "text/plain" in paths["/memory/recall"]["get"]["responses"]["200"]["content"]
