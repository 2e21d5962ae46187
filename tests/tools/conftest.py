"""The memory tools' tests share the memory tests' fixtures: one database, app and organisation per module."""

from tests.memory.conftest import client, database_url, db, mem, org, other_org, settings  # noqa: F401
