"""PLT-13 and PLT-10: indexes, and an index the policy does not name being absent."""

from __future__ import annotations

from backend.access.policy import default_policy
from tests.helpers import assert_error, bearer


def test_plt_13_create_list_get_delete(org, client, db):
    created = client.post("/indexes", headers=org.full,
                          json={"name": "books", "embedding": {"provider": "hashing", "model": "h", "dimensions": 64}})
    assert created.status_code == 201, created.text
    index = created.json()
    assert index["id"].startswith("idx_") and index["embedding"]["dimensions"] == 64
    assert client.get(f"/indexes/{index['id']}", headers=org.full).json() == index
    assert [i["id"] for i in client.get("/indexes", headers=org.full).json()["data"]] == [index["id"]]
    assert_error(client.post("/indexes", headers=org.full, json={"name": "books"}), 409, "name_taken", "name")
    assert client.delete(f"/indexes/{index['id']}", headers=org.full).status_code == 204
    assert_error(client.get(f"/indexes/{index['id']}", headers=org.full), 404)
    actions = [r[0] for r in db.execute("SELECT action FROM audit_events WHERE object_id = %s ORDER BY seq",
                                        (index["id"],))]
    assert actions == ["index.created", "index.deleted"]


def test_plt_10_an_index_the_policy_does_not_name_is_404(org, client):
    a = client.post("/indexes", headers=org.full, json={"name": "a"}).json()
    b = client.post("/indexes", headers=org.full, json={"name": "b"}).json()
    policy = default_policy()
    policy["indexes"] = [a["id"]]
    narrow = org.make_key(["knowledge"], policy=policy)
    headers = bearer(narrow["secret"])
    assert [i["id"] for i in client.get("/indexes", headers=headers).json()["data"]] == [a["id"]]
    assert client.get(f"/indexes/{a['id']}", headers=headers).status_code == 200
    absent = assert_error(client.get(f"/indexes/{b['id']}", headers=headers), 404)
    missing = assert_error(client.get("/indexes/idx_doesnotexist", headers=headers), 404)
    assert absent["code"] == missing["code"]
    assert_error(client.delete(f"/indexes/{b['id']}", headers=headers), 404)


def test_plt_13_other_organisation_never_sees_indexes(org, other_org, client):
    mine = client.post("/indexes", headers=org.full, json={"name": "mine"}).json()
    assert client.get("/indexes", headers=other_org.full).json()["data"] == []
    assert_error(client.get(f"/indexes/{mine['id']}", headers=other_org.full), 404)
    assert_error(client.get(f"/indexes/{mine['id']}", headers=other_org.admin), 404)


def test_plt_13_needs_knowledge(org, client):
    no_knowledge = org.make_key(["threads"])
    assert_error(client.post("/indexes", headers=bearer(no_knowledge["secret"]), json={"name": "x"}), 403,
                 "capability_missing")


def test_plt_13_bad_embedding_config_is_422(org, client):
    response = client.post("/indexes", headers=org.full,
                           json={"name": "x", "embedding": {"provider": "magic", "model": "m", "dimensions": 8}})
    assert_error(response, 422, param="embedding.provider")
    response = client.post("/indexes", headers=org.full,
                           json={"name": "x", "embedding": {"provider": "hashing", "model": "m", "dimensions": 0}})
    assert_error(response, 422, param="embedding.dimensions")


def test_plt_14_an_embedding_server_address_with_a_control_character_is_422_not_a_failing_search(org, client):
    """Found by schemathesis: an index accepted `base_url` "http://\\n…", and every search of it then failed with
    500 when the SDK refused the address. It is refused where it is given, on creation and on change."""
    for url in ("http://\nexample.test/v1", "ftp://example.test/v1", "http:// example.test", "example.test"):
        embedding = {"provider": "openai_compatible", "model": "m", "dimensions": 8, "base_url": url}
        assert_error(client.post("/indexes", headers=org.full, json={"name": "x", "embedding": embedding}),
                     422, param="embedding.base_url")
    created = client.post("/indexes", headers=org.full, json={"name": "x"})
    assert created.status_code == 201, created.text
    embedding = {"provider": "openai_compatible", "model": "m", "dimensions": 8, "base_url": "http://a\tb/v1"}
    assert_error(client.patch(f"/indexes/{created.json()['id']}", headers=org.full, json={"embedding": embedding}),
                 422, param="embedding.base_url")
    good = {"provider": "openai_compatible", "model": "m", "dimensions": 8, "base_url": "http://127.0.0.1:9/v1"}
    assert client.post("/indexes", headers=org.full, json={"name": "y", "embedding": good}).status_code == 201


