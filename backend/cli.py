"""The `coremem` command (PLT-19)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import click

from backend.config import get_settings

T = TypeVar("T")
DEMO_ORG = "Demo"
DEMO_ADMIN = "admin@demo.local"
DASHBOARD_PORT = 8501


def _database_url() -> str:
    from backend.app import resolve_database_url

    return resolve_database_url(get_settings())


def _with_session(url: str, work: Callable[[Any], Awaitable[T]]) -> T:
    """Run `work(session)` in one transaction on a fresh engine."""
    from backend.db.engine import make_engine, make_sessionmaker

    async def go() -> T:
        engine = make_engine(url, pool_size=2)
        try:
            async with make_sessionmaker(engine)() as session, session.begin():
                return await work(session)
        finally:
            await engine.dispose()

    return asyncio.run(go())


@click.group()
def main() -> None:
    """coremem: memory and conversation threads for LLM applications."""


@main.command()
def migrate() -> None:
    """Upgrade the database to the newest schema."""
    from backend.db import migrate as migrations

    url = _database_url()
    migrations.upgrade(url)
    click.echo(f"database at revision {migrations.current_revision(url)}")


def _bootstrap(url: str, org: str, admin: str) -> dict[str, Any]:
    from backend.db import migrate as migrations
    from backend.domains.orgs import service

    settings = get_settings()
    migrations.upgrade(url)
    return _with_session(url, lambda db: service.bootstrap(
        db, org_name=org, admin_email=admin, secret=settings.secret,
        key_retention_days=settings.key_audit_retention_days, ttl_seconds=settings.admin_token_ttl_seconds))


@main.command()
@click.option("--org", "org_name", required=True, help="Organisation name (reused when it exists).")
@click.option("--admin", "admin_email", required=True, help="Administrator e-mail address.")
def bootstrap(org_name: str, admin_email: str) -> None:
    """Create an organisation, its administrator and a full-capability key; print them as JSON."""
    click.echo(json.dumps(_bootstrap(_database_url(), org_name, admin_email)))


@main.group()
def audit() -> None:
    """The audit trail."""


@audit.command("verify")
@click.option("--org", "org_id", default=None, help="Only this organisation (default: all).")
def audit_verify(org_id: str | None) -> None:
    """Check every organisation's hash chain; exit 1 when a row was tampered with."""
    from backend.domains.audit import repository, service

    async def work(db: Any) -> list[service.ChainReport]:
        orgs = [org_id] if org_id else await repository.org_ids(db)
        return [await service.verify_org(db, o) for o in orgs]

    reports = _with_session(_database_url(), work)
    broken = False
    for report in reports:
        if report.intact:
            click.echo(f"{report.org_id}: intact ({report.events} events)")
        else:
            broken = True
            click.echo(f"{report.org_id}: BROKEN at seq {report.broken_at_seq}: {report.problem}")
    if broken:
        sys.exit(1)


# ---------------------------------------------------------------- export (EXP-1)

FORMAT_CHOICE = click.Choice(["parquet", "csv", "ndjson"])


def _instant(value: str | None, name: str) -> Any:
    """An instant on the command line: RFC 3339 with an offset (`2026-01-31T09:00:00Z`), like the API's."""
    from datetime import datetime

    if value is None:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError as exc:
        raise click.BadParameter(f"{value!r} is not an RFC 3339 instant.", param_hint=name) from exc
    if parsed.tzinfo is None:
        raise click.BadParameter("an instant needs its offset, such as `...Z` or `...+01:00`.", param_hint=name)
    return parsed


def _bar() -> Any:
    """The export's progress as a rich bar on a terminal: rows of the counted total, rate, elapsed time."""
    from backend.domains.exports.to_file import Progress

    class Bar(Progress):
        def __init__(self) -> None:
            self.bar: Any = None

        def start(self, total: int) -> None:
            self.bar = _progress(total)

        def advance(self, rows: int) -> None:
            self.bar[0].advance(self.bar[1], rows)

        def stop(self) -> None:
            if self.bar is not None:
                self.bar[0].stop()

    return Bar()


def _export(kind: str, fmt: str, out: str, org_id: str | None, **filters: Any) -> int:
    from backend.domains.exports.to_file import export_to_file
    from backend.errors import ApiError

    try:
        return export_to_file(_database_url(), get_settings().secret, kind, fmt, out, org_id=org_id,
                              progress=_bar() if sys.stdout.isatty() else None, **filters)
    except ApiError as exc:
        if exc.code == "org_required":
            raise click.UsageError(exc.message) from exc
        raise click.ClickException(exc.message) from exc


