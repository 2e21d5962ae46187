"""Helpers every test module reuses: organisations, keys with chosen capabilities and policy, subjects."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from backend.config import Settings
from backend.db.engine import make_engine, make_sessionmaker
from backend.errors import THREADS_MISSING_MESSAGE

T = TypeVar("T")
ALL_CAPS = ["knowledge", "memory", "threads", "tooling", "compaction", "management", "trust_envelope"]


@dataclass
class Org:
    org_id: str
    admin_email: str
    admin_password: str
    admin_token: str
    key_id: str
    key: str
    client: Any

    @property
    def admin(self) -> dict[str, str]:
        return bearer(self.admin_token)

    @property
    def full(self) -> dict[str, str]:
        return bearer(self.key)

    def make_key(self, capabilities: list[str] | None = None, policy: dict[str, Any] | None = None,
                 **extra: Any) -> dict[str, Any]:
        """Create a key as the administrator; returns the created document including `secret`."""
        body: dict[str, Any] = {"name": extra.pop("name", "test key"),
                                "capabilities": ALL_CAPS if capabilities is None else capabilities, **extra}
        if policy is not None:
            body["policy"] = policy
        response = self.client.post(f"/tenants/{self.org_id}/keys", json=body, headers=self.admin)
        assert response.status_code == 201, response.text
        return dict(response.json())

    def subject_token(self, key_secret: str, subject_id: str, attributes: dict[str, list[str]] | None = None,
                      ttl_seconds: int = 600) -> str:
        response = self.client.post("/subject-tokens", headers=bearer(key_secret),
                                    json={"subject": {"id": subject_id, "attributes": attributes or {}},
                                          "ttl_seconds": ttl_seconds})
        assert response.status_code == 201, response.text
        return str(response.json()["token"])


def bearer(credential: str, subject: str | None = None, attributes: dict[str, list[str]] | None = None
           ) -> dict[str, str]:
    headers = {"Authorization": f"Bearer {credential}"}
    if subject is not None:
        headers.update(as_subject(subject, attributes))
    return headers


def as_subject(subject_id: str, attributes: dict[str, list[str]] | None = None) -> dict[str, str]:
    value: dict[str, Any] = {"id": subject_id}
    if attributes:
        value["attributes"] = attributes
    return {"X-Core-Subject": json.dumps(value)}


def operator_headers(client: Any, database_url: str) -> dict[str, str]:
    """A new operator (PLT-2: administers every organisation) logged in; her bearer header."""
    from backend.domains.orgs.service import create_operator

    _, password = in_transaction(database_url, lambda db: create_operator(db, "ops@example.test"))
    login = client.post("/admin/login", json={"email": "ops@example.test", "password": password})
    assert login.status_code == 200, login.text
    return bearer(login.json()["token"])


def in_transaction(database_url: str, work: Callable[[Any], Awaitable[T]]) -> T:
    """Run service code (`work(session)`) in one committed transaction on a short-lived engine."""

    async def go() -> T:
        engine = make_engine(database_url, pool_size=1, app_role=False)
        try:
            async with make_sessionmaker(engine)() as session, session.begin():
                return await work(session)
        finally:
            await engine.dispose()

    return asyncio.run(go())


def as_request(database_url: str, settings: Settings, credential: str, subject: str | None,
               work: Callable[[Any], Awaitable[T]]) -> T:
    """Run `work(ctx)` in one committed transaction with the request context the API would build for this
    credential and person (for work a turn or a job does outside an HTTP request)."""
    from backend import contexts

    async def go(session: Any) -> T:
        ctx = await contexts.for_credential(session, settings, authorization=f"Bearer {credential}",
                                            subject_header=json.dumps({"id": subject}) if subject else None)
        return await work(ctx)

    return in_transaction(database_url, go)


def bootstrap_org(client: Any, settings: Settings, database_url: str, name: str, admin_email: str) -> Org:
    """What `coremem bootstrap` does, in-process, against the test database."""
    return Org(client=client, **bootstrapped(database_url, settings.secret, name, admin_email))


def bootstrapped(database_url: str, secret: str, name: str, admin_email: str, ttl_seconds: int = 3600
                 ) -> dict[str, Any]:
    """The organisation `coremem bootstrap` makes (its credentials as printed), made in the database at the URL."""
    from backend.domains.orgs import service

    return in_transaction(database_url, lambda db: service.bootstrap(
        db, org_name=name, admin_email=admin_email, secret=secret, key_retention_days=400,
        ttl_seconds=ttl_seconds))


def eventually(check: Callable[[], bool], seconds: float = 10.0) -> bool:
    """Whether `check()` holds within `seconds` (for what the API writes after it answered), asked every 20 ms."""
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def loop_wakes_during(work: Callable[[], Awaitable[T]]) -> tuple[T, int]:
    """Run `work` on a fresh event loop beside a task that wakes every millisecond: its answer, and how often the
    loop woke meanwhile. Work that holds the loop leaves it 0 or 1 wakes; work done off the loop lets it turn."""
    async def main() -> tuple[T, int]:
        wakes = 0
        running = True

        async def tick() -> None:
            nonlocal wakes
            while running:
                await asyncio.sleep(0.001)
                wakes += 1

        ticker = asyncio.create_task(tick())
        await asyncio.sleep(0.005)  # the ticker is running
        start = wakes
        answer = await work()
        running = False
        await ticker
        return answer, wakes - start

    return asyncio.run(main())


def assert_error(response: Any, status: int, code: str | None = None, param: str | None = None) -> dict[str, Any]:
    """The PLT-14 error body: status, code, message, param."""
    assert response.status_code == status, response.text
    body = dict(response.json())
    assert body["status"] == status
    assert isinstance(body["message"], str) and body["message"]
    assert "param" in body
    if code is not None:
        assert body["code"] == code, body
    if param is not None:
        assert body["param"] == param, body
    return body


def assert_threads_missing(response: Any) -> None:
    """PLT-6: a key without `threads` gets 404 with this exact message on every stored-conversation route."""
    body = assert_error(response, 404)
    assert body["message"] == THREADS_MISSING_MESSAGE


class DroppedConnections(logging.Handler):
    """Notes the connections SQLAlchemy's pool found unreturned when the garbage collector took their sessions: a
    request or task that left its transaction open. Each held a pooled connection until then, and enough of them
    make later requests wait for the pool (refused query arguments did, backend/http.py). `during` is the test
    running when each was found (the garbage collector may find it a test or two later)."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.during: list[str] = []
        self.current = ""

    @property
    def count(self) -> int:
        return len(self.during)

    def emit(self, record: logging.LogRecord) -> None:
        if "non-checked-in connection" in record.getMessage():
            self.during.append(self.current)

    def __enter__(self) -> DroppedConnections:
        logging.getLogger("sqlalchemy.pool").addHandler(self)
        return self

    def __exit__(self, *_: object) -> None:
        logging.getLogger("sqlalchemy.pool").removeHandler(self)


def wait_for_lock_waiters(db: Any, count: int, what: str, seconds: float = 10) -> None:
    """Wait until `count` sessions of the test database wait for a lock; fail naming `what` if they never do."""
    deadline = time.monotonic() + seconds
    while True:
        row = db.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND "
                         "wait_event_type = 'Lock'").fetchone()
        if int(row[0]) >= count:
            return
        assert time.monotonic() < deadline, f"never saw {what}"
        time.sleep(0.05)
