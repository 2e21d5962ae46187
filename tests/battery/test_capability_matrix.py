"""Issue 17 item 6, PLT-4/PLT-6/PLT-12/PLT-13: every route × every credential kind.

Credentials: a key holding each single capability (`memory` needs `knowledge`, so that column holds both), a key
with none, a revoked key, an expired key, and another organisation's administrator. Each route has the gate the
spec gives it (a capability, `management`, administrators only, or any key). Pass: a revoked or expired key is
401 on every route; a key missing the gate gets the spec's refusal (403 `capability_missing` naming it, PLT-6's
404 for `threads`, 403 `admin_required`); a key holding it is not refused; another organisation's administrator
never reaches this organisation's objects; and every write refused with 403 leaves exactly one `denied` audit row
and no other change in any table.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from backend.access.policy import writer_policy
from backend.errors import THREADS_MISSING_MESSAGE
from tests.battery.test_mass_assignment import _snapshot
from tests.helpers import ALL_CAPS, Org, bearer, bootstrap_org

SINGLE = [["knowledge"], ["knowledge", "memory"], ["threads"], ["tooling"], ["compaction"], ["management"],
          ["trust_envelope"], []]


@dataclass
class Cred:
    name: str
    headers: dict[str, str]
    caps: frozenset[str]
    kind: str  # key | revoked | expired | other_admin
    key_id: str | None = None


@dataclass
class Route:
    method: str
    path: Callable[[Cred], str]
    body: Callable[[Cred], Any] | None
    gate: str  # any | knowledge | memory | threads | management | admin | threads+management
    names_org_object: bool = True  # the path names an object of this organisation
    nobody: bool = False  # sent naming no person (erasure and the previewer are refused to a request naming one:
    # 403 subject_named)


@pytest.fixture(scope="module")
def orgs(client: Any, settings: Any, database_url: str, model_server: Any) -> tuple[Org, Org]:
    mine = bootstrap_org(client, settings, database_url, "Matrix", "admin@matrix.test")
    other = bootstrap_org(client, settings, database_url, "Elsewhere", "admin@elsewhere.test")
    response = client.post("/admin/models", headers=mine.admin,
                           json={"id": "scripted", "provider": "openai_compatible", "base_url": model_server.url})
    assert response.status_code == 201, response.text
    return mine, other


class World:
    def __init__(self, client: Any, org: Org, other: Org) -> None:
        self.client, self.org = client, org
        self.index = self.ok("POST", "/indexes", {"name": "matrix"}, org.admin)["id"]
        self.record = lambda: self.ok("POST", "/memory", {"index_id": self.index, "type": "fact", "text": "t"},
                                      bearer(org.key, "anna"))["id"]
        self.thread_doc = self.ok("POST", "/threads", {"items": [{"type": "message", "role": "user",
                                                                  "content": "hi"}]}, bearer(org.key, "anna"))
        self.thread, self.item = self.thread_doc["id"], self.thread_doc["items"][0]["id"]
        self.agent = self.ok("POST", "/agents", {"name": "matrix", "model": "scripted", "instructions": "i"},
                             org.admin)["id"]
        turn = self.ok("POST", "/responses", {"model": "scripted", "input": "hi"}, bearer(org.key, "anna"))
        self.response = turn["id"]
        self.creds = self._creds(other)

    def made(self, path: str, body: Any) -> str:
        return str(self.ok("POST", path, body, self.org.admin)["id"])

    def ok(self, method: str, path: str, body: Any, headers: dict[str, str]) -> dict[str, Any]:
        response = self.client.request(method, path, json=body, headers=headers)
        assert response.status_code in (200, 201), response.text
        return dict(response.json())

    def _creds(self, other: Org) -> list[Cred]:
        org = self.org
        creds = []
        for caps in SINGLE:
            key = org.make_key(caps, policy=writer_policy(), name="+".join(caps) or "none")
            creds.append(Cred("+".join(caps) or "none", bearer(key["secret"], "anna"), frozenset(caps), "key",
                              key["id"]))
        revoked = org.make_key(ALL_CAPS, name="revoked")
        self.ok("POST", f"/tenants/{org.org_id}/keys/{revoked['id']}/revoke", None, org.admin)
        creds.append(Cred("revoked", bearer(revoked["secret"]), frozenset(ALL_CAPS), "revoked"))
        expired = org.make_key(ALL_CAPS, name="expired",
                               expires_at=(datetime.now(UTC) + timedelta(seconds=1)).isoformat())
        creds.append(Cred("expired", bearer(expired["secret"]), frozenset(ALL_CAPS), "expired"))
        time.sleep(1.1)
        creds.append(Cred("other-admin", other.admin, frozenset(ALL_CAPS), "other_admin"))
        return creds

    def fresh_key_for(self, cred: Cred) -> str:
        """A key a management key may change: one it made itself (else one the administrator made)."""
        headers = cred.headers if "management" in cred.caps and cred.kind == "key" else self.org.admin
        response = self.client.post(f"/tenants/{self.org.org_id}/keys", headers={"Authorization": headers[
            "Authorization"]}, json={"name": "target", "capabilities": []})
        return str(response.json()["id"]) if response.status_code == 201 else "key_none"

    def routes(self) -> list[Route]:
        o, idx, thr, itm = self.org.org_id, self.index, self.thread, self.item
        message = {"type": "message", "role": "user", "content": "hi"}

        def fixed(path: str) -> Callable[[Cred], str]:
            return lambda _: path

        def body(value: Any) -> Callable[[Cred], Any]:
            return lambda _: value

        return [
            Route("GET", fixed("/key"), None, "any", False),
            Route("PUT", fixed("/key/policy"), body(writer_policy()), "management", False),
            Route("POST", fixed("/subject-tokens"), body({"subject": {"id": "anna"}, "ttl_seconds": 60}), "any",
                  False),
            Route("GET", fixed("/tenants"), None, "management", False),
            Route("GET", fixed(f"/tenants/{o}"), None, "management"),
            Route("PATCH", fixed(f"/tenants/{o}"), body({"timezone": "UTC"}), "admin"),
            Route("GET", fixed(f"/tenants/{o}/vocabulary"), None, "management"),
            Route("PUT", fixed(f"/tenants/{o}/vocabulary"), body({}), "management"),
            Route("GET", fixed(f"/tenants/{o}/keys"), None, "management"),
            Route("POST", fixed(f"/tenants/{o}/keys"), body({"name": "made", "capabilities": []}), "management"),
            Route("GET", fixed(f"/tenants/{o}/keys/audit"), None, "management"),
            Route("GET", lambda c: f"/tenants/{o}/keys/{self.fresh_key_for(c)}", None, "management"),
            Route("PATCH", lambda c: f"/tenants/{o}/keys/{self.fresh_key_for(c)}", body({"name": "renamed"}),
                  "management"),
            Route("POST", lambda c: f"/tenants/{o}/keys/{self.fresh_key_for(c)}/revoke", None, "management"),
            Route("DELETE", lambda c: f"/tenants/{o}/keys/{self.fresh_key_for(c)}", None, "management"),
            Route("GET", fixed("/indexes"), None, "knowledge", False),
            Route("POST", fixed("/indexes"), lambda _: {"name": f"i-{uuid.uuid4().hex[:8]}"}, "knowledge", False),
            Route("GET", fixed(f"/indexes/{idx}"), None, "knowledge"),
            Route("PATCH", fixed(f"/indexes/{idx}"), lambda _: {"name": f"i-{uuid.uuid4().hex[:8]}"}, "knowledge"),
            Route("DELETE", lambda _: f"/indexes/{self.made('/indexes', {'name': uuid.uuid4().hex[:8]})}", None,
                  "knowledge"),
            Route("GET", fixed("/audit"), None, "admin", False),
            Route("GET", fixed("/audit/verify"), None, "admin", False),
            Route("GET", fixed(f"/memory/stores/{idx}"), None, "memory"),
            Route("PATCH", fixed(f"/memory/stores/{idx}"), body({}), "memory"),
            Route("POST", fixed(f"/memory/stores/{idx}/injection/preview"), body({}), "management", nobody=True),
            Route("POST", fixed("/memory"), body({"index_id": idx, "type": "fact", "text": "t"}), "memory", False),
            Route("POST", fixed("/memory/batch"), body({"records": [{"index_id": idx, "type": "fact", "text": "t"}]}),
                  "memory", False),
            *[Route("GET", fixed(p), None, "memory", False) for p in (
                "/memory", "/memory/stats", "/memory/expiring", "/memory/recall", "/memory/by-tag?tag=x",
                "/memory/search?q=t")],
            Route("GET", fixed("/memory/export"), None, "memory+management", False),
            Route("GET", lambda _: f"/memory/{self.record()}", None, "memory"),
            Route("GET", lambda _: f"/memory/{self.record()}/history", None, "memory"),
            Route("PATCH", lambda _: f"/memory/{self.record()}", body({"priority": "high"}), "memory"),
            Route("DELETE", lambda _: f"/memory/{self.record()}", None, "memory"),
            # a key without `memory` hears of that first (every memory route needs it), one with it `admin_required`
            Route("POST", lambda _: f"/memory/{self.record()}/verify", None, "memory+admin"),
            Route("GET", fixed("/tools?source=memory"), None, "memory", False),
            Route("POST", fixed(f"/tools/memory__{idx}__search/call"), body({"arguments": {"query": "t"}}), "memory"),
            Route("DELETE", fixed("/subjects/nobody-in-particular"), None, "management", False, nobody=True),
            Route("GET", fixed("/threads"), None, "threads", False),
            Route("POST", fixed("/threads"), body({"items": [message]}), "threads", False),
            Route("GET", fixed("/threads/stats"), None, "threads+management", False),
            Route("GET", fixed("/thread-items?q=hi"), None, "threads", False),
            Route("GET", fixed(f"/threads/{thr}"), None, "threads"),
            Route("PATCH", fixed(f"/threads/{thr}"), body({"metadata": {"a": "b"}}), "threads"),
            Route("DELETE", lambda _: f"/threads/{self.ok('POST', '/threads', {}, bearer(self.org.key, 'anna'))['id']}",
                  None, "threads"),
            Route("GET", fixed(f"/threads/{thr}/items"), None, "threads"),
            Route("POST", fixed(f"/threads/{thr}/items"), body({"items": [message]}), "threads"),
            Route("GET", fixed(f"/threads/{thr}/items/{itm}"), None, "threads"),
            Route("GET", fixed(f"/threads/{thr}/items/{itm}/metadata"), None, "threads"),
            Route("PUT", fixed(f"/threads/{thr}/items/{itm}/metadata"), body({"metadata": {"m": "x"}}), "threads"),
            Route("DELETE", fixed(f"/threads/{thr}/items/{itm}/metadata"), None, "threads"),
            Route("GET", fixed(f"/threads/{thr}/state"), None, "threads"),
            Route("PUT", fixed(f"/threads/{thr}/state"), body({"state": {"a": 1}}), "threads"),
            Route("GET", fixed(f"/threads/{thr}/summaries"), None, "threads"),
            Route("GET", fixed("/models"), None, "any", False),
            Route("POST", fixed("/admin/models"), body({"id": "other", "provider": "replay"}), "admin", False),
            Route("DELETE", fixed("/admin/models/other"), None, "admin", False),
            Route("GET", fixed("/usage"), None, "management", False, nobody=True),
            Route("POST", fixed("/responses"), body({"model": "scripted", "input": "hi", "store": False}), "any",
                  False),
            Route("GET", fixed(f"/responses/{self.response}"), None, "threads"),
            Route("POST", fixed("/messages"), body({"model": "scripted", "max_tokens": 5,
                                                    "messages": [{"role": "user", "content": "hi"}]}), "any", False),
            Route("GET", fixed("/agents"), None, "any", False),
            Route("POST", fixed("/agents"), lambda _: {"name": uuid.uuid4().hex[:8], "model": "scripted",
                                                       "instructions": "i"}, "management", False),
            Route("GET", fixed(f"/agents/{self.agent}"), None, "any"),
            Route("PATCH", fixed(f"/agents/{self.agent}"), body({"instructions": "j"}), "management"),
            Route("GET", fixed(f"/agents/{self.agent}/versions"), None, "any"),
            Route("DELETE", lambda _: "/agents/" + self.made("/agents", {
                "name": uuid.uuid4().hex[:8], "model": "scripted", "instructions": "i"}), None, "management"),
        ]


def _gate_refusal(route: Route, cred: Cred) -> tuple[int, str] | None:
    """The refusal the spec gives this key on this route, or None when it holds the gate."""
    needs = {"knowledge": ["knowledge"], "memory": ["memory"], "threads": ["threads"],
             "management": ["management"], "threads+management": ["threads", "management"], "any": [],
             "memory+management": ["memory", "management"], "memory+admin": ["memory"],
             "admin": []}[route.gate]
    missing = [cap for cap in needs if cap not in cred.caps]
    if "threads" in missing:  # PLT-6: the stored-conversation routes answer 404 first
        return 404, "threads"
    if missing:  # any one missing capability may be the one named
        return 403, "|".join(missing)
    if route.gate in ("admin", "memory+admin"):
        return 403, "admin_required"
    return None


def _audit_rows(db: Any, org_id: str) -> list[tuple[Any, ...]]:
    return db.execute("SELECT action, outcome, detail FROM audit_events WHERE org_id = %s ORDER BY seq",
                      [org_id]).fetchall()


def test_plt_4_every_route_against_every_credential(client: Any, orgs: tuple[Org, Org], db: Any,
                                                    report: Any) -> None:
    org, other = orgs
    world = World(client, org, other)
    problems: list[str] = []
    seen: Counter[str] = Counter()
    denied_writes = 0
    routes = world.routes()
    for route in routes:
        for cred in world.creds:
            path = route.path(cred)
            label = f"{route.method} {path} as {cred.name}"
            write = route.method != "GET"
            before = _snapshot(db) if write else {}
            audit_before = len(_audit_rows(db, org.org_id)) if write else 0
            body = route.body(cred) if route.body else None
            headers = {"Authorization": cred.headers["Authorization"]} if route.nobody else cred.headers
            response = client.request(route.method, path, headers=headers,
                                      **({"json": body} if body is not None else {}))
            status = response.status_code
            seen[f"{cred.kind}:{status}"] += 1
            if status >= 500:
                problems.append(f"{label}: {status}")
                continue
            payload = response.json() if response.content and "json" in response.headers.get("content-type", "") \
                else {}
            if cred.kind in ("revoked", "expired"):
                if status != 401 or payload.get("code") != f"key_{cred.kind}":
                    problems.append(f"{label}: {status} {response.text[:120]}")
                continue
            if cred.kind == "other_admin":
                if route.names_org_object and status < 400:
                    problems.append(f"{label}: {status}, reached another organisation's object")
                continue
            expected = _gate_refusal(route, cred)
            if expected is None:
                if status in (401, 403) or (status == 404 and payload.get("message") == THREADS_MISSING_MESSAGE):
                    problems.append(f"{label}: refused {status} {response.text[:160]}")
            else:
                want_status, what = expected
                if status != want_status:
                    problems.append(f"{label}: {status}, expected {want_status} for {what}: {response.text[:120]}")
                elif what == "threads" and payload.get("message") != THREADS_MISSING_MESSAGE:
                    problems.append(f"{label}: 404 without PLT-6's message")
                elif what == "admin_required":
                    if payload.get("code") != "admin_required":
                        problems.append(f"{label}: {payload}")
                elif want_status == 403 and (
                        payload.get("code") != "capability_missing"
                        or not any(f"`{cap}`" in payload.get("message", "") for cap in what.split("|"))):
                    problems.append(f"{label}: {payload}")
            if write and status == 403:
                denied_writes += 1
                after = _snapshot(db)
                events = _audit_rows(db, org.org_id)[audit_before:]
                if len(events) != 1 or events[0][1] != "denied":
                    problems.append(f"{label}: 403 with audit rows {events}")
                changed = [t for t in before if t != "audit_events" and before[t] != after[t]]
                if changed:
                    problems.append(f"{label}: 403 but changed {changed}")
    report(routes=len(routes), credentials=len(world.creds), requests=len(routes) * len(world.creds),
           denied_writes_checked=denied_writes, statuses=dict(sorted(seen.items())), problems=len(problems))
    assert problems == [], "\n".join(problems[:50])
