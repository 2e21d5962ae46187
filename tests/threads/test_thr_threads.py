"""THR-1, THR-2, THR-3, THR-5: threads, items, subjects, message counts, metadata and labels."""

from __future__ import annotations

from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine

from tests.helpers import as_subject, assert_error, bearer
from tests.threads.util import append, msg, new_thread

ITEMS: list[dict[str, Any]] = [
    msg("developer", "Je bent een behulpzame assistent."),
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Hoe laat is het?"},
                                                     {"type": "input_image", "image_url": "https://x.test/a.png"}]},
    {"type": "reasoning", "summary": [{"type": "summary_text", "text": "thinking"}]},
    {"type": "function_call", "call_id": "call_1", "name": "clock", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "call_1", "name": "clock", "output": "12:00"},
    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Twaalf uur."}]},
    {"type": "refusal", "refusal": "Dat zeg ik niet."},
    msg("user", "Dank je"),
]


def test_thr_1_2_3_create_read_items_and_message_counts_per_role(client, org):
    headers = bearer(org.key, "anna")
    thread = new_thread(client, headers, metadata={"dossier": "4711"}, labels={"department": "payroll"},
                        items=ITEMS)
    assert thread["id"].startswith("thr_")
    assert thread["subject"] == "anna"
    assert thread["metadata"] == {"dossier": "4711"}
    assert thread["labels"] == {"department": "payroll"}
    # Only message items count; the tool call, its result, reasoning and the refusal do not.
    assert thread["message_counts"] == {"user": 2, "assistant": 1, "developer": 1}
    stored = thread["items"]
    assert [i["position"] for i in stored] == list(range(1, 9))
    assert [i["type"] for i in stored] == [i["type"] for i in ITEMS]
    for item in stored:
        assert item["id"].startswith("itm_") and item["response_id"] is None and item["subject"] == "anna"
    assert stored[3]["arguments"] == "{}" and stored[3]["status"] == "completed" and stored[3]["namespace"] is None
    assert stored[4] | {} == stored[4] and stored[4]["output"] == "12:00" and stored[4]["artifacts"] == []
    assert stored[1]["content"][1] == {"type": "input_image", "image_url": "https://x.test/a.png", "file_id": None,
                                       "detail": "auto"}

    got = client.get(f"/threads/{thread['id']}", headers=headers).json()
    assert got["message_counts"] == {"user": 2, "assistant": 1, "developer": 1}
    page = client.get(f"/threads/{thread['id']}/items", headers=headers).json()
    assert set(page) == {"items", "next_cursor"}
    assert page["items"] == stored and page["next_cursor"] is None
    one = client.get(f"/threads/{thread['id']}/items/{stored[6]['id']}", headers=headers).json()
    assert one == stored[6] and one["refusal"] == "Dat zeg ik niet."

    # Paging by position, both orders.
    first = client.get(f"/threads/{thread['id']}/items?limit=3", headers=headers).json()
    assert [i["position"] for i in first["items"]] == [1, 2, 3]
    second = client.get(f"/threads/{thread['id']}/items?limit=3&cursor={first['next_cursor']}",
                        headers=headers).json()
    assert [i["position"] for i in second["items"]] == [4, 5, 6]
    newest = client.get(f"/threads/{thread['id']}/items?limit=2&order=desc", headers=headers).json()
    assert [i["position"] for i in newest["items"]] == [8, 7]

    more = append(client, headers, thread["id"], msg("assistant", "Graag gedaan"))
    assert more[0]["position"] == 9
    assert client.get(f"/threads/{thread['id']}", headers=headers).json()["message_counts"]["assistant"] == 2


def test_thr_2_subject_token_sees_own_id_and_null_on_others(client, org):
    key = org.make_key(name="app")
    anna_token = org.subject_token(key["secret"], "anna")
    own = new_thread(client, bearer(anna_token))
    shared = new_thread(client, bearer(key["secret"]))
    bobs = new_thread(client, bearer(key["secret"], "bob"))
    assert own["subject"] == "anna" and shared["subject"] is None and bobs["subject"] == "bob"

    listed = {t["id"]: t for t in client.get("/threads", headers=bearer(anna_token)).json()["data"]}
    assert set(listed) == {own["id"], shared["id"]}  # Bob's thread is not hers (PLT-9 defaults)
    assert listed[own["id"]]["subject"] == "anna"
    assert listed[shared["id"]]["subject"] is None

    # A key sees the owner on every thread, and naming nobody reaches all of them.
    by_key = {t["id"]: t["subject"] for t in client.get("/threads", headers=bearer(key["secret"])).json()["data"]}
    assert by_key == {own["id"]: "anna", shared["id"]: None, bobs["id"]: "bob"}
    assert client.get(f"/threads/{bobs['id']}", headers=bearer(anna_token)).status_code == 404


