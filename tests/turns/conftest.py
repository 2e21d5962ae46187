"""Helpers for turn tests: a person's headers and a turn call that checks the answer's shape."""

from __future__ import annotations

from typing import Any

from tests.helpers import Org, bearer


def anna(org: Org, secret: str | None = None) -> dict[str, str]:
    return bearer(secret or org.key, subject="anna")


def turn(client: Any, headers: dict[str, str], status: int = 201, **body: Any) -> dict[str, Any]:
    body.setdefault("model", "scripted")
    if body["model"] is None:
        del body["model"]
    response = client.post("/responses", json=body, headers=headers)
    assert response.status_code == status, response.text
    answer = dict(response.json())
    if status == 201 and answer.get("thread_id"):
        assert response.headers["x-core-thread-id"] == answer["thread_id"]
    return answer


def items(client: Any, headers: dict[str, str], thread_id: str) -> list[dict[str, Any]]:
    response = client.get(f"/threads/{thread_id}/items", headers=headers)
    assert response.status_code == 200, response.text
    return list(response.json()["items"])
