"""GET /threads/stats: counts of exactly the threads GET /threads lists, and their messages per role (THR-2)."""

from __future__ import annotations

from typing import Any

from tests.helpers import assert_error, bearer
from tests.threads.util import msg, new_thread


def stats(client: Any, headers: dict[str, str], **params: Any) -> dict[str, Any]:
    response = client.get("/threads/stats", params=params, headers=headers)
    assert response.status_code == 200, response.text
    return dict(response.json())


def test_thr_stats_count_what_the_list_shows(client, org, other_org, db):
    key = org.make_key(name="manager")["secret"]  # every capability, management included
    nobody, anna, bob = bearer(key), bearer(key, "anna"), bearer(key, "bob")
    new_thread(client, anna, metadata={"kanaal": "chat"}, items=[msg("user", "a"), msg("assistant", "b")])
    new_thread(client, anna, items=[msg("user", "c")])
    new_thread(client, bob, items=[msg("user", "d"), msg("developer", "e"),
                                   {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"}])
    new_thread(client, nobody, items=[msg("assistant", "f")])
    deleted = new_thread(client, nobody, items=[msg("user", "gone")])
    assert client.delete(f"/threads/{deleted['id']}", headers=nobody).status_code == 204

    everything = stats(client, nobody)
    assert everything == {"threads": 4, "shared": 1, "people": 2,
                          "messages": {"user": 3, "assistant": 2, "developer": 1}}
    assert everything["threads"] == len(client.get("/threads", headers=nobody).json()["data"])
    assert stats(client, nobody, metadata="kanaal:chat")["threads"] == 1
    assert stats(client, nobody, subject="bob")["messages"] == {"user": 1, "assistant": 0, "developer": 1}
    assert stats(client, nobody, subject="")["threads"] == 1  # shared threads only

    # Anna counts her own and the shared thread, never Bob's, and no number of owners.
    assert stats(client, anna) == {"threads": 3, "shared": 1, "people": None,
                                   "messages": {"user": 2, "assistant": 2, "developer": 0}}
    assert stats(client, org.admin)["threads"] == 4
    assert stats(client, other_org.admin)["threads"] == 0
    # Analytics of the organisation: administrators and management keys only.
    plain = org.make_key(capabilities=["threads"], name="plain")["secret"]
    assert_error(client.get("/threads/stats", headers=bearer(plain)), 403)
    assert_error(client.get("/threads/stats", headers=bearer(org.subject_token(key, "anna"))), 403,
                 code="subject_token_forbidden")
    assert_error(client.get("/threads/stats", params={"subject": "bob"}, headers=anna), 400, code="invalid_filter")
    read = db.execute("SELECT detail FROM audit_events WHERE action = 'thread.read' AND org_id = %s "
                      "AND detail->>'route' = 'GET /threads/stats'", (org.org_id,)).fetchall()
    assert len(read) == 1  # the administrator's count, audited; keys' counts are not reads of an administrator
    # PLT-2: with the number of threads it counted.
    assert read[0][0] == {"route": "GET /threads/stats", "filters": {}, "count": 4}
