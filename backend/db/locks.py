"""A lock held across several transactions and the calls between them, released by PostgreSQL itself when the
process holding it dies: a session-level advisory lock on a connection of its own."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from sqlalchemy import text
from sqlalchemy.ext.asyncio import async_sessionmaker

_TAKE = text("SELECT pg_try_advisory_lock(hashtextextended(:name, 0))")
_GIVE = text("SELECT pg_advisory_unlock(hashtextextended(:name, 0))")


@asynccontextmanager
async def held(sessionmaker: async_sessionmaker, name: str) -> AsyncIterator[bool]:
    """True inside the block when this process took the lock `name`, False when another one holds it. The lock's
    connection stays checked out for the block (no transaction open), so a killed worker frees it at once."""
    async with sessionmaker.kw["bind"].connect() as conn:
        taken = bool((await conn.execute(_TAKE, {"name": name})).scalar())
        await conn.commit()
        try:
            yield taken
        finally:
            if taken:
                await conn.execute(_GIVE, {"name": name})
                await conn.commit()
