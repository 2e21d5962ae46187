"""Helpers for the agent tests (TRN-5)."""

from __future__ import annotations

from typing import Any

BASIC = {"name": "helpdesk", "model": "chat-small", "instructions": "Answer briefly."}


def make_agent(client: Any, headers: dict[str, str], **fields: Any) -> dict[str, Any]:
    response = client.post("/agents", headers=headers, json={**BASIC, **fields})
    assert response.status_code == 201, response.text
    return dict(response.json())


def make_index(client: Any, org: Any, name: str = "support") -> str:
    response = client.post("/indexes", headers=org.full, json={"name": name})
    assert response.status_code == 201, response.text
    return str(response.json()["id"])
