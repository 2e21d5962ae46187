"""The embedded PostgreSQL with pgvector (pgserver), used when CORE_DATABASE_URL is unset."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy.engine import make_url

from backend.config import Settings
from backend.db.tenant import APP_ROLE

DATABASE_NAME = "coremem"
_servers: dict[Path, Any] = {}  # keeps each server handle alive for the life of the process


def start_server(pgdata: Path, *, cleanup_mode: str | None = "stop") -> Any:
    """Start (or join) the embedded server in `pgdata`; it stops when the last process using it exits."""
    import warnings

    with warnings.catch_warnings():  # platformdirs warns about XDG_RUNTIME_DIR on servers; harmless here
        warnings.simplefilter("ignore")
        import pgserver

    pgdata = pgdata.resolve()
    if pgdata not in _servers:
        pgdata.mkdir(parents=True, exist_ok=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _servers[pgdata] = pgserver.get_server(pgdata, cleanup_mode=cleanup_mode)
        _ensure_app_login(_servers[pgdata])
    return _servers[pgdata]


def _ensure_app_login(server: Any) -> None:
    """The application's role may log in, so the API and the workers connect as it and never as the owner
    (issue 17 item 11). Roles belong to the cluster, so this runs once per server, before any migration: 0016
    then finds the role and only grants it its rights. The server trusts local connections (pgserver)."""
    server.psql(f"""DO $$ BEGIN
        IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{APP_ROLE}') THEN
            CREATE ROLE {APP_ROLE} LOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE;
        ELSE
            ALTER ROLE {APP_ROLE} LOGIN;
        END IF;
    EXCEPTION WHEN duplicate_object THEN NULL;
    END $$;""")


def socket_url(pgdata: Path, database: str) -> str:
    return f"postgresql+psycopg://postgres@/{database}?host={pgdata.resolve()}"


def app_login_url(url: str) -> str:
    """`url` with the application's role as its login when it reaches an embedded server, whose socket lives in
    its own data directory; any other URL unchanged (`make_engine` then switches role at connection start)."""
    parsed = make_url(url)
    host = parsed.query.get("host")
    if isinstance(host, str) and parsed.username == "postgres" and (Path(host) / "PG_VERSION").is_file():
        return parsed.set(username=APP_ROLE).render_as_string(hide_password=False)
    return url


def ensure_database(server: Any, database: str) -> None:
    exists = server.psql(f"SELECT 1 FROM pg_database WHERE datname = '{database}';")
    if "1 row" not in exists:
        server.psql(f'CREATE DATABASE "{database}";')


def embedded_database_url(data_dir: Path) -> str:
    pgdata = data_dir / "pg"
    server = start_server(pgdata)
    ensure_database(server, DATABASE_NAME)
    return socket_url(pgdata, DATABASE_NAME)


def resolve_database_url(settings: Settings) -> str:
    """`CORE_DATABASE_URL` when set, else the embedded server's (started on first use). Here rather than beside
    the app, so a command or a worker does not import the whole API to learn it (about a second)."""
    return settings.database_url or embedded_database_url(settings.data_dir)
