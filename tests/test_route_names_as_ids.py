"""PLT-14: a path whose id is the name of another route (`PATCH /memory/search`, `DELETE /threads/stats`,
`PATCH /tenants/{org}/keys/audit`) answers 404 as any unknown id does, not a 405 the documented operation never
answers (found by the long schemathesis run). A method no route has on a path stays 405."""

from __future__ import annotations

import re
from typing import Any

from litestar.routes import HTTPRoute

from tests.helpers import Org

METHODS = ("GET", "POST", "PATCH", "DELETE")


def _names_taken_as_ids(app: Any) -> list[tuple[str, str]]:
    """(method, path) of every static route's path sent with a method only a route with an id there has."""
    routes = [r for r in app.routes if isinstance(r, HTTPRoute)]
    found = []
    for static in (r for r in routes if "{" not in r.path):
        for other in (r for r in routes if "{" in r.path):
            pattern = "/".join("[^/]+" if p.startswith("{") else re.escape(p) for p in other.path.split("/"))
            if re.fullmatch(pattern, static.path):
                found += [(m, static.path) for m in METHODS if m in other.methods and m not in static.methods]
    return sorted(set(found))


def test_plt_14_a_route_name_sent_as_an_id_is_an_unknown_id(client: Any, org: Org) -> None:
    taken = _names_taken_as_ids(client.app)
    assert ("PATCH", "/memory/search") in taken and ("DELETE", "/threads/stats") in taken
    for method, path in taken:
        for headers in (org.full, {}):
            response = client.request(method, path, headers=headers, json={})
            assert response.status_code == 404, (method, path, response.text)
            assert response.json()["code"] == "not_found" and "never an id" in response.json()["message"]
    # the key audit trail's path under an organisation
    patched = client.patch(f"/tenants/{org.org_id}/keys/audit", headers=org.admin, json={"name": "x"})
    assert patched.status_code == 404 and patched.json()["code"] == "not_found", patched.text
    # a method no route takes there
    wrong = client.put("/memory/search", headers=org.full, json={})
    assert wrong.status_code == 405 and wrong.json()["code"] == "method_not_allowed", wrong.text
