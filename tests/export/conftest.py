"""Fixtures of the export tests: the memory tests' module-scoped database, app and organisations (fast)."""

from __future__ import annotations

from tests.memory.conftest import client, database_url, db, mem, org, other_org, settings

__all__ = ["client", "database_url", "db", "mem", "org", "other_org", "settings"]