def test_thr_2_group_thread_owner_is_null_for_another_subject_token(client, org, settings):
    """A thread Bob may read but does not own shows him `subject: null` even where the key would show Anna."""
    from tests.threads.util import group_policy

    client.app.state.settings = settings.with_overrides(threads_group_reach_by_rule=True)
    key = org.make_key(name="group", policy=group_policy())
    anna, bob = org.subject_token(key["secret"], "anna"), org.subject_token(key["secret"], "bob")
    thread = new_thread(client, bearer(anna), labels={"participants": ["anna", "bob"]})
    seen = client.get(f"/threads/{thread['id']}", headers=bearer(bob)).json()
    assert seen["subject"] is None
    assert client.get(f"/threads/{thread['id']}", headers=bearer(key["secret"])).json()["subject"] == "anna"


def test_thr_2_message_counts_of_a_page_in_one_statement(client, org):
    headers = bearer(org.key)
    for n in range(5):
        new_thread(client, headers, items=[msg("user", f"vraag {n}")] * (n + 1))
    statements: list[str] = []

    def count(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        statements.append(statement)

    event.listen(Engine, "before_cursor_execute", count)
    try:
        page = client.get("/threads", headers=headers).json()
    finally:
        event.remove(Engine, "before_cursor_execute", count)
    assert sorted(t["message_counts"]["user"] for t in page["data"]) == [1, 2, 3, 4, 5]
    thread_reads = [s for s in statements if "thread_items" in s or "FROM threads" in s]
    assert len(thread_reads) == 1, thread_reads


def test_thr_3_items_are_immutable(client, org):
    headers = bearer(org.key)
    thread = new_thread(client, headers, items=[msg("user", "vast")])
    item_id = thread["items"][0]["id"]
    for method in ("PATCH", "DELETE", "PUT"):
        response = client.request(method, f"/threads/{thread['id']}/items/{item_id}", json={"content": "x"},
                                  headers=headers)
        assert_error(response, 405)
    assert client.get(f"/threads/{thread['id']}/items/{item_id}", headers=headers).json()["content"] == "vast"


def test_thr_3_input_audio_is_refused_on_items(client, org, db):
    headers = bearer(org.key)
    audio = {"type": "message", "role": "user",
             "content": [{"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}}]}
    assert_error(client.post("/threads", json={"items": [msg("user", "hoi"), audio]}, headers=headers), 422,
                 param="items")
    thread = new_thread(client, headers)
    assert_error(client.post(f"/threads/{thread['id']}/items", json={"items": [audio]}, headers=headers), 422,
                 param="items")
    # Nothing half-written: the refused POST /threads created no thread, and no item was added.
    assert db.execute("SELECT count(*) FROM threads").fetchone()[0] == 1
    assert db.execute("SELECT count(*) FROM thread_items").fetchone()[0] == 0


def test_thr_3_bad_items_are_422_with_a_path(client, org):
    headers = bearer(org.key)
    thread = new_thread(client, headers)
    url = f"/threads/{thread['id']}/items"
    assert_error(client.post(url, json={"items": [{"type": "message", "role": "system", "content": "x"}]},
                             headers=headers), 422)
    assert_error(client.post(url, json={"items": [{"type": "web_search"}]}, headers=headers), 422)
    body = assert_error(client.post(url, json={"items": [msg("user", "x") | {"id": "itm_mine"}]}, headers=headers),
                        422)
    assert body["param"] == "items[0].id"


def test_thr_5_metadata_limits_and_filters(client, org):
    headers = bearer(org.key)
    assert_error(client.post("/threads", json={"metadata": {f"k{i}": "v" for i in range(17)}}, headers=headers),
                 422, param="metadata")
    assert_error(client.post("/threads", json={"metadata": {"k" * 65: "v"}}, headers=headers), 422)
    assert_error(client.post("/threads", json={"metadata": {"k": "v" * 513}}, headers=headers), 422,
                 param="metadata.k")
    assert_error(client.post("/threads", json={"metadata": {"k": 1}}, headers=headers), 422)
    limit = new_thread(client, headers, metadata={f"k{i}": "v" * 512 for i in range(15)} | {"k" * 64: "x"})
    assert len(limit["metadata"]) == 16

    a = new_thread(client, headers, metadata={"dossier": "4711", "kanaal": "support"})
    b = new_thread(client, headers, metadata={"dossier": "4711", "kanaal": "mail"})
    new_thread(client, headers, metadata={"dossier": "12:30"})
    ids = lambda q: [t["id"] for t in client.get(f"/threads?{q}", headers=headers).json()["data"]]  # noqa: E731
    assert ids("metadata=dossier:4711") == [b["id"], a["id"]]
    assert ids("metadata=dossier:4711&metadata=kanaal:support") == [a["id"]]
    assert len(ids("metadata=dossier:12:30")) == 1  # the value may itself hold a colon
    assert_error(client.get("/threads?metadata=nocolon", headers=headers), 400, param="metadata")

    patched = client.patch(f"/threads/{a['id']}", json={"metadata": {"kanaal": "chat"}}, headers=headers).json()
    assert patched["metadata"] == {"kanaal": "chat"}  # PATCH replaces the metadata document whole
    assert ids("metadata=dossier:4711") == [b["id"]]


def test_thr_1_labels_filters_paging_and_subject_filter(client, org):
    headers = bearer(org.key)
    payroll = new_thread(client, headers, labels={"department": "payroll"})
    both = new_thread(client, headers, labels={"department": ["payroll", "sales"]})
    annas = new_thread(client, bearer(org.key, "anna"))
    ids = lambda q: [t["id"] for t in client.get(f"/threads?{q}", headers=headers).json()["data"]]  # noqa: E731
    assert ids("label=department:payroll") == [both["id"], payroll["id"]]
    assert ids("label=department:sales") == [both["id"]]
    assert ids("subject=anna") == [annas["id"]]
    assert ids("subject=") == [both["id"], payroll["id"]]
    assert_error(client.get("/threads?subject=anna", headers=bearer(org.key, "anna")), 400, param="subject")
    page1 = client.get("/threads?limit=2", headers=headers).json()
    assert [t["id"] for t in page1["data"]] == [annas["id"], both["id"]]
    page2 = client.get(f"/threads?limit=2&cursor={page1['next_cursor']}", headers=headers).json()
    assert [t["id"] for t in page2["data"]] == [payroll["id"]] and page2["next_cursor"] is None
    assert ids("order=asc") == [payroll["id"], both["id"], annas["id"]]

    assert_error(client.post("/threads", json={"labels": {"subject": "bob"}}, headers=headers), 422,
                 param="labels.subject")
    assert_error(client.post("/threads", json={"labels": {"department": ""}}, headers=headers), 422)
    relabelled = client.patch(f"/threads/{payroll['id']}", json={"labels": {"department": "sales"}}, headers=headers)
    assert relabelled.json()["labels"] == {"department": "sales"}


def test_thr_1_vocabulary_limits_thread_labels(client, org):
    response = client.put(f"/tenants/{org.org_id}/vocabulary", json={"thread": {"department": {}}}, headers=org.admin)
    assert response.status_code == 200, response.text
    headers = bearer(org.key)
    new_thread(client, headers, labels={"department": "payroll"})
    assert_error(client.post("/threads", json={"labels": {"project": "x"}}, headers=headers), 422,
                 code="label_not_in_vocabulary")


def test_thr_1_unknown_thread_is_plain_404_and_unknown_fields_422(client, org):
    headers = bearer(org.key)
    body = assert_error(client.get("/threads/thr_nope", headers=headers), 404, code="not_found")
    assert "threads` capability" not in body["message"]
    assert_error(client.post("/threads", json={"title": "x"}, headers=headers), 422, param="title")
    thread = new_thread(client, headers)
    assert_error(client.get(f"/threads/{thread['id']}/items/itm_nope", headers=headers), 404)


def test_thr_1_policy_without_write_refuses_opening_and_appending(client, org, db):
    see_only = {"indexes": ["*"], "rules": [{"id": "see", "effect": "permit", "kind": "thread", "actions": ["see"]}]}
    key = org.make_key(name="reader", policy=see_only)
    shared = new_thread(client, bearer(org.key), items=[msg("user", "hallo")])
    reader = bearer(key["secret"], "anna")
    assert client.get(f"/threads/{shared['id']}", headers=reader).status_code == 200
    assert_error(client.post("/threads", json={}, headers=reader), 403, code="policy_denied")
    assert_error(client.post(f"/threads/{shared['id']}/items", json={"items": [msg("user", "x")]}, headers=reader),
                 403, code="policy_denied")
    assert_error(client.patch(f"/threads/{shared['id']}", json={"metadata": {}}, headers=reader), 403)
    assert_error(client.delete(f"/threads/{shared['id']}", headers=reader), 403)
    denied = db.execute("SELECT count(*) FROM audit_events WHERE outcome = 'denied'").fetchone()[0]
    assert denied == 4


def test_thr_1_subject_header_and_token_agree(client, org):
    key = org.make_key(name="app")
    token = org.subject_token(key["secret"], "anna")
    new_thread(client, bearer(token) | as_subject("anna"))
    assert_error(client.post("/threads", json={}, headers=bearer(token) | as_subject("bob")), 400,
                 code="conflicting_subjects")
