"""Alembic environment: runs migrations on a synchronous psycopg connection."""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine, pool

from backend.db.schema import include_object, metadata

config = context.config
target_metadata = metadata


def run_migrations_online() -> None:
    connectable = config.attributes.get("connection")
    if connectable is not None:
        context.configure(connection=connectable, target_metadata=target_metadata, compare_server_default=True,
                          include_object=include_object)
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = create_engine(config.get_main_option("sqlalchemy.url") or "", poolclass=pool.NullPool)
    with engine.connect() as connection:
        context.configure(connection=connection, target_metadata=target_metadata, compare_server_default=True,
                          include_object=include_object)
        with context.begin_transaction():
            context.run_migrations()
    engine.dispose()


run_migrations_online()
