"""`coremem serve`, `dashboard` and `run`: the processes of the product."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from typing import Any

import click

from backend.cli.base import DASHBOARD_PORT, DEMO_ADMIN, DEMO_ORG, database_url, main, with_session
from backend.cli.demo import describe, make_demo, write_env_file
from backend.config import get_settings

# A TCP port; a larger number was taken modulo 65536 by the server (70000 served on 4464).
PORT = click.IntRange(0, 65535)
DEMO_ENV = "demo.env"  # in CORE_DATA_DIR: the first start's demo credentials, for the README's tour


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
@click.option("--port", default=8000, show_default=True, type=PORT)
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
@click.option("--port", default=DASHBOARD_PORT, show_default=True, type=PORT)
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


def _empty(url: str) -> bool:
    from backend.domains.orgs import repository

    return not with_session(url, repository.any_org)


def _demo_org(url: str) -> dict[str, Any] | None:
    """The demo organisation, when its administrator still exists."""
    from backend.domains.orgs import repository

    async def find(db: Any) -> dict[str, Any] | None:
        admin = await repository.admin_by_email(db, DEMO_ADMIN)
        return None if admin is None or admin["org_id"] is None else await repository.get(db, admin["org_id"])

    return with_session(url, find)


def _announce_demo(url: str) -> str | None:
    """Create the demo on an empty database, else say where the existing one is; answers the login to show."""
    if _empty(url):
        credentials, counts, seconds = make_demo(url, DEMO_ORG)
        env_file = get_settings().data_dir / DEMO_ENV
        write_env_file(env_file, credentials)
        click.echo(describe(DEMO_ORG, credentials, counts, seconds))
        click.echo(f"  (also in {env_file}, for the README's tour)")
        return DEMO_ADMIN
    org = _demo_org(url)
    if org is None:
        return None
    env_file = get_settings().data_dir / DEMO_ENV
    kept = f" (kept in {env_file})" if env_file.exists() else ""
    click.echo(f"Demo organisation {org['name']!r} ({org['id']}); log in as {DEMO_ADMIN} with the password printed on "
               f"the first start{kept}; `coremem bootstrap --org {org['name']} --admin {DEMO_ADMIN}` sets a new "
               "one and makes a new key.")
    return DEMO_ADMIN


@main.command()
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8000, show_default=True, type=PORT)
@click.option("--dashboard-port", default=DASHBOARD_PORT, show_default=True, type=PORT)
@click.option("--no-dashboard", is_flag=True, help="Start the API only.")
def run(host: str, port: int, dashboard_port: int, no_dashboard: bool) -> None:
    """The whole product for a newcomer: database, migrations, demo data on an empty database, the API and the
    dashboard."""
    from backend.db import migrate as migrations

    url = database_url()
    migrations.upgrade(url)
    login = _announce_demo(url)
    api = _local_url(host, port)
    click.echo(f"API:        {api}")
    click.echo(f"Swagger UI: {api}/schema/swagger")
    click.echo(f"OpenAPI:    {api}/schema/openapi.json")
    streamlit: subprocess.Popen[bytes] | None = None
    if not no_dashboard:
        streamlit = subprocess.Popen(_dashboard_command(host, dashboard_port), env=_dashboard_env(api))
        hint = f"  (log in as {login})" if login else ""
        click.echo(f"Dashboard:  {_local_url(host, dashboard_port)}{hint}")
        # uvicorn re-raises SIGTERM after its graceful shutdown; turning it into SystemExit lets `finally` stop
        # Streamlit instead of leaving it orphaned.
        signal.signal(signal.SIGTERM, lambda signum, _frame: sys.exit(128 + signum))
    sys.stdout.flush()
    from backend.jobs.worker import BackgroundWorker

    jobs = BackgroundWorker(url, get_settings()).start()  # background jobs; `coremem worker` adds more
    click.echo("Worker:    one, beside the API (compaction and other background jobs)")
    signal.signal(signal.SIGTERM, lambda signum, _frame: sys.exit(128 + signum))  # so `finally` stops it
    try:
        _serve(host, port, url)
    finally:
        jobs.stop()
        if streamlit is not None:
            streamlit.terminate()
            try:
                streamlit.wait(timeout=10)
            except subprocess.TimeoutExpired:
                streamlit.kill()
