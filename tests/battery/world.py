"""A populated platform for the battery: three organisations, the same look-alike people in each, their records,
threads, items, notes, working states and turns, and keys with the default policy, deny rules and label rules.

Every object remembers its organisation, owner and labels, so a test can ask `decide` (the Python decision the
table-driven tests pin) what each caller should see and compare with what the API answers.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from backend.access.policy import Requester, Rule, decide, parse_policy, writer_policy
from backend.config import Settings
from tests.helpers import ALL_CAPS, Org, bearer, bootstrap_org

# Ids that look alike: `_` and `%` are LIKE wildcards, case variants, a Cyrillic а (U+0430) for the Latin a.
PEOPLE = ["a_b", "a-b", "A_B", "\u0430_b"]
# Callers with no data of their own: a trailing space, wildcards alone, a case variant of a wildcard id.
PROBES = ["a_b ", "a%", "_", "A-B"]
ATTRIBUTES = {"a_b": {"department": ["payroll"]}, "a-b": {"department": ["sales"]},
              "a_b ": {"department": ["payroll", "secret"]}, "a%": {"department": ["%"]}}
ORG_NAMES = ["Acme", "Globex", "Initech"]


def deny_policy() -> dict[str, Any]:
    doc = writer_policy()
    doc["rules"] += [
        {"id": "deny-a-b", "effect": "deny", "kind": "memory_record", "match": {"labels": {"subject": "a-b"}}},
        {"id": "deny-a-b-threads", "effect": "deny", "kind": "thread", "match": {"labels": {"subject": "a-b"}}},
        {"id": "deny-payroll", "effect": "deny", "kind": "memory_record", "actions": ["see"],
         "match": {"labels": {"department": "payroll"}}},
    ]
    return doc


def label_policy() -> dict[str, Any]:
    return {"indexes": ["*"], "rules": [
        {"id": "own", "effect": "permit", "kind": "memory_record", "when": [{"atom": "subject_is_owner"}]},
        {"id": "nobody", "effect": "permit", "kind": "memory_record", "when": [{"atom": "no_subject"}]},
        {"id": "unlabelled-shared", "effect": "permit", "kind": "memory_record", "actions": ["see"],
         "match": {"labels": {"subject": "", "department": ""}}},
        {"id": "department", "effect": "permit", "kind": "memory_record", "actions": ["see"],
         "match": {"labels": {"subject": ""}},
         "when": [{"atom": "label_among", "label": "department", "attribute": "department"}]},
        {"id": "no-secrets", "effect": "deny", "kind": "memory_record",
         "match": {"labels": {"department": "secret"}}},
        {"id": "thread-own", "effect": "permit", "kind": "thread", "when": [{"atom": "subject_is_owner"}]},
        {"id": "thread-nobody", "effect": "permit", "kind": "thread", "when": [{"atom": "no_subject"}]},
        {"id": "thread-shared", "effect": "permit", "kind": "thread", "actions": ["see"],
         "match": {"labels": {"subject": ""}}},
        {"id": "write", "effect": "permit", "kind": "memory_write"},
    ], "settings": {}}


POLICIES = {"default": writer_policy, "deny": deny_policy, "label": label_policy}


@dataclass
class Obj:
    kind: str  # record | thread | response
    id: str
    org_id: str
    owner: str | None
    labels: dict[str, Any]
    index_id: str | None = None
    thread_id: str | None = None
    item_ids: list[str] = field(default_factory=list)
    expires: bool = False
    text: str = ""


@dataclass
class Caller:
    """One credential and the person it names (None: nobody; the administrator sees her whole organisation)."""

    org: Org
    policy: str  # default | deny | label | admin
    person: str | None
    token: bool
    headers: dict[str, str]
    rules: tuple[Rule, ...] = ()
    key_id: str | None = None

    @property
    def name(self) -> str:
        via = "token" if self.token else "header"
        return f"{self.org.org_id[-6:]}/{self.policy}/{self.person!r}/{via}"

    def sees(self, obj: Obj, action: str = "see") -> bool:
        if obj.org_id != self.org.org_id:
            return False
        if self.policy == "admin":
            return True
        kind = "memory_record" if obj.kind == "record" else "thread"
        who = Requester(self.person, ATTRIBUTES.get(self.person or "", {}))
        return decide(self.rules, kind, action, who, obj.owner, obj.labels)


@dataclass
class World:
    orgs: list[Org]
    indexes: dict[str, list[str]]  # org id -> its two index ids
    keys: dict[tuple[str, str], dict[str, Any]]  # (org id, policy) -> key document with secret
    records: list[Obj]
    threads: list[Obj]
    responses: list[Obj]
    agents: dict[str, str]  # org id -> agent id
    callers: list[Caller]

    def canary(self, org_id: str) -> str:
        return f"canary{org_id[-8:]}"


def _ok(response: Any, status: int = 201) -> dict[str, Any]:
    assert response.status_code == status, response.text
    return dict(response.json())


def build_world(client: Any, settings: Settings, database_url: str, model_url: str | None = None) -> World:
    orgs = [bootstrap_org(client, settings, database_url, name, f"admin@{name.lower()}.test") for name in ORG_NAMES]
    world = World(orgs, {}, {}, [], [], [], {}, [])
    soon = (datetime.now(UTC) + timedelta(days=3)).isoformat()
    for org in orgs:
        oid = org.org_id
        canary = world.canary(oid)
        indexes = [_ok(client.post("/indexes", json={"name": f"store-{i}"}, headers=org.admin))["id"] for i in (1, 2)]
        world.indexes[oid] = indexes
        memory = {"retrieval_tool": True, "write_tool": True, "injection": {"index_id": indexes[0]}}
        for name, make in POLICIES.items():
            world.keys[(oid, name)] = org.make_key(ALL_CAPS, policy=make(), memory=memory, name=name)
        writer = org.full
        for index_id in indexes:
            owners: list[tuple[str | None, dict[str, Any]]] = [(p, {}) for p in PEOPLE]
            owners += [(None, {}), (None, {"department": "payroll"}), (None, {"department": "secret"}),
                       (None, {"department": ["sales", "%"]})]
            for n, (owner, labels) in enumerate(owners):
                headers = bearer(org.key, owner) if owner else writer
                text = f"{canary} record {n} of {owner or 'shared'} in {index_id} quince"
                body: dict[str, Any] = {"index_id": index_id, "type": "fact", "text": text, "tags": ["t"],
                                        "labels": labels}
                if n % 2 == 0:
                    body["expires_at"] = soon
                made = _ok(client.post("/memory", json=body, headers=headers))
                world.records.append(Obj("record", made["id"], oid, owner, labels, index_id=index_id,
                                         expires=n % 2 == 0, text=text))
        for owner in [*PEOPLE, None]:
            headers = bearer(org.key, owner) if owner else writer
            text = f"{canary} thread of {owner or 'shared'} quince"
            made = _ok(client.post("/threads", headers=headers, json={
                "items": [{"type": "message", "role": "user", "content": text},
                          {"type": "message", "role": "assistant", "content": f"{canary} answer quince"}]}))
            thread = Obj("thread", made["id"], oid, owner, {}, item_ids=[i["id"] for i in made["items"]], text=text)
            _ok(client.put(f"/threads/{thread.id}/state", headers=headers, json={"state": {"note": canary}}), 200)
            if owner:
                _ok(client.put(f"/threads/{thread.id}/items/{thread.item_ids[0]}/metadata", headers=headers,
                               json={"metadata": {"mood": canary}}), 200)
            world.threads.append(thread)
        model = "scripted" if model_url else "replay"
        if model_url:
            _ok(client.post("/admin/models", headers=org.admin,
                            json={"id": "scripted", "provider": "openai_compatible", "base_url": model_url}))
        world.agents[oid] = _ok(client.post("/agents", headers=org.admin, json={
            "name": "helper", "model": model, "instructions": f"{canary} be brief"}))["id"]
        if model_url:
            for person in PEOPLE:
                answer = _ok(client.post("/responses", headers=bearer(org.key, person),
                                         json={"model": "scripted", "input": f"{canary} hello from {person}"}))
                assert answer["status"] == "completed", answer
                world.threads.append(Obj("thread", answer["thread_id"], oid, person, {}, text=canary))
                world.responses.append(Obj("response", answer["id"], oid, person, {}, thread_id=answer["thread_id"]))
        world.callers += _callers(client, org, world)
    return world


def _callers(client: Any, org: Org, world: World) -> list[Caller]:
    callers = [Caller(org, "admin", None, False, org.admin)]
    for name in POLICIES:
        key = world.keys[(org.org_id, name)]
        rules = parse_policy(key["policy"]).rules
        for person in [None, *PEOPLE, *PROBES]:
            attrs = ATTRIBUTES.get(person or "")
            callers.append(Caller(org, name, person, False, bearer(key["secret"], person, attrs), rules, key["id"]))
            if person is not None:
                token = org.subject_token(key["secret"], person, attrs)
                callers.append(Caller(org, name, person, True, bearer(token), rules, key["id"]))
    return callers


def unknown_id(prefix: str, salt: int) -> str:
    """An id of the right shape that no object has (the random part is all zeros but for a counter)."""
    return f"{prefix}_" + f"{salt:026d}".replace("1", "z")


def dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True)
