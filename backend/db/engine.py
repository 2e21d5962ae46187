"""Async engine and the per-request transaction."""

from __future__ import annotations

from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker, create_async_engine


def normalise_url(url: str) -> str:
    """Accept plain `postgresql://` URLs and use the psycopg 3 driver for them."""
    parsed = make_url(url)
    if parsed.drivername in {"postgresql", "postgres", "postgresql+psycopg2"}:
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed.render_as_string(hide_password=False)


def make_engine(url: str, *, pool_size: int = 10) -> AsyncEngine:
    return create_async_engine(normalise_url(url), pool_size=pool_size, max_overflow=20, pool_pre_ping=True)


def make_sessionmaker(engine: AsyncEngine) -> async_sessionmaker:
    return async_sessionmaker(engine, expire_on_commit=False)
