"""Helpers of the thread tests: items, threads, and keys whose policy opens group threads."""

from __future__ import annotations

from typing import Any

from backend.access.policy import default_policy

GROUP_RULE = {"id": "thread-participants", "effect": "permit", "kind": "thread", "actions": ["see", "write"],
              "when": [{"atom": "label_is_subject", "label": "participants"}]}


def msg(role: str, text: str) -> dict[str, Any]:
    return {"type": "message", "role": role, "content": text}


def new_thread(client: Any, headers: dict[str, str], **body: Any) -> dict[str, Any]:
    response = client.post("/threads", json=body, headers=headers)
    assert response.status_code == 201, response.text
    return dict(response.json())


def append(client: Any, headers: dict[str, str], thread_id: str, *items: dict[str, Any]) -> list[dict[str, Any]]:
    response = client.post(f"/threads/{thread_id}/items", json={"items": list(items)}, headers=headers)
    assert response.status_code == 201, response.text
    return list(response.json()["items"])


def group_policy(**settings: Any) -> dict[str, Any]:
    doc = default_policy()
    doc["rules"].append(dict(GROUP_RULE))
    if settings:
        doc["settings"] = settings
    return doc
