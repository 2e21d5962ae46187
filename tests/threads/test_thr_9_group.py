"""THR-9, THR-10: group threads opened by a `participants` rule, only where the deployment allows it."""

from __future__ import annotations

import pytest

from tests.helpers import assert_error, bearer
from tests.threads.util import GROUP_RULE, append, group_policy, msg, new_thread


@pytest.fixture
def group_on(client, settings):
    client.app.state.settings = settings.with_overrides(threads_group_reach_by_rule=True)


def test_thr_9_setting_off_opens_nothing(client, org):
    key = org.make_key(name="group", policy=group_policy())
    anna, bob = (bearer(org.subject_token(key["secret"], who)) for who in ("anna", "bob"))
    thread = new_thread(client, anna, labels={"participants": ["anna", "bob"]})
    assert_error(client.get(f"/threads/{thread['id']}", headers=bob), 404)
    assert client.get("/threads", headers=bob).json()["data"] == []


def test_thr_9_10_participants_read_write_until_removed(client, org, group_on):
    key = org.make_key(name="group", policy=group_policy())
    anna, bob, carol = (bearer(org.subject_token(key["secret"], who)) for who in ("anna", "bob", "carol"))
    thread = new_thread(client, anna, labels={"participants": ["anna", "bob"]},
                        items=[msg("user", "Zullen we de verhuizing plannen?")])
    url = f"/threads/{thread['id']}"

    assert [t["id"] for t in client.get("/threads", headers=bob).json()["data"]] == [thread["id"]]
    bobs_items = append(client, bob, thread["id"], msg("user", "Ja, ik huur een busje."))
    assert bobs_items[0]["subject"] == "bob"  # THR-10: items name their writer
    items = client.get(f"{url}/items", headers=anna).json()["items"]
    assert [i["subject"] for i in items] == ["anna", "bob"]  # every reader sees who wrote what
    assert client.get(url, headers=bearer(key["secret"])).json()["subject"] == "anna"  # the thread stays Anna's
    assert [h["thread_id"] for h in client.get("/thread-items?q=busje", headers=bob).json()["data"]] == [thread["id"]]
    client.put(f"{url}/state", json={"state": {"step": "busje"}}, headers=bob)
    relabel = client.patch(url, json={"labels": {"participants": ["anna", "bob"], "topic": "verhuizing"}},
                           headers=bob)
    assert relabel.status_code == 200, relabel.text
    assert_error(client.delete(url, headers=bob), 403)  # deleting needs a rule that names `delete`
    assert_error(client.get(url, headers=carol), 404)

    # Removing Bob ends his access at his next request.
    assert client.patch(url, json={"labels": {"participants": ["anna"]}}, headers=anna).status_code == 200
    assert_error(client.get(url, headers=bob), 404)
    assert_error(client.post(f"{url}/items", json={"items": [msg("user", "nog iets")]}, headers=bob), 404)
    assert client.get("/thread-items?q=busje", headers=bob).json()["data"] == []
    assert client.get("/threads", headers=bob).json()["data"] == []


def test_thr_9_see_only_rule_reads_without_writing(client, org, group_on):
    policy = group_policy()
    policy["rules"][-1] = GROUP_RULE | {"actions": ["see"]}
    key = org.make_key(name="readers", policy=policy)
    anna, bob = (bearer(org.subject_token(key["secret"], who)) for who in ("anna", "bob"))
    thread = new_thread(client, anna, labels={"participants": ["bob"]})
    assert client.get(f"/threads/{thread['id']}", headers=bob).status_code == 200
    assert_error(client.post(f"/threads/{thread['id']}/items", json={"items": [msg("user", "x")]}, headers=bob), 403,
                 code="policy_denied")


def test_thr_9_shared_thread_is_read_only_unless_the_rule_names_her(client, org, group_on):
    key = org.make_key(name="group", policy=group_policy())
    bob, carol = (bearer(org.subject_token(key["secret"], who)) for who in ("bob", "carol"))
    shared = new_thread(client, bearer(key["secret"]), labels={"participants": ["bob"]})
    items_url = f"/threads/{shared['id']}/items"
    assert client.get(f"/threads/{shared['id']}", headers=carol).status_code == 200
    assert_error(client.post(items_url, json={"items": [msg("user", "x")]}, headers=carol), 403)
    assert append(client, bob, shared["id"], msg("user", "ik mag"))[0]["subject"] == "bob"
    plain = new_thread(client, bearer(key["secret"]))
    assert_error(client.post(f"/threads/{plain['id']}/items", json={"items": [msg("user", "x")]}, headers=bob), 403)


def test_thr_9_writable_labels_limit_who_may_be_added(client, org, group_on):
    policy = group_policy(writable_labels={"participants": {"self": True, "values": ["bob"],
                                                            "attribute": "team"}})
    key = org.make_key(name="limited", policy=policy)
    anna = bearer(org.subject_token(key["secret"], "anna", {"team": ["dave"]}))
    thread = new_thread(client, anna, labels={"participants": ["anna", "bob", "dave"]})
    assert_error(client.post("/threads", json={"labels": {"participants": ["anna", "carol"]}}, headers=anna), 403,
                 code="policy_denied")
    assert_error(client.patch(f"/threads/{thread['id']}", json={"labels": {"participants": ["anna", "carol"]}},
                              headers=anna), 403)
    # Removing someone needs no permission to write her; a request naming nobody may name anyone.
    assert client.patch(f"/threads/{thread['id']}", json={"labels": {"participants": ["anna"]}},
                        headers=anna).status_code == 200
    assert client.patch(f"/threads/{thread['id']}", json={"labels": {"participants": ["anna", "carol"]}},
                        headers=bearer(key["secret"])).status_code == 200


def test_thr_7_9_a_removed_participant_s_search_no_longer_reaches_the_thread_s_days(client, org, group_on, db):
    key = org.make_key(name="group", policy=group_policy())
    anna, bob = (bearer(org.subject_token(key["secret"], who)) for who in ("anna", "bob"))
    group = new_thread(client, anna, labels={"participants": ["anna", "bob"]}, items=[msg("user", "oude verhuizing")])
    db.execute("UPDATE thread_items SET created_at = now() - interval '20 days' WHERE id = %s",
               (group["items"][0]["id"],))
    new_thread(client, bob, items=[msg("user", "nieuwe verhuizing")])

    def bobs_search(**params: str) -> dict:
        response = client.get("/thread-items", params={"q": "verhuizing", **params}, headers=bob)
        assert response.status_code == 200, response.text
        return dict(response.json())

    assert bobs_search()["next_cursor"] is not None  # a participant pages back into the group thread
    assert client.patch(f"/threads/{group['id']}", json={"labels": {"participants": ["anna"]}},
                        headers=anna).status_code == 200
    assert bobs_search()["next_cursor"] is None  # removed: its days no longer show in his slices
    assert_error(client.get("/thread-items", params={"q": "verhuizing", "thread_id": group["id"]}, headers=bob),
                 404, param="thread_id")
