"""Fixtures of the memory tests: an index, keys for people and for nobody, and small helpers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from backend.access.policy import writer_policy
from tests.helpers import Org, bearer


@dataclass
class Mem:
    """An organisation with one plain index and a writer key (memory tools offered)."""

    org: Org
    client: Any
    index_id: str
    key: str

    def anna(self, **attrs: list[str]) -> dict[str, str]:
        return bearer(self.key, "anna", attrs or None)

    def bob(self) -> dict[str, str]:
        return bearer(self.key, "bob")

    @property
    def nobody(self) -> dict[str, str]:
        return bearer(self.key)

    @property
    def admin(self) -> dict[str, str]:
        return self.org.admin

    def write(self, headers: dict[str, str], text: str, **fields: Any) -> dict[str, Any]:
        body = {"index_id": self.index_id, "type": "fact", "text": text, **fields}
        response = self.client.post("/memory", json=body, headers=headers)
        assert response.status_code in (200, 201), response.text
        return dict(response.json())

    def ids(self, response: Any) -> list[str]:
        assert response.status_code == 200, response.text
        return [r["id"] for r in response.json()["data"]]


def make_index(org: Org, name: str = "notes", embedding: dict[str, Any] | None = None) -> str:
    response = org.client.post("/indexes", json={"name": name, "embedding": embedding}, headers=org.admin)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


@pytest.fixture
def mem(org: Org, client: Any) -> Mem:
    index_id = make_index(org)
    key = org.make_key(policy=writer_policy(), memory={"retrieval_tool": True, "write_tool": True})["secret"]
    return Mem(org, client, index_id, key)
