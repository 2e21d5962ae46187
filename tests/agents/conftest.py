"""Helpers for the agent tests (TRN-5)."""

from __future__ import annotations

from typing import Any

import pytest

BASIC = {"name": "helpdesk", "model": "chat-small", "instructions": "Answer briefly."}


def make_agent(client: Any, headers: dict[str, str], **fields: Any) -> dict[str, Any]:
    response = client.post("/agents", headers=headers, json={**BASIC, **fields})
    assert response.status_code == 201, response.text
    return dict(response.json())


def agent_thread_state(client: Any, org: Any, name: str, schema: dict[str, Any]) -> tuple[dict[str, str], str]:
    """An agent (on the scripted model) with `schema` as its working-state schema, and a thread it answered for
    Anna: her headers and the thread's state URL."""
    from tests.helpers import bearer

    created = client.post("/agents", headers=org.admin, json={"name": name, "model": "scripted",
                                                              "instructions": "Plan.", "working_state_schema": schema})
    assert created.status_code == 201, created.text
    anna = bearer(org.key, subject="anna")
    answered = client.post("/responses", headers=anna, json={"agent_id": created.json()["id"], "input": "Plan."})
    assert answered.status_code == 201, answered.text
    return anna, f"/threads/{answered.json()['thread_id']}/state"


def make_index(client: Any, org: Any, name: str = "support") -> str:
    response = client.post("/indexes", headers=org.full, json={"name": name})
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def offer_models(org: Any) -> Any:
    """EXT-1: an agent names a model the organisation is offered; these tests use two recorded ones."""
    for model_id in ("chat-small", "chat-large"):
        response = org.client.post("/admin/models", headers=org.admin,
                                   json={"id": model_id, "provider": "replay", "model": "demo"})
        assert response.status_code == 201, response.text
    return org


@pytest.fixture
def org(org: Any) -> Any:
    return offer_models(org)


@pytest.fixture
def other_org(other_org: Any) -> Any:
    return offer_models(other_org)
