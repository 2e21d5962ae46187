"""Issue 17 item 7, PLT-14/house rule 4: mass assignment.

Every write route that takes a JSON body is sent a valid body plus, one at a time, each field the server owns
(`id`, `org_id`, `subject`, `verified`, `source`, `recall_count`, `confirmations`, `created_at`, …), at the top
level and inside the objects a body nests (batch records, thread items, turn input items). Pass: an unknown field
is 422 naming it and changes no row of any table; a field the route's contract takes is its own (not counted);
turn input items, whose copied-back `id`/`status` are ignored by design (TRN-1), never persist what was sent.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest

from tests.helpers import ALL_CAPS, Org, bearer, bootstrap_org

SERVER_OWNED: dict[str, Any] = {
    "id": "mem_01forgedforgedforgedforged", "org_id": "org_forged", "subject": "mallory", "verified": True,
    "source": "admin", "recall_count": 999, "confirmations": 999, "created_at": "2001-01-01T00:00:00Z",
    "updated_at": "2001-01-01T00:00:00Z", "version": 99, "status": "replaced", "contested": True,
    "contested_with": "mem_x", "effective_confidence": 1.0, "key_id": "key_forged", "position": 1,
    "response_id": "resp_forged", "deleted_at": "2001-01-01T00:00:00Z", "last_confirmed_at": "2001-01-01T00:00:00Z",
    "secret": "ck_forged", "created_by": "adm_forged", "replaced_by": "mem_x", "actor": {"type": "admin"},
    "revoked_at": "2001-01-01T00:00:00Z", "hash": "00", "thread_id": "thr_forged", "message_counts": {},
}


@pytest.fixture(scope="module")
def org(client: Any, settings: Any, database_url: str) -> Org:
    return bootstrap_org(client, settings, database_url, "Assign", "admin@assign.test")


class Setup:
    def __init__(self, client: Any, org: Org, model_url: str) -> None:
        def ok(response: Any) -> dict[str, Any]:
            assert response.status_code in (200, 201), response.text
            return dict(response.json())

        self.client, self.org = client, org
        ok(client.post("/admin/models", headers=org.admin,
                       json={"id": "scripted", "provider": "openai_compatible", "base_url": model_url}))
        name = f"assign-{uuid.uuid4().hex[:8]}"
        self.index = ok(client.post("/indexes", json={"name": name}, headers=org.admin))["id"]
        self.key = org.make_key(ALL_CAPS, memory={"retrieval_tool": True, "write_tool": True})
        self.anna = bearer(org.key, "anna")
        self.record = ok(client.post("/memory", headers=self.anna,
                                     json={"index_id": self.index, "type": "fact", "text": "anna likes tea"}))["id"]
        thread = ok(client.post("/threads", headers=self.anna, json={
            "items": [{"type": "message", "role": "user", "content": "hello"}]}))
        self.thread, self.item = thread["id"], thread["items"][0]["id"]
        self.agent = ok(client.post("/agents", headers=org.admin, json={
            "name": f"helper-{uuid.uuid4().hex[:8]}", "model": "scripted", "instructions": "be brief"}))["id"]


def routes(s: Setup) -> list[tuple[str, str, dict[str, str], dict[str, Any], str | None]]:
    """(method, path, headers, valid body, nested container whose objects also get the fields)."""
    o, admin, anna = s.org, s.org.admin, s.anna
    message = {"type": "message", "role": "user", "content": "hi"}
    return [
        ("PATCH", f"/tenants/{o.org_id}", admin, {"timezone": "UTC"}, None),
        ("PUT", f"/tenants/{o.org_id}/vocabulary", admin, {}, None),
        ("POST", f"/tenants/{o.org_id}/keys", admin, {"name": "k", "capabilities": ["knowledge"]}, None),
        ("PATCH", f"/tenants/{o.org_id}/keys/{s.key['id']}", admin, {"name": "renamed"}, None),
        ("POST", "/subject-tokens", bearer(o.key), {"subject": {"id": "anna"}, "ttl_seconds": 60}, None),
        ("POST", "/indexes", admin, {"name": "another"}, None),
        ("PATCH", f"/indexes/{s.index}", admin, {"name": "renamed-index"}, None),
        ("PATCH", f"/memory/stores/{s.index}", admin, {}, None),
        ("POST", f"/memory/stores/{s.index}/injection/preview", admin, {"subject": {"id": "anna"}}, None),
        ("POST", "/memory", anna, {"index_id": s.index, "type": "fact", "text": "t"}, None),
        ("POST", "/memory/batch", anna, {"records": [{"index_id": s.index, "type": "fact", "text": "t"}]},
         "records"),
        ("PATCH", f"/memory/{s.record}", anna, {"priority": "high"}, None),
        ("POST", "/threads", anna, {"items": [message]}, "items"),
        ("PATCH", f"/threads/{s.thread}", anna, {"metadata": {"a": "b"}}, None),
        ("POST", f"/threads/{s.thread}/items", anna, {"items": [message]}, "items"),
        ("PUT", f"/threads/{s.thread}/items/{s.item}/metadata", anna, {"metadata": {"mood": "ok"}}, None),
        ("PUT", f"/threads/{s.thread}/state", anna, {"state": {"a": 1}}, None),
        ("POST", f"/tools/memory__{s.index}__search/call", anna, {"arguments": {"query": "tea"}}, None),
        ("POST", "/admin/models", admin, {"id": "other", "provider": "replay"}, None),
        ("POST", "/agents", admin, {"name": "a2", "model": "scripted", "instructions": "i"}, None),
        ("PATCH", f"/agents/{s.agent}", admin, {"instructions": "j"}, None),
        ("POST", "/responses", anna, {"model": "scripted", "input": "hi", "store": False}, None),
        ("POST", "/messages", anna, {"model": "scripted", "max_tokens": 10,
                                     "messages": [{"role": "user", "content": "hi"}]}, "messages"),
        ("POST", "/admin/login", {}, {"email": o.admin_email, "password": "wrong"}, None),
    ]


def _properties(document: dict[str, Any], method: str, path: str, nested: str | None) -> set[str]:
    """The fields the route's published request schema takes (top level, or in the nested objects)."""
    schemas = document["components"]["schemas"]
    template = next(p for p in document["paths"] if _matches(p, path))
    body = document["paths"][template][method.lower()].get("requestBody", {})
    schema = body.get("content", {}).get("application/json", {}).get("schema", {})

    def resolve(s: dict[str, Any]) -> dict[str, Any]:
        return schemas[s["$ref"].split("/")[-1]] if "$ref" in s else s

    schema = resolve(schema)
    if nested:
        items = resolve(schema["properties"][nested].get("items", {}))
        options = items.get("oneOf") or items.get("anyOf") or [items]
        return {name for option in options for name in resolve(option).get("properties", {})}
    return set(schema.get("properties", {}))


