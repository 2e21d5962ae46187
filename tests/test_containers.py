"""PLT-19: `docker-compose.yml` runs PostgreSQL with pgvector, the API, the worker and the dashboard as separate
services from one image that the Dockerfile builds, with health checks; an optional profile adds Ollama as an
`openai_compatible` model. The schema's owner only migrates; the API and the worker log in as a role that
row-level security binds (docs/operations.md). The file is read as compose reads it; `docker compose config`
checks it too when the client is installed."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest
import yaml
from litestar.testing import TestClient

from backend.app import create_app
from backend.cli import main

ROOT = Path(__file__).resolve().parents[1]
APP_SERVICES = ("api", "worker", "dashboard")
# Subcommands the compose file starts that other work adds (none now).
ANNOUNCED: set[str] = set()


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return dict(yaml.safe_load((ROOT / "docker-compose.yml").read_text()))


def _command(service: dict[str, Any]) -> str:
    command = service.get("command", [])
    return command if isinstance(command, str) else " ".join(command)


def _environment(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment", {})
    return dict(env) if isinstance(env, dict) else dict(e.split("=", 1) for e in env)


def test_plt_19_compose_runs_database_api_worker_and_dashboard(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert set(services) == {"db", "migrate", "api", "worker", "dashboard", "ollama", "ollama-pull",
                             "ollama-model"}
    assert services["db"]["image"].startswith("pgvector/pgvector:pg1")
    assert "pg_isready" in " ".join(services["db"]["healthcheck"]["test"])
    assert "ports" not in services["db"], "the database is reached by the services, not published"
    for name in APP_SERVICES:
        service = services[name]
        assert service["image"] == "coremem:latest" and service["build"] == ".", name
        assert "pip" not in _command(service), f"{name} installs nothing at start: the image has the package"
        assert "volumes" not in service, f"{name} runs the built image, not a bind mount of the working tree"
        assert service["healthcheck"]["test"] and service["healthcheck"]["retries"] >= 3, name
    migrate = services["migrate"]
    assert migrate["image"] == "coremem:latest" and "volumes" not in migrate
    assert _command(migrate) == "coremem migrate" and migrate["restart"] == "no"
    api, worker, dashboard = (services[n] for n in APP_SERVICES)
    assert _command(api) == "coremem serve --host 0.0.0.0 --port 8000"
    assert "/ready" in " ".join(api["healthcheck"]["test"])
    assert _command(worker) == "coremem worker"
    assert "--api-url http://api:8000" in _command(dashboard)
    assert "/_stcore/health" in " ".join(dashboard["healthcheck"]["test"])


def test_plt_19_compose_ports_dependencies_and_environment(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert services["api"]["ports"] == ["${API_PORT:-8000}:8000"]
    assert services["dashboard"]["ports"] == ["${DASHBOARD_PORT:-8501}:8501"]
    assert services["migrate"]["depends_on"] == {"db": {"condition": "service_healthy"}}
    assert services["api"]["depends_on"] == {"migrate": {"condition": "service_completed_successfully"}}
    assert services["worker"]["depends_on"] == {"api": {"condition": "service_healthy"}}
    assert services["dashboard"]["depends_on"] == {"api": {"condition": "service_healthy"}}
    for name in ("api", "worker", "ollama-model"):
        env = _environment(services[name])
        assert re.fullmatch(r"postgresql://coremem_api:\$\{API_DB_PASSWORD:-coremem_api\}@db:5432/coremem",
                            env["CORE_DATABASE_URL"]), name
        assert env["CORE_SECRET"].startswith("${CORE_SECRET:?"), "no default secret: it must be chosen"
    assert re.fullmatch(r"postgresql://coremem:\$\{POSTGRES_PASSWORD:-coremem\}@db:5432/coremem",
                        _environment(services["migrate"])["CORE_DATABASE_URL"]), "the owner migrates"
    dashboard = _environment(services["dashboard"])
    assert dashboard == {"CORE_API_URL": "http://api:8000"}, "the dashboard needs neither database nor secret"
    assert _environment(services["db"])["POSTGRES_PASSWORD"] == "${POSTGRES_PASSWORD:-coremem}"


def _psql() -> str | None:
    """psql 15 or later (the init script reads its password with `\\getenv`): the embedded server's, else any."""
    import pgserver

    bundled = Path(pgserver.__file__).parent / "pginstall" / "bin" / "psql"
    return str(bundled) if bundled.is_file() else shutil.which("psql")


