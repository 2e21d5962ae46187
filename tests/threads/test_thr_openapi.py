"""PLT-16 for threads: every thread route is in the OpenAPI document, with the merge patch media type."""

from __future__ import annotations


def test_plt_16_thread_routes_are_described(client):
    response = client.get("/schema/openapi.json")
    assert response.status_code == 200, response.text
    paths = response.json()["paths"]
    expected = {
        "/threads": {"get", "post"}, "/threads/{thread_id}": {"get", "patch", "delete"},
        "/threads/{thread_id}/items": {"get", "post"}, "/threads/{thread_id}/items/{item_id}": {"get"},
        "/threads/{thread_id}/items/{item_id}/metadata": {"get", "put", "delete"},
        "/threads/{thread_id}/state": {"get", "put", "patch"}, "/threads/{thread_id}/summaries": {"get"},
        "/thread-items": {"get"},
    }
    for path, methods in expected.items():
        assert set(paths[path]) == methods, path
    patch_body = paths["/threads/{thread_id}/state"]["patch"]["requestBody"]["content"]
    assert set(patch_body) == {"application/merge-patch+json", "application/json"}
    search = {p["name"] for p in paths["/thread-items"]["get"]["parameters"]}
    assert {"q", "thread_id", "thread_metadata", "role", "from", "to", "metadata", "metadata_by", "cursor"} <= search
