"""Dashboard tests run against the real API (`live_api`): AppTest sessions, operators, audit events."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from backend.config import Settings
from shared.client import CoreClient
from tests.helpers import Org, in_transaction

APP = Path(__file__).resolve().parents[2] / "dashboard" / "streamlit_app.py"
TIMEOUT = 30


_in_session = in_transaction


def make_operator(database_url: str, email: str) -> tuple[str, str]:
    """An operator (administrator of every organisation), as the service creates one; returns (id, password)."""
    from backend.domains.orgs import service

    return _in_session(database_url, lambda db: service.create_operator(db, email))  # type: ignore[no-any-return]


def record_event(database_url: str, settings: Settings, org_id: str, action: str, *, subject_id: str | None = None,
                 object_type: str | None = None, object_id: str | None = None, outcome: str = "allowed") -> str:
    """Append an event the way the platform does (the memory areas will write such events themselves)."""
    from backend.access.actor import Actor
    from backend.domains.audit import service

    return _in_session(database_url, lambda db: service.record(  # type: ignore[no-any-return]
        db, org_id=org_id, actor=Actor("system", "test"), action=action, secret=settings.secret,
        subject_id=subject_id, object_type=object_type, object_id=object_id, outcome=outcome))


@pytest.fixture
def operator(database_url: str, org: Org) -> dict[str, Any]:
    admin_id, password = make_operator(database_url, "ops@coremem.test")
    return {"id": admin_id, "email": "ops@coremem.test", "password": password}


@pytest.fixture
def admin_client(live_api: str, org: Org) -> Iterator[CoreClient]:
    with CoreClient(live_api) as client:
        client.login(org.admin_email, org.admin_password)
        yield client


@pytest.fixture
def app(live_api: str) -> AppTest:
    """A dashboard session aimed at the live API, not yet run."""
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.session_state["api_url"] = live_api
    return at


def log_in(at: AppTest, email: str, password: str) -> AppTest:
    at.run()
    at.text_input(key="login_email").input(email)
    at.text_input(key="login_password").input(password)
    at.button(key="login_submit").click().run()
    return at


def no_exception(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]


def _free_port_closed() -> int:
    """A loopback port nobody listens on (bound, then released)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


RUNNABLE = ("SELECT count(*) FROM procrastinate_jobs WHERE status = 'todo' "
            "AND (scheduled_at IS NULL OR scheduled_at <= now())")


@pytest.fixture
def drain(database_url: str, settings: Any, db: Any) -> Any:
    """Real workers until no job that may run now is left (a run's plan queues its threads' read jobs)."""
    from backend.jobs.worker import run_worker

    def run() -> None:
        for _ in range(20):
            asyncio.run(run_worker(database_url, settings, concurrency=1, wait=False, install_signal_handlers=False,
                                   listen_notify=False))
            if db.execute(RUNNABLE).fetchone()[0] == 0:
                return
        raise AssertionError("jobs kept coming")

    return run