def _progress(total: int, label: str = "export") -> Any:
    """A rich bar on a terminal: rows done of the rows counted, rate and elapsed time; returns (bar, task)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, TextColumn, TimeElapsedColumn
    from rich.text import Text

    class Rate(ProgressColumn):
        def render(self, task: Any) -> Text:
            return Text(f"{task.speed or 0:,.0f} rows/s")

    bar = Progress(TextColumn(label), BarColumn(), MofNCompleteColumn(), TextColumn("rows"), Rate(),
                   TimeElapsedColumn())
    task = bar.add_task(label, total=total)
    bar.start()
    return bar, task


@main.group()
def export() -> None:
    """Export records or thread items for analysts (Parquet, CSV, NDJSON; docs/export.md)."""


def _export_options(command: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed([
        click.option("--org", "org_id", default=None,
                     help="Organisation id; the export sees all of it. Needed only when the index or thread named, "
                          "or the database's only organisation, does not say."),
        click.option("--format", "fmt", type=FORMAT_CHOICE, default="parquet", show_default=True),
        click.option("--out", required=True, type=click.Path(dir_okay=False, writable=True), help="File to write."),
        click.option("--since", default=None, help="Created at or after this instant (RFC 3339 with offset)."),
        click.option("--until", default=None, help="Created before this instant."),
    ]):
        command = option(command)
    return command


@export.command("records")
@_export_options
@click.option("--index", "index_id", default=None, help="Only this index.")
@click.option("--type", "types", multiple=True, help="Only this type (repeatable).")
@click.option("--subject", default=None, help="Only this person's records.")
@click.option("--shared", is_flag=True, help="Only shared records (nobody's).")
@click.option("--include-expired", is_flag=True, help="Also records past `expires_at`.")
@click.option("--include-replaced", is_flag=True, help="Also records a correction replaced.")
def export_records(org_id: str | None, fmt: str, out: str, since: str | None, until: str | None, index_id: str | None,
                   types: tuple[str, ...], subject: str | None, shared: bool, include_expired: bool,
                   include_replaced: bool) -> None:
    """Memory records as `GET /memory` shows them to an administrator, with effective confidence (EXP-1)."""
    from shared.schemas.memory import MemoryQuery

    if subject is not None and shared:
        raise click.UsageError("--subject and --shared exclude each other.")
    f = MemoryQuery(index_id=index_id, type=list(types), subject=subject, shared=shared,
                    after=_instant(since, "--since"), before=_instant(until, "--until"),
                    include_expired=include_expired, include_replaced=include_replaced)
    rows = _export("records", fmt, out, org_id, records=f)
    click.echo(f"{rows} records written to {out}")


@export.command("thread-items")
@_export_options
@click.option("--thread", "thread_id", default=None, help="Only this thread.")
@click.option("--subject", default=None, help="Only items this person wrote.")
def export_thread_items(org_id: str | None, fmt: str, out: str, since: str | None, until: str | None,
                        thread_id: str | None, subject: str | None) -> None:
    """Items of the organisation's threads, by thread and position (EXP-1)."""
    from backend.domains.exports.service import ItemFilters

    items = ItemFilters(thread_id, subject, _instant(since, "--since"), _instant(until, "--until"))
    rows = _export("thread_items", fmt, out, org_id, items=items)
    click.echo(f"{rows} thread items written to {out}")


@main.group()
def memory() -> None:
    """Maintenance of memory records."""


@memory.command("reembed")
@click.option("--org", "org_id", default=None, help="Only this organisation (default: all).")
@click.option("--index", "index_id", default=None, help="Only this index.")
@click.option("--batch", default=256, show_default=True, type=click.IntRange(1, 2048),
              help="Records per provider call and per transaction.")
def memory_reembed(org_id: str | None, index_id: str | None, batch: int) -> None:
    """Give records of embedding indexes the vector their write could not get (the provider failed, PLT-13).

    Exits 1 when a provider still fails; what was embedded stays, and running it again continues."""
    from backend.db.engine import make_engine, make_sessionmaker
    from backend.domains.memory import reembed

    async def go() -> list[Any]:
        engine = make_engine(_database_url(), pool_size=2)
        try:
            sessions = make_sessionmaker(engine)
            async with sessions() as db:
                total = sum(p["missing"] for p in await reembed.pending(db, org_id, index_id))
            bar = _progress(total, "embedding") if sys.stdout.isatty() and total else None

            def advance(rows: int) -> None:
                if bar is not None:
                    bar[0].advance(bar[1], rows)

            try:
                return await reembed.run(sessions, get_settings().secret, org_id=org_id, index_id=index_id,
                                         batch=batch, advance=advance)
            finally:
                if bar is not None:
                    bar[0].stop()
        finally:
            await engine.dispose()

    outcomes = asyncio.run(go())
    if not outcomes:
        click.echo("Every record of every embedding index has its vector.")
    for o in outcomes:
        line = f"{o.org_id} {o.index_id}: {o.embedded} embedded, {o.left} still without a vector"
        click.echo(line + (f" (the provider failed: {o.error})" if o.error else ""))
    if any(o.error for o in outcomes):
        sys.exit(1)