def _matches(template: str, path: str) -> bool:
    a, b = template.strip("/").split("/"), path.strip("/").split("/")
    return len(a) == len(b) and all(x == y or x.startswith("{") for x, y in zip(a, b, strict=True))


def _snapshot(db: Any) -> dict[str, str]:
    tables = [r[0] for r in db.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public' "
                                       "AND tablename <> 'alembic_version' ORDER BY 1")]
    parts = ", ".join(f"(SELECT count(*)::text || md5(coalesce(string_agg(t::text, '|' ORDER BY t::text), '')) "
                      f"FROM \"{name}\" t)" for name in tables)
    return dict(zip(tables, db.execute(f"SELECT {parts}").fetchone(), strict=True))


def test_plt_14_server_owned_fields_are_refused_and_never_persisted(client: Any, org: Org, db: Any,
                                                                    model_server: Any, report: Any) -> None:
    setup = Setup(client, org, model_server.url)
    document = client.get("/schema/openapi.json").json()
    refused = contract = 0
    problems: list[str] = []
    for method, path, headers, body, nested in routes(setup):
        taken = _properties(document, method, path, None)
        taken_nested = _properties(document, method, path, nested) if nested else set()
        for name, value in SERVER_OWNED.items():
            variants: list[tuple[str, Callable[[], dict[str, Any]]]] = []
            if name in taken:
                contract += 1
            else:
                variants.append((name, lambda n=name, v=value, b=body: {**b, n: v}))
            if nested and name not in taken_nested:
                variants.append((f"{nested}[0].{name}", lambda n=name, v=value, b=body, c=nested: {
                    **b, c: [{**b[c][0], n: v}]}))
            elif nested:
                contract += 1
            for param, make in variants:
                before = _snapshot(db)
                response = client.request(method, path, json=make(), headers=headers)
                after = _snapshot(db)
                refused += 1
                if response.status_code != 422 or response.json().get("param") != param:
                    problems.append(f"{method} {path} with {param}: {response.status_code} {response.text[:160]}")
                changed = [t for t in before if before[t] != after[t]]
                if changed:
                    problems.append(f"{method} {path} with {param} changed {changed}")
    report(routes=len(routes(setup)), refused_requests=refused, contract_fields=contract, problems=len(problems))
    assert problems == [], "\n".join(problems[:40])


def test_trn_1_copied_back_item_fields_are_ignored_never_persisted(client: Any, org: Org, db: Any,
                                                                    model_server: Any, report: Any) -> None:
    setup = Setup(client, org, model_server.url)
    model_server.reset()
    echoed = {"id": "itm_forged", "status": "completed", "position": 99, "response_id": "resp_forged",
              "subject": "mallory", "created_at": "2001-01-01T00:00:00Z"}
    item = {"type": "message", "role": "user", "content": "copied back", **echoed}
    answer = client.post("/responses", headers=setup.anna, json={"model": "scripted", "input": [item]})
    assert answer.status_code == 201, answer.text
    rows = db.execute("SELECT id, subject, response_id, position, created_at > now() - interval '1 hour' "
                      "FROM thread_items WHERE thread_id = %s ORDER BY position",
                      [answer.json()["thread_id"]]).fetchall()
    response_id = answer.json()["id"]
    assert [tuple(r[1:]) for r in rows] == [("anna", response_id, 1, True), ("anna", response_id, 2, True)]
    assert all(r[0] != "itm_forged" for r in rows)
    refused = ("org_id", "verified", "source", "recall_count", "key_id")
    for name in refused:
        forged = client.post("/responses", headers=setup.anna, json={"model": "scripted", "input": [
            {"type": "message", "role": "user", "content": "x", name: SERVER_OWNED[name]}]})
        assert forged.status_code == 422, (name, forged.text)
    report(ignored_item_fields=len(echoed), refused_item_fields=len(refused))
