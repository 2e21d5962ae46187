"""backend/db/prepared.py: a statement compiled once runs with PostgreSQL's own `$n` placeholders on a raw
cursor, so its text reaches the server as it is (house rule 12)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from sqlalchemy import Integer, Text, bindparam, func, literal_column, select
from sqlalchemy.dialects.postgresql import JSONB

from backend.db.engine import make_engine, make_sessionmaker
from backend.db.prepared import Prepared


def _run(database_url: str, statement: Prepared, params: dict[str, Any]) -> list[dict[str, Any]]:
    async def run() -> list[dict[str, Any]]:
        engine = make_engine(database_url, pool_size=1, app_role=False)
        try:
            async with make_sessionmaker(engine)() as db, db.begin():
                return await statement.all(db, params)
        finally:
            await engine.dispose()

    return asyncio.run(run())


def test_a_prepared_statement_keeps_percent_signs_reuses_a_name_and_carries_its_constants(database_url):
    word = bindparam("word", type_=Text)
    statement = Prepared(select(
        literal_column("'50%'").label("percent"),   # a literal percent sign is not a placeholder
        (word + literal_column("'%s'")).label("glued"),  # nor is one that looks like psycopg's
        word.like("ab%").label("starts"),
        func.jsonb_typeof(bindparam("doc", type_=JSONB)).label("kind"),
        (bindparam("n", type_=Integer) + 1).label("next"),
    ).where(word == bindparam("word", type_=Text)).limit(1))
    assert "%(" not in statement.sql and "$1" in statement.sql
    assert statement.order.count("word") == 1  # one placeholder for a name used three times
    rows = _run(database_url, statement, {"word": "abc", "doc": {"a": [1]}, "n": 41})
    assert rows == [{"percent": "50%", "glued": "abc%s", "starts": True, "kind": "object", "next": 42}]


def test_a_prepared_statement_names_the_values_it_was_not_given():
    statement = Prepared(select(bindparam("a", type_=Text).label("a"), bindparam("b", type_=Text).label("b")))
    with pytest.raises(KeyError, match=r"\['b'\]"):
        statement.values({"a": "x"})
