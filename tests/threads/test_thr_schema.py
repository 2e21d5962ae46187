"""The thread tables: the migrations build exactly what the models describe (drift check), and 0003 reverses."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine

from backend.db import migrate
from backend.db.engine import normalise_url
from backend.db.schema import include_object, metadata


def _drift(url: str) -> list[object]:
    engine = create_engine(normalise_url(url))
    try:
        with engine.connect() as conn:
            # The job queue's tables are procrastinate's own schema, left out (backend/db/schema.include_object).
            context = MigrationContext.configure(conn, opts={"compare_server_default": True,
                                                             "include_object": include_object})
            return list(compare_metadata(context, metadata))
    finally:
        engine.dispose()


def test_thr_schema_migrations_match_models_and_0003_reverses(database_url):
    assert _drift(database_url) == []
    migrate.command.downgrade(migrate.alembic_config(database_url), "0001")
    assert migrate.current_revision(database_url) == "0001"
    migrate.upgrade(database_url)
    assert _drift(database_url) == []


def test_thr_7_rare_words_in_messages_are_estimated_from_a_long_list_of_frequent_ones(db):
    # At 5M messages the default list (100) made the planner walk a week of messages for a rare word (30 ms)
    # instead of reading its few messages from the word index (3 ms): bench/results/search-5m.md.
    target = db.execute("SELECT attstattarget FROM pg_attribute WHERE attrelid = 'thread_items'::regclass "
                        "AND attname = 'tsv'").fetchone()[0]
    assert target == 300
