"""Helpers of the maintenance tests: the organisation's improvement settings and helper model, store settings,
writing records as a person, and running the maintenance pass through the job queue."""

from __future__ import annotations

from typing import Any

from backend.db import job_queue
from tests.helpers import bearer, in_transaction


def org_settings(org: Any, **changes: Any) -> None:
    response = org.client.patch(f"/tenants/{org.org_id}", headers=org.admin, json=changes)
    assert response.status_code == 200, response.text


def improvements_on(org: Any, helper: bool = True) -> None:
    changes: dict[str, Any] = {"capabilities": ["improvements"], "improvements": {"enabled": True}}
    if helper:
        changes["helper_model"] = {"provider": "openai_compatible", "model": "scripted"}
    org_settings(org, **changes)


def store_settings(org: Any, index_id: str, **sections: Any) -> dict[str, Any]:
    response = org.client.patch(f"/memory/stores/{index_id}", headers=org.admin, json=sections)
    assert response.status_code == 200, response.text
    return dict(response.json())


def write(org: Any, index_id: str, person: str | None, text: str, type_: str = "fact") -> dict[str, Any]:
    headers = bearer(org.key, person) if person else org.full
    response = org.client.post("/memory", headers=headers, json={"index_id": index_id, "type": type_, "text": text})
    assert response.status_code == 201, response.text
    return dict(response.json())


def maintain(database_url: str, run_jobs: Any, n: int = 0) -> None:
    """Queue the maintenance job (as its periodic schedule does) and run the worker until it is done. Every store
    is made due first: a worker's own periodic schedule may have run a pass already."""
    from sqlalchemy import text

    from backend.jobs.maintenance import TASK

    async def due(session: Any) -> None:
        await session.execute(text("UPDATE store_settings SET last_maintenance_run_at = NULL"))

    in_transaction(database_url, due)
    in_transaction(database_url, lambda s: job_queue.defer(s, task=TASK, queue="maintenance",
                                                           args={"timestamp": n}))
    run_jobs()


def proposals(org: Any, headers: dict[str, str] | None = None, **params: Any) -> list[dict[str, Any]]:
    response = org.client.get("/memory/proposals", headers=headers or org.admin, params=params)
    assert response.status_code == 200, response.text
    return list(response.json()["data"])