def test_plt_10_a_key_limited_to_some_indexes_learns_no_other_index_name(org, client):
    """Index names are unique across the organisation, so naming an index is for credentials that reach every
    index: a key whose policy lists indexes gets the same 403 whether or not the name is taken elsewhere."""
    mine = client.post("/indexes", headers=org.full, json={"name": "mine"}).json()
    client.post("/indexes", headers=org.full, json={"name": "payroll-secret"})
    policy = default_policy()
    policy["indexes"] = [mine["id"]]
    narrow = bearer(org.make_key(["knowledge"], policy=policy)["secret"])
    answers = []
    for name in ("payroll-secret", "never-used"):
        answers.append(assert_error(client.post("/indexes", headers=narrow, json={"name": name}), 403,
                                    "index_naming_needs_every_index", "name"))
        answers.append(assert_error(client.patch(f"/indexes/{mine['id']}", headers=narrow, json={"name": name}),
                                    403, "index_naming_needs_every_index", "name"))
    assert answers[0]["message"] == answers[2]["message"] and answers[1]["message"] == answers[3]["message"]
    assert all("payroll-secret" not in a["message"] for a in answers)
    assert [i["name"] for i in client.get("/indexes", headers=org.full).json()["data"]] == ["mine", "payroll-secret"]
    # What needs no name still works: the same name again, and its embedding setting.
    same = client.patch(f"/indexes/{mine['id']}", headers=narrow,
                        json={"name": "mine", "embedding": {"provider": "hashing", "model": "h", "dimensions": 64}})
    assert same.status_code == 200 and same.json()["embedding"]["dimensions"] == 64, same.text


def _ungranted_locks(db) -> int:
    """Sessions of this test's database waiting for a lock."""
    return int(db.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND "
                          "wait_event_type = 'Lock'").fetchone()[0])


def _one_after_another_at_once(client, db, org, calls):
    """Run the calls so that each is under way before the one before it commits: the organisation's audit lock
    (taken after an index is written) is held until the last one waits too."""
    import threading

    import psycopg

    answers: dict[int, object] = {}
    holder = psycopg.connect(db.info.dsn)
    holder.execute("SELECT pg_advisory_xact_lock(hashtextextended('audit:' || %s, 0))", (org.org_id,))
    threads = []
    try:
        for n, (method, path, body) in enumerate(calls, start=1):
            def call(n=n, method=method, path=path, body=body):
                answers[n] = getattr(client, method)(path, json=body, headers=org.full)
            threads.append(threading.Thread(target=call))
            threads[-1].start()
            for _ in range(200):
                if _ungranted_locks(db) >= n:
                    break
                threading.Event().wait(0.05)
            assert _ungranted_locks(db) >= n, f"call {n} never waited"
    finally:
        holder.rollback()
        holder.close()
    for thread in threads:
        thread.join(30)
    return [answers[n] for n in range(1, len(calls) + 1)]


def test_plt_13_the_same_name_twice_at_once_is_409_not_500(org, client, db):
    """Two creates (or renames) of one name at the same moment: the second gets 409 `name_taken`, not the
    database's unique violation as a 500, and nothing of it is kept."""
    first, second = _one_after_another_at_once(client, db, org, [("post", "/indexes", {"name": "support"})] * 2)
    assert first.status_code == 201, first.text
    assert_error(second, 409, "name_taken", "name")
    x = client.post("/indexes", headers=org.full, json={"name": "x"}).json()
    y = client.post("/indexes", headers=org.full, json={"name": "y"}).json()
    first, second = _one_after_another_at_once(client, db, org, [("patch", f"/indexes/{x['id']}", {"name": "z"}),
                                                                 ("patch", f"/indexes/{y['id']}", {"name": "z"})])
    assert first.status_code == 200 and first.json()["name"] == "z", first.text
    assert_error(second, 409, "name_taken", "name")
    names = sorted(i["name"] for i in client.get("/indexes", headers=org.full).json()["data"])
    assert names == ["support", "y", "z"]
    actions = [r[0] for r in db.execute("SELECT action FROM audit_events WHERE action LIKE 'index.%' ORDER BY seq")]
    assert actions == ["index.created"] * 3 + ["index.updated"]
