"""Helpers of the extraction tests: stores, switches, threads of a person, and the scripted model's answers."""

from __future__ import annotations

import json
from typing import Any

from tests.helpers import bearer
from tests.threads.util import msg, new_thread


def new_store(org: Any, name: str = "people") -> str:
    response = org.client.post("/indexes", json={"name": name}, headers=org.full)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def set_switch(org: Any, index_id: str, headers: dict[str, str] | None = None, **body: Any) -> Any:
    payload = {"enabled": True, "model": "scripted", "quiet_minutes": 0, **body}
    return org.client.put(f"/memory/stores/{index_id}/extraction", json=payload, headers=headers or org.full)


def switch_on(org: Any, index_id: str, **body: Any) -> dict[str, Any]:
    response = set_switch(org, index_id, **body)
    assert response.status_code == 200, response.text
    return dict(response.json())


def get_switch(org: Any, index_id: str) -> dict[str, Any]:
    response = org.client.get(f"/memory/stores/{index_id}/extraction", headers=org.full)
    assert response.status_code == 200, response.text
    return dict(response.json())


def run_now(org: Any, index_id: str) -> str:
    response = org.client.post(f"/memory/stores/{index_id}/extraction/run", headers=org.full)
    assert response.status_code == 202, response.text
    return str(response.json()["run_id"])


def conversation(org: Any, person: str | None, *lines: tuple[str, str]) -> str:
    """A thread of `person` (None: naming nobody) with the given (role, text) messages; its id."""
    headers = bearer(org.key, person) if person else org.full
    thread = new_thread(org.client, headers, items=[msg(role, text) for role, text in lines])
    return str(thread["id"])


def first_read_fails(org: Any, scripted: Any, run_jobs: Any) -> str:
    """Anna's thread in a new store with extraction on, whose first read the model answers with a 500: the store."""
    index_id = new_store(org)
    conversation(org, "anna", ("user", "I like tea."))
    switch_on(org, index_id)
    scripted.fail(500)
    run_now(org, index_id)
    run_jobs()
    return index_id


def answer(*memories: dict[str, Any], **extra: Any) -> str:
    return json.dumps({"memories": list(memories), **extra})


def new(type_: str, text: str, **extra: Any) -> dict[str, Any]:
    return {"type": type_, "text": text, "action": "new", **extra}


def records(org: Any, index_id: str, person: str | None = None, **params: Any) -> list[dict[str, Any]]:
    query = {"index_id": index_id, **params}
    if person is None:
        query["shared"] = "true"
    headers = bearer(org.key, person) if person else org.full
    response = org.client.get("/memory", params=query, headers=headers)
    assert response.status_code == 200, response.text
    return list(response.json()["data"])


def windows(db: Any, index_id: str) -> list[tuple[Any, ...]]:
    return db.execute("SELECT thread_id, first_position, last_position, state, error_code, written, confirmed, "
                      "replaced, dropped FROM extraction_windows WHERE index_id = %s ORDER BY thread_id, "
                      "first_position", (index_id,)).fetchall()