def test_plt_19_compose_serves_with_a_login_row_level_security_binds(
        compose: dict[str, Any], database_url: str, settings: Any, db: Any, tmp_path: Path) -> None:
    from sqlalchemy.engine import make_url

    from backend.jobs.app import libpq_url
    from backend.jobs.worker import run_worker
    from tests.helpers import bearer

    services = compose["services"]
    owner = _environment(services["db"])["POSTGRES_USER"]  # the image makes it a superuser
    assert make_url(_environment(services["migrate"])["CORE_DATABASE_URL"]).username == owner
    logins = {make_url(_environment(services[n])["CORE_DATABASE_URL"]).username for n in ("api", "worker")}
    assert len(logins) == 1 and owner not in logins, "the API and the worker never log in as the owner"
    login = logins.pop()
    init = [v.split(":")[0] for v in services["db"].get("volumes", []) if "/docker-entrypoint-initdb.d/" in v]
    assert len(init) == 1, "the database's first start makes the serving login"
    psql = _psql()
    if psql is None:
        pytest.skip("no psql to run the init script with")
    existed = db.execute("SELECT count(*) FROM pg_roles WHERE rolname = %s", (login,)).fetchone()[0]
    env = {**os.environ, "API_DB_PASSWORD": "compose-test"}
    for _ in range(2):  # the first start, then by hand on an older volume
        done = subprocess.run([psql, "-X", "-q", "-f", str(ROOT / init[0]), libpq_url(database_url)], env=env,
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
    try:
        role = db.execute("SELECT rolsuper, rolbypassrls, rolcanlogin, pg_has_role(rolname, 'coremem_app', "
                          "'MEMBER') FROM pg_roles WHERE rolname = %s", (login,)).fetchone()
        assert role == (False, False, True, True), role
        serving = make_url(database_url).set(username=login, password="compose-test")
        url = serving.render_as_string(hide_password=False)
        plain = serving.set(drivername="postgresql").render_as_string(hide_password=False)
        # `docker compose run --rm api coremem bootstrap …`
        done = subprocess.run([sys.executable, "-m", "backend.cli", "bootstrap", "--org", "Initech", "--admin",
                               "boss@initech.test"], capture_output=True, text=True, timeout=120,
                              env={**os.environ, "CORE_DATABASE_URL": plain, "CORE_SECRET": settings.secret,
                                   "CORE_DATA_DIR": str(tmp_path / "cli")})
        assert done.returncode == 0, done.stderr
        key = bearer(json.loads(done.stdout)["key"])
        with TestClient(create_app(settings, url)) as client:
            index = client.post("/indexes", headers=key, json={"name": "n", "embedding": {
                "provider": "hashing", "model": "words", "dimensions": 64}})
            assert index.status_code == 201, index.text
            record = client.post("/memory", headers=key, json={"index_id": index.json()["id"], "type": "fact",
                                                               "text": "Tea at four."}).json()
            changed = client.patch(f"/indexes/{index.json()['id']}", headers=key, json={"embedding": {
                "provider": "hashing", "model": "words", "dimensions": 32}})  # queues the re-embedding job
            assert changed.status_code == 200, changed.text
        asyncio.run(run_worker(url, settings, concurrency=1, wait=False, install_signal_handlers=False,
                               listen_notify=False))
        assert db.execute("SELECT vector_dims(embedding) FROM memory_records WHERE id = %s",
                          (record["id"],)).fetchone() == (32,), "the worker ran the job"
        # Even outside `coremem_app`, the login sees no organisation's rows and cannot lift the policies.
        with psycopg.connect(plain, autocommit=True) as conn:
            conn.execute("RESET ROLE")
            assert conn.execute("SELECT count(*) FROM memory_records").fetchone() == (0,)
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute("ALTER TABLE memory_records NO FORCE ROW LEVEL SECURITY")
        assert db.execute("SELECT count(*) FROM memory_records").fetchone() == (1,)
    finally:
        if not existed:
            db.execute(f'DROP ROLE IF EXISTS "{login}"')


def test_plt_19_ollama_profile_is_offered_as_an_openai_compatible_model(compose: dict[str, Any]) -> None:
    services = compose["services"]
    optional = {n for n, s in services.items() if s.get("profiles")}
    assert optional == {"ollama", "ollama-pull", "ollama-model"}
    assert all(services[n]["profiles"] == ["ollama"] for n in optional)
    assert services["ollama"]["image"].startswith("ollama/ollama")
    model = _command(services["ollama-model"])
    assert "coremem models add ollama --provider openai_compatible --base-url http://ollama:11434/v1" in model
    assert services["ollama-model"]["depends_on"]["ollama-pull"] == {"condition": "service_completed_successfully"}


def test_plt_19_compose_starts_only_commands_the_cli_has(compose: dict[str, Any]) -> None:
    used = {m.group(1) for s in compose["services"].values() for m in re.finditer(r"coremem (\w+)", _command(s))}
    assert used - set(main.commands) <= ANNOUNCED, used - set(main.commands)


def test_plt_19_dockerfile_builds_in_two_stages_and_runs_unprivileged() -> None:
    text = (ROOT / "Dockerfile").read_text()
    stages = re.findall(r"^FROM (\S+)(?: AS (\w+))?", text, re.MULTILINE)
    assert len(stages) == 2 and stages[0][1] == "build", stages
    build, run = text.split("\nFROM ", 2)[1:]
    assert re.search(r"pip install '?\.(\[local\])?'?(\s|$)", build), \
        "the package (with the local embedding model) is installed at build time, not editable"
    assert "COPY --from=build /opt/coremem /opt/coremem" in run and "pip install" not in run
    user = re.findall(r"^USER (\S+)", run, re.MULTILINE)
    assert user == ["coremem"], user
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {".venv", ".coremem", ".git"} <= set(ignored)


def _compose_client() -> list[str] | None:
    if shutil.which("docker"):
        probe = subprocess.run(["docker", "compose", "version"], capture_output=True, text=True)
        if probe.returncode == 0:
            return ["docker", "compose"]
    return ["docker-compose"] if shutil.which("docker-compose") else None


def test_plt_19_docker_compose_config_accepts_the_file(tmp_path: Path) -> None:
    client = _compose_client()
    if client is None:
        pytest.skip("no docker compose client on this machine; the file was checked as YAML above")
    empty = tmp_path / "empty.env"  # a developer's own .env must not decide the outcome
    empty.write_text("")
    compose = [*client, "--env-file", str(empty), "-f", str(ROOT / "docker-compose.yml")]
    without_secret = {k: v for k, v in os.environ.items() if k != "CORE_SECRET"}
    done = subprocess.run([*compose, "--profile", "ollama", "config"], capture_output=True, text=True,
                          env={**without_secret, "CORE_SECRET": "x" * 48}, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    missing = subprocess.run([*compose, "config"], capture_output=True, text=True, env=without_secret, cwd=ROOT)
    assert missing.returncode != 0 and "CORE_SECRET" in missing.stderr
