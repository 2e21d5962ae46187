"""PLT-6 on every thread route, and the access matrix: Anna, Bob, nobody named, subject token, admin, other org."""

from __future__ import annotations

import pytest

from tests.helpers import ALL_CAPS, assert_error, assert_threads_missing, bearer
from tests.threads.util import msg, new_thread


def test_plt_6_every_thread_route_without_threads_is_the_exact_404(client, org):
    thread = new_thread(client, bearer(org.key), items=[msg("user", "hallo")])
    tid, iid = thread["id"], thread["items"][0]["id"]
    no_threads = org.make_key(capabilities=[c for c in ALL_CAPS if c != "threads"], name="no threads")["secret"]
    token = org.subject_token(no_threads, "anna")
    routes = [
        ("POST", "/threads", {}), ("GET", "/threads", None), ("GET", f"/threads/{tid}", None),
        ("PATCH", f"/threads/{tid}", {"metadata": {}}), ("DELETE", f"/threads/{tid}", None),
        ("POST", f"/threads/{tid}/items", {"items": [msg("user", "x")]}), ("GET", f"/threads/{tid}/items", None),
        ("GET", f"/threads/{tid}/items/{iid}", None),
        ("PUT", f"/threads/{tid}/items/{iid}/metadata", {"metadata": {"k": 1}}),
        ("GET", f"/threads/{tid}/items/{iid}/metadata", None), ("DELETE", f"/threads/{tid}/items/{iid}/metadata", None),
        ("GET", f"/threads/{tid}/state", None), ("PUT", f"/threads/{tid}/state", {"state": {}}),
        ("PATCH", f"/threads/{tid}/state", {"a": 1}), ("GET", f"/threads/{tid}/summaries", None),
        ("GET", "/thread-items?q=hallo", None), ("GET", "/threads/thr_unknown", None),
    ]
    for credential in (bearer(no_threads), bearer(no_threads, "anna"), bearer(token)):
        for method, url, body in routes:
            response = client.request(method, url, json=body, headers=credential)
            assert_threads_missing(response)
    # Nothing changed behind the refusals.
    assert client.get(f"/threads/{tid}/items", headers=bearer(org.key)).json()["items"][0]["content"] == "hallo"


@pytest.fixture
def cast(client, org, other_org):
    key = org.make_key(name="app")["secret"]
    return {
        "anna": bearer(key, "anna"), "bob": bearer(key, "bob"), "nobody": bearer(key),
        "anna_token": bearer(org.subject_token(key, "anna")), "admin": org.admin, "other_org": bearer(other_org.key),
    }


# who -> (read, append, delete) on Anna's thread and on a shared thread, under the default policy (PLT-9)
MATRIX = {
    "anna": {"annas": (200, 201, 204), "shared": (200, 403, 403)},
    "bob": {"annas": (404, 404, 404), "shared": (200, 403, 403)},
    "nobody": {"annas": (200, 201, 204), "shared": (200, 201, 204)},
    "anna_token": {"annas": (200, 201, 204), "shared": (200, 403, 403)},
    "admin": {"annas": (200, 201, 204), "shared": (200, 201, 204)},
    "other_org": {"annas": (404, 404, 404), "shared": (404, 404, 404)},
}


def test_thr_access_matrix(client, cast, org, db):
    for who, expected in MATRIX.items():
        for kind, (read, append, remove) in expected.items():
            owner = cast["anna"] if kind == "annas" else cast["nobody"]
            thread = new_thread(client, owner, items=[msg("user", "matrix")])
            url = f"/threads/{thread['id']}"
            headers = cast[who]
            got = (client.get(url, headers=headers).status_code,
                   client.post(f"{url}/items", json={"items": [msg("user", who)]}, headers=headers).status_code,
                   client.delete(url, headers=headers).status_code)
            assert got == (read, append, remove), (who, kind, got)
            listed = {t["id"] for t in client.get("/threads", headers=headers).json().get("data", [])}
            assert (thread["id"] in listed) == (read == 200 and remove != 204), (who, kind)
            searched = client.get("/thread-items?q=matrix", headers=headers).json().get("data", [])
            assert (thread["id"] in {h["thread_id"] for h in searched}) == (thread["id"] in listed)
    # The administrator's reads are in the audit trail, with ids, never text.
    reads = db.execute("SELECT detail FROM audit_events WHERE action = 'thread.read' AND actor_type = 'admin'"
                       ).fetchall()
    routes = {r[0]["route"] for r in reads}
    assert {"GET /threads/{id}", "GET /threads", "GET /thread-items"} <= routes
    assert all("matrix" not in str(r[0]) for r in reads)


def test_plt_7_subjects_required_applies_to_thread_routes(client, org):
    policy = {"indexes": ["*"], "rules": [{"id": "t", "effect": "permit", "kind": "thread"}],
              "settings": {"subjects_required": True}}
    key = org.make_key(name="strict", policy=policy)["secret"]
    assert_error(client.get("/threads", headers=bearer(key)), 400, code="subject_required")
    assert_error(client.get("/thread-items?q=x", headers=bearer(key)), 400, code="subject_required")
    assert client.get("/threads", headers=bearer(key, "anna")).status_code == 200
