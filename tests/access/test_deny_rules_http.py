"""PLT-8: a deny rule that names an owner hides that owner's rows and nothing else, on every read route.

`owner = 'bob'` is NULL in SQL for a shared row (owner NULL), and NOT(NULL) hides the row: with such a deny
rule the shared records vanished from list, get, search, injection and thread search for Anna and for a
request naming nobody, while the Python decision still permitted them.
"""

from __future__ import annotations

from typing import Any

from backend.access.policy import writer_policy
from tests.helpers import Org, bearer

DENY_BOB = {"id": "deny-bob", "effect": "deny", "kind": "memory_record", "match": {"labels": {"subject": "bob"}}}
DENY_BOB_THREADS = {"id": "deny-bob-threads", "effect": "deny", "kind": "thread",
                    "match": {"labels": {"subject": "bob"}}}


def _ids(response: Any) -> set[str]:
    assert response.status_code == 200, response.text
    return {row["id"] for row in response.json()["data"]}


def test_plt_8_deny_rule_naming_an_owner_keeps_shared_records_everywhere(client: Any, org: Org) -> None:
    index = client.post("/indexes", json={"name": "notes"}, headers=org.admin).json()["id"]
    policy = writer_policy()
    policy["rules"] += [DENY_BOB, DENY_BOB_THREADS]
    key = org.make_key(policy=policy, memory={"injection": {"index_id": index}})["secret"]
    anna, bob, nobody = bearer(key, "anna"), bearer(key, "bob"), bearer(key)

    def write(headers: dict[str, str], text: str) -> str:
        response = client.post("/memory", json={"index_id": index, "type": "fact", "text": text}, headers=headers)
        assert response.status_code == 201, response.text
        return str(response.json()["id"])

    # Bob writes with the bootstrap key, which has no deny rule.
    mine, shared = write(anna, "anna likes quince"), write(nobody, "office likes quince")
    bobs = write(bearer(org.key, "bob"), "bob likes quince")
    for who, headers, expected in (("anna", anna, {mine, shared}), ("nobody", nobody, {mine, shared})):
        assert _ids(client.get("/memory", params={"index_id": index}, headers=headers)) == expected, who
        assert _ids(client.get("/memory/search", params={"q": "quince", "index_id": index},
                               headers=headers)) == expected, who
        assert client.get(f"/memory/{shared}", headers=headers).status_code == 200, who
        assert client.get(f"/memory/{bobs}", headers=headers).status_code == 404, who
    # Bob is denied his own records by the rule; the shared one stays his to see.
    assert _ids(client.get("/memory", params={"index_id": index}, headers=bob)) == {shared}

    preview = client.post(f"/memory/stores/{index}/injection/preview",
                          json={"subject": {"id": "anna"}, "key_id": _key_id(client, org, key)}, headers=org.admin)
    assert preview.status_code == 200, preview.text
    assert set(preview.json()["trace"]["injected_ids"]) == {mine, shared}

    threads: dict[str, str] = {}
    for name, headers in (("anna", anna), ("shared", nobody), ("bob", bearer(org.key, "bob"))):
        created = client.post("/threads", json={"items": [{"type": "message", "role": "user",
                                                           "content": f"{name} asks about quince jam"}]},
                              headers=headers)
        assert created.status_code == 201, created.text
        threads[name] = created.json()["id"]
    for who, headers in (("anna", anna), ("nobody", nobody)):
        hits = client.get("/thread-items", params={"q": "quince"}, headers=headers)
        assert hits.status_code == 200, hits.text
        assert {h["thread_id"] for h in hits.json()["data"]} == {threads["anna"], threads["shared"]}, who


def _key_id(client: Any, org: Org, secret: str) -> str:
    response = client.get("/key", headers=bearer(secret))
    assert response.status_code == 200, response.text
    return str(response.json()["id"])
