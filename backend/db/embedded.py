"""The embedded PostgreSQL with pgvector (pgserver), used when CORE_DATABASE_URL is unset."""

from __future__ import annotations

from pathlib import Path
from typing import Any

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
    return _servers[pgdata]


def socket_url(pgdata: Path, database: str) -> str:
    return f"postgresql+psycopg://postgres@/{database}?host={pgdata.resolve()}"


def ensure_database(server: Any, database: str) -> None:
    exists = server.psql(f"SELECT 1 FROM pg_database WHERE datname = '{database}';")
    if "1 row" not in exists:
        server.psql(f'CREATE DATABASE "{database}";')


def embedded_database_url(data_dir: Path) -> str:
    pgdata = data_dir / "pg"
    server = start_server(pgdata)
    ensure_database(server, DATABASE_NAME)
    return socket_url(pgdata, DATABASE_NAME)