def _serve(host: str, port: int, url: str | None = None) -> None:
    import gc

    import uvicorn

    from backend.app import create_app

    settings = get_settings()
    app = create_app(database_url=url)
    # What is loaded and built by now lives as long as the process; out of the collector's sight, it no longer
    # lengthens every full collection (pauses of 100 ms and more under load were measured with it in sight).
    gc.collect()
    gc.freeze()
    uvicorn.run(app, host=host, port=port, log_level="info", access_log=settings.access_log)


@main.command()
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8000, show_default=True, type=int)
def serve(host: str, port: int) -> None:
    """Run the API."""
    _serve(host, port)


def _dashboard_command(host: str, port: int) -> list[str]:
    """`streamlit run` on the dashboard, headless, without usage statistics or tracebacks shown to users."""
    import dashboard

    app = os.path.join(os.path.dirname(os.path.abspath(dashboard.__file__)), "streamlit_app.py")
    return [sys.executable, "-m", "streamlit", "run", app, "--server.address", host, "--server.port", str(port),
            "--server.headless", "true", "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none",
            "--client.showErrorDetails", "none", "--client.toolbarMode", "minimal"]


def _dashboard_env(api_url: str) -> dict[str, str]:
    from shared.client import API_URL_ENV

    return {**os.environ, API_URL_ENV: api_url, "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false"}


def _local_url(host: str, port: int) -> str:
    """An address this machine can call: a wildcard bind is reached on loopback."""
    if host in ("0.0.0.0", "", "::"):
        host = "127.0.0.1"
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}"


@main.command()
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=DASHBOARD_PORT, show_default=True, type=int)
@click.option("--api-url", default=None, envvar="CORE_API_URL",
              help="Where the API answers  [default: CORE_API_URL, else http://127.0.0.1:8000]")
def dashboard(host: str, port: int, api_url: str | None) -> None:
    """Run the administrator dashboard (Streamlit); it talks to the API only."""
    from shared.client import DEFAULT_API_URL

    api = api_url or DEFAULT_API_URL
    click.echo(f"Dashboard: {_local_url(host, port)}  (API: {api})")
    sys.stdout.flush()
    command = _dashboard_command(host, port)
    # Replace this process, so stopping `coremem dashboard` stops Streamlit with it.
    os.execve(command[0], command, _dashboard_env(api))


def _demo_admin_exists(url: str) -> bool:
    from backend.domains.orgs import repository

    return _with_session(url, lambda db: repository.admin_by_email(db, DEMO_ADMIN)) is not None


@main.command()
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8000, show_default=True, type=int)
@click.option("--dashboard-port", default=DASHBOARD_PORT, show_default=True, type=int)
@click.option("--no-dashboard", is_flag=True, help="Start the API only.")
def run(host: str, port: int, dashboard_port: int, no_dashboard: bool) -> None:
    """The whole product for a newcomer: database, migrations, demo data on first start, the API and the dashboard."""
    from backend.db import migrate as migrations

    url = _database_url()
    fresh = migrations.current_revision(url) is None
    migrations.upgrade(url)
    demo_login = fresh
    if fresh:
        demo = _bootstrap(url, DEMO_ORG, DEMO_ADMIN)
        click.echo("Demo organisation created. Keep these; they are shown once:")
        click.echo(f"  administrator: {demo['admin_email']}  password: {demo['admin_password']}")
        click.echo(f"  API key:       {demo['key']}")
    elif _demo_admin_exists(url):
        demo_login = True
        click.echo(f"Demo login: {DEMO_ADMIN} with the password printed on the first start "
                   f"(`coremem bootstrap --org {DEMO_ORG} --admin {DEMO_ADMIN}` sets a new one).")
    api = _local_url(host, port)
    click.echo(f"API:       {api}")
    click.echo(f"OpenAPI:   {api}/schema/openapi.json")
    streamlit: subprocess.Popen[bytes] | None = None
    if not no_dashboard:
        streamlit = subprocess.Popen(_dashboard_command(host, dashboard_port), env=_dashboard_env(api))
        hint = f"  (log in as {DEMO_ADMIN})" if demo_login else ""
        click.echo(f"Dashboard: {_local_url(host, dashboard_port)}{hint}")
        # uvicorn re-raises SIGTERM after its graceful shutdown; turning it into SystemExit lets `finally` stop
        # Streamlit instead of leaving it orphaned.
        signal.signal(signal.SIGTERM, lambda signum, _frame: sys.exit(128 + signum))
    try:
        _serve(host, port, url)
    finally:
        if streamlit is not None:
            streamlit.terminate()
            try:
                streamlit.wait(timeout=10)
            except subprocess.TimeoutExpired:
                streamlit.kill()


if __name__ == "__main__":
    main()
