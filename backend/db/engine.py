"""Async engine and the per-request transaction."""

from __future__ import annotations

import msgspec
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker, create_async_engine

from backend.db.embedded import app_login_url
from backend.db.tenant import APP_ROLE


def normalise_url(url: str) -> str:
    """Accept plain `postgresql://` URLs and use the psycopg 3 driver for them."""
    parsed = make_url(url)
    if parsed.drivername in {"postgresql", "postgres", "postgresql+psycopg2"}:
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed.render_as_string(hide_password=False)


def make_engine(url: str, *, pool_size: int = 10, app_role: bool = True) -> AsyncEngine:
    """The application's engine. Its connections act as `coremem_app` (issue 17 item 11), which owns no table and
    is bound by row-level security. On the embedded server they log in as it. Elsewhere they log in as the URL
    says and take the role at connection start (libpq `options`, no extra round trip): give the application a
    login that is `coremem_app` or a member of it, not the owner, or a `RESET ROLE` would drop the protection
    (docs/operations.md). `app_role=False` is for the owner's own work (tests' fixtures, benchmarks' data
    builders), never for requests or jobs."""
    if app_role:
        url = app_login_url(url)
    logs_in_as_app = make_url(url).username == APP_ROLE
    # Custom plans always: psycopg prepares a statement run five times on a connection, and PostgreSQL may then
    # settle on a generic plan, which cannot fold the policy's and the scope's tests against the person asking
    # (`subject = $1 OR subject IS NULL` became a pass over the whole organisation: 0.1 s -> 5.8 s for a count).
    options = "-c plan_cache_mode=force_custom_plan"
    if app_role and not logs_in_as_app:
        options += f" -c role={APP_ROLE}"
    connect_args = {"options": options}
    # No ping before each checkout (a round trip per request): a connection the server dropped fails its
    # request, and SQLAlchemy then discards every pooled connection; they are also renewed every 30 minutes.
    # JSON columns are read and written with msgspec, several times faster than the standard library's json
    # module (the connection's psycopg adapters take both, so driver SQL of `Prepared` writes with it too).
    return create_async_engine(normalise_url(url), pool_size=pool_size, max_overflow=20, pool_pre_ping=False,
                               pool_recycle=1800, json_deserializer=msgspec.json.decode,
                               json_serializer=msgspec.json.encode, connect_args=connect_args)


def make_sessionmaker(engine: AsyncEngine) -> async_sessionmaker:
    return async_sessionmaker(engine, expire_on_commit=False)
