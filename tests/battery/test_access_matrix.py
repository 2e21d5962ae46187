"""Issue 17 item 1, PLT-8/PLT-9/PLT-2: the access matrix.

Three organisations hold the same look-alike people (`a_b`, `a-b`, `A_B`, a Cyrillic `а_b`), probed by callers
with wildcard and trailing-space ids, through header subjects and subject tokens, under the default policy, a
policy with deny rules and one with label rules, and as each organisation's administrator. Every record,
thread, item, note, state, summary, response, export, tool, search, stats and preview route is asked; what
comes back is compared with `decide`. Pass: no row of another organisation (or that the policy hides) ever
appears, and a hidden or foreign id's 404 body is the body of an id that does not exist, byte for byte once
the two ids are swapped.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from tests.battery.world import Caller, Obj, World, build_world, unknown_id

Check = Callable[[], list[str]]  # runs one request and answers the problems it found


@pytest.fixture(scope="module")
def world(client: Any, settings: Any, database_url: str, model_server: Any) -> World:
    return build_world(client, settings, database_url, model_server.url)


def _ids(body: Any, key: str = "data") -> list[str]:
    return [row["id"] for row in body[key]]


class Matrix:
    def __init__(self, client: Any, world: World) -> None:
        self.client = client
        self.world = world
        self.by_id = {o.id: o for o in [*world.records, *world.threads, *world.responses]}
        self.canaries = {org.org_id: world.canary(org.org_id) for org in world.orgs}
        self.requests = 0
        self.foreign_rows = 0
        self.not_found_compared = 0
        self.twins: dict[tuple[str, str], tuple[str, str]] = {}
        self.salt = 0

    # ------------------------------------------------------------ plumbing

    def call(self, caller: Caller, method: str, url: str, **kwargs: Any) -> Any:
        self.requests += 1
        return self.client.request(method, url, headers=caller.headers, **kwargs)

    def foreign(self, caller: Caller, ids: list[str], what: str) -> list[str]:
        """Rows another organisation holds, or that the policy hides from this caller."""
        bad = [i for i in ids if i in self.by_id and not caller.sees(self.by_id[i])]
        self.foreign_rows += len(bad)
        return [f"{caller.name}: {what} shows {i}" for i in bad]

    def leaked_text(self, caller: Caller, text: str, what: str) -> list[str]:
        problems = []
        for org_id, canary in self.canaries.items():
            if org_id != caller.org.org_id and canary in text:
                self.foreign_rows += 1
                problems.append(f"{caller.name}: {what} shows text of {org_id}")
        return problems

    def not_found_like_unknown(self, caller: Caller, method: str, template: str, ids: tuple[str, ...],
                               response: Any, **kwargs: Any) -> list[str]:
        """A 404 whose body is exactly the body of an id nobody holds (same route, ids swapped)."""
        if response.status_code != 404:
            return [f"{caller.name}: {method} {template} {ids} answered {response.status_code}, not 404"]
        twin_key = (caller.name, f"{method} {template}")
        if twin_key not in self.twins:
            self.salt += 1
            fake = tuple(unknown_id(i.split("_", 1)[0], self.salt) for i in ids)
            twin = self.call(caller, method, template.format(*fake), **kwargs)
            self.twins[twin_key] = (json.dumps(list(fake)), twin.text)
        fake_ids, twin_text = self.twins[twin_key]
        mine = response.text
        for real, fake in zip(ids, json.loads(fake_ids), strict=True):
            mine = mine.replace(real, fake)
        self.not_found_compared += 1
        if mine != twin_text or response.headers.get("content-type") is None:
            return [f"{caller.name}: {method} {template} {ids}: {response.text} differs from {twin_text}"]
        return []

    def visible(self, caller: Caller, objs: list[Obj], **where: Any) -> set[str]:
        return {o.id for o in objs if caller.sees(o) and all(getattr(o, k) == v for k, v in where.items())}

    # ------------------------------------------------------------ list routes

    def list_checks(self, caller: Caller) -> list[tuple[str, Check]]:
        w, c = self.world, caller
        checks: list[tuple[str, Check]] = []
        for index_id in w.indexes[c.org.org_id]:
            expected = self.visible(c, w.records, index_id=index_id)
            expiring = {i for i in expected if self.by_id[i].expires}
            for route, params, want in (
                    ("/memory", {}, expected), ("/memory/by-tag", {"tag": "t"}, expected),
                    ("/memory/search", {"q": "quince"}, expected), ("/memory/expiring", {"within": "7d"}, expiring)):
                checks.append((f"GET {route}", self._list(c, route, {"index_id": index_id, "limit": 200, **params},
                                                          want)))
            checks.append(("GET /memory/recall", self._recall(c, index_id, expected)))
            checks.append(("POST /tools/…search/call", self._tool(c, index_id, expected)))
            if c.policy in ("admin", "default") and not c.token:
                checks.append(("POST /memory/stores/…/injection/preview", self._preview(c, index_id)))
        checks.append(("GET /memory/stats", self._stats(c)))
        checks.append(("GET /threads", self._list(c, "/threads", {"limit": 200}, self.visible(c, w.threads))))
        if not c.token:  # a management route: a subject token is refused (403)
            checks.append(("GET /threads/stats", self._thread_stats(c)))
        checks.append(("GET /thread-items", self._item_search(c)))
        checks.append(("GET /tools", self._tools(c)))
        if not c.token:
            checks.append(("GET /memory/export", self._export(c)))
        return checks

    def _list(self, c: Caller, route: str, params: dict[str, Any], expected: set[str]) -> Check:
        def run() -> list[str]:
            response = self.call(c, "GET", route, params=params)
            if response.status_code != 200:
                return [f"{c.name}: GET {route} {response.status_code} {response.text}"]
            got = _ids(response.json())
            problems = self.foreign(c, got, route)
            if set(got) != expected:
                problems.append(f"{c.name}: GET {route} {params} gave {sorted(got)}, expected {sorted(expected)}")
            return problems
        return run

    def _recall(self, c: Caller, index_id: str, expected: set[str]) -> Check:
        def run() -> list[str]:
            response = self.call(c, "GET", "/memory/recall", params={"index_id": index_id, "limit": 200})
            if response.status_code != 200:
                return [f"{c.name}: recall {response.status_code}"]
            problems = self.leaked_text(c, response.text, "recall")
            shown = {o.id for o in self.world.records if o.text and o.text in response.text}
            if shown != expected:
                hidden = shown - expected
                self.foreign_rows += len(hidden)
                problems.append(f"{c.name}: recall shows {sorted(shown)}, expected {sorted(expected)}")
            return problems
        return run

    def _tool(self, c: Caller, index_id: str, expected: set[str]) -> Check:
        def run() -> list[str]:
            response = self.call(c, "POST", f"/tools/memory__{index_id}__search/call",
                                 json={"arguments": {"query": "quince", "limit": 50}})
            if response.status_code != 200:
                return [f"{c.name}: search tool {response.status_code} {response.text}"]
            text = json.dumps(response.json())
            problems = self.leaked_text(c, text, "search tool")
            shown = {o.id for o in self.world.records if o.id in text}
            return problems + self.foreign(c, sorted(shown), "search tool") + (
                [] if shown == expected else [f"{c.name}: search tool {sorted(shown)} != {sorted(expected)}"])
        return run

    def _preview(self, c: Caller, index_id: str) -> Check:
        def run() -> list[str]:
            body: dict[str, Any] = {"subject": {"id": c.person}} if c.person else {}
            if c.key_id:
                body["key_id"] = c.key_id
            url, sender = f"/memory/stores/{index_id}/injection/preview", c
            if "X-Core-Subject" in c.headers:  # the previewer is the organisation's: a request for a person is refused
                named = self.call(c, "POST", url, json=body)
                if named.status_code != 403 or named.json().get("code") != "subject_named":
                    return [f"{c.name}: preview naming a person {named.status_code} {named.text}"]
                sender = Caller(c.org, c.policy, None, c.token, {"Authorization": c.headers["Authorization"]})
            response = self.call(sender, "POST", url, json=body)
            if response.status_code != 200:
                return [f"{c.name}: preview {response.status_code} {response.text}"]
            injected = response.json()["trace"]["injected_ids"]
            as_person = Caller(c.org, c.policy, c.person, c.token, c.headers, c.rules, c.key_id)
            if c.policy == "admin":  # no key named: the default policy for that person
                from backend.access.policy import default_policy, parse_policy
                as_person = Caller(c.org, "default", c.person, False, {}, parse_policy(default_policy()).rules)
            return self.foreign(as_person, injected, "preview") + self.leaked_text(c, response.text, "preview")
        return run

    def _stats(self, c: Caller) -> Check:
        def run() -> list[str]:
            response = self.call(c, "GET", "/memory/stats")
            if response.status_code != 200:
                return [f"{c.name}: stats {response.status_code} {response.text}"]
            body = response.json()
            expected = len(self.visible(c, self.world.records))
            total = body.get("total", body.get("records"))
            if total != expected:
                return [f"{c.name}: stats count {total}, expected {expected}: {body}"]
            return []
        return run

    def _thread_stats(self, c: Caller) -> Check:
        def run() -> list[str]:
            response = self.call(c, "GET", "/threads/stats")
            if response.status_code != 200:
                return [f"{c.name}: thread stats {response.status_code}"]
            expected = len(self.visible(c, self.world.threads))
            got = response.json()["threads"]
            return [] if got == expected else [f"{c.name}: thread stats {got}, expected {expected}"]
        return run

    def _item_search(self, c: Caller) -> Check:
        def run() -> list[str]:
            response = self.call(c, "GET", "/thread-items", params={"q": "quince", "limit": 200})
            if response.status_code != 200:
                return [f"{c.name}: item search {response.status_code} {response.text}"]
            rows = response.json()["data"]
            got = {r["thread_id"] for r in rows}
            expected = {t.id for t in self.world.threads if c.sees(t) and "quince" in t.text}
            problems = self.foreign(c, sorted(got), "thread-items") + self.leaked_text(c, response.text, "items")
            if got != expected:
                problems.append(f"{c.name}: item search threads {sorted(got)} != {sorted(expected)}")
            return problems
        return run

    def _tools(self, c: Caller) -> Check:
        def run() -> list[str]:
            response = self.call(c, "GET", "/tools", params={"source": "memory"})
            if response.status_code != 200:
                return [f"{c.name}: tools {response.status_code}"]
            names = {t["name"] for t in response.json()["data"]}
            own = self.world.indexes[c.org.org_id]
            bad = [n for n in names if not any(i in n for i in own)]
            self.foreign_rows += len(bad)
            return [f"{c.name}: tool {n} of another organisation" for n in bad]
        return run

    def _export(self, c: Caller) -> Check:
        def run() -> list[str]:
            response = self.call(c, "GET", "/memory/export", params={"format": "ndjson"})
            if response.status_code != 200:
                return [f"{c.name}: export {response.status_code} {response.text}"]
            got = [json.loads(line)["id"] for line in response.text.splitlines() if line.strip()]
            expected = self.visible(c, self.world.records)
            problems = self.foreign(c, got, "export") + self.leaked_text(c, response.text, "export")
            if set(got) != expected:
                problems.append(f"{c.name}: export {len(got)} rows, expected {len(expected)}")
            return problems
        return run

    # ------------------------------------------------------------ routes that name an object

    def id_checks(self, caller: Caller) -> list[tuple[str, Check]]:
        w, c = self.world, caller
        checks: list[tuple[str, Check]] = []
        for rec in w.records:
            for template in ("/memory/{}", "/memory/{}/history"):
                checks.append((f"GET {template}", self._get(c, "GET", template, (rec.id,), rec)))
            if not c.sees(rec):
                checks.append(("PATCH /memory/{}", self._get(c, "PATCH", "/memory/{}", (rec.id,), rec,
                                                             json={"priority": "high"})))
                checks.append(("DELETE /memory/{}", self._get(c, "DELETE", "/memory/{}", (rec.id,), rec)))
        for thread in w.threads:
            for template in ("/threads/{}", "/threads/{}/items", "/threads/{}/state", "/threads/{}/summaries"):
                checks.append((f"GET {template}", self._get(c, "GET", template, (thread.id,), thread)))
            if thread.item_ids:
                for template in ("/threads/{}/items/{}", "/threads/{}/items/{}/metadata"):
                    checks.append((f"GET {template}", self._get(c, "GET", template, (thread.id, thread.item_ids[0]),
                                                                thread)))
            if not c.sees(thread):
                for method, template, body in (
                        ("PATCH", "/threads/{}", {"metadata": {"x": "y"}}), ("DELETE", "/threads/{}", None),
                        ("POST", "/threads/{}/items", {"items": [{"type": "message", "role": "user",
                                                                  "content": "hi"}]}),
                        ("PUT", "/threads/{}/state", {"state": {"x": 1}})):
                    kwargs = {"json": body} if body is not None else {}
                    checks.append((f"{method} {template}", self._get(c, method, template, (thread.id,), thread,
                                                                     **kwargs)))
        for resp in w.responses:
            thread = self.by_id[resp.thread_id or ""]
            checks.append(("GET /responses/{}", self._get(c, "GET", "/responses/{}", (resp.id,), thread)))
        for org in w.orgs:
            same = org.org_id == c.org.org_id
            for index_id in w.indexes[org.org_id]:
                checks.append(("GET /indexes/{}", self._get(c, "GET", "/indexes/{}", (index_id,), None, same=same)))
            if not c.token:
                checks.append(("GET /agents/{}", self._get(c, "GET", "/agents/{}", (w.agents[org.org_id],), None,
                                                           same=same)))
        return checks

    def _get(self, c: Caller, method: str, template: str, ids: tuple[str, ...], obj: Obj | None, *,
             same: bool = False, **kwargs: Any) -> Check:
        def run() -> list[str]:
            response = self.call(c, method, template.format(*ids), **kwargs)
            allowed = c.sees(obj) if obj is not None else same
            if allowed:
                if response.status_code != 200:
                    return [f"{c.name}: {method} {template} {ids} {response.status_code} {response.text}"]
                return self.leaked_text(c, response.text, template)
            if response.status_code == 200:
                self.foreign_rows += 1
            return self.not_found_like_unknown(c, method, template, ids, response, **kwargs)
        return run


def _run_matrix(client: Any, world: World, report: Any, per_route: int, minimum: int) -> None:
    matrix = Matrix(client, world)
    rng = random.Random(17)
    by_route: dict[str, list[Check]] = {}
    for caller in world.callers:
        for route, check in [*matrix.list_checks(caller), *matrix.id_checks(caller)]:
            by_route.setdefault(route, []).append(check)
    problems: list[str] = []
    ran: Counter[str] = Counter()
    for route, checks in sorted(by_route.items()):
        chosen = checks if len(checks) <= per_route else rng.sample(checks, per_route)
        for check in chosen:
            problems += check()
            ran[route] += 1
    report(requests=matrix.requests, routes=len(ran), callers=len(world.callers), foreign_rows=matrix.foreign_rows,
           not_found_bodies_compared=matrix.not_found_compared, problems=len(problems))
    assert problems == [], "\n".join(problems[:30])
    assert matrix.foreign_rows == 0
    assert matrix.requests >= minimum


def test_plt_8_access_matrix_quick(client: Any, world: World, report: Any) -> None:
    _run_matrix(client, world, report, per_route=12, minimum=500)


@pytest.mark.slow
def test_plt_8_access_matrix_long(client: Any, world: World, report: Any) -> None:
    _run_matrix(client, world, report, per_route=130, minimum=5000)
