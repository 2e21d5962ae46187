"""Who reaches what (PLT-6 … PLT-9, MEM-4 … MEM-19): an access matrix over every memory route."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.helpers import Org, assert_error, bearer
from tests.memory.conftest import Mem, make_index, writer_key

ACTORS = ["anna", "bob", "nobody", "token", "admin", "other"]


@pytest.fixture
def world(mem: Mem, other_org: Org, client: Any, db: Any) -> dict[str, Any]:
    """Anna's, Bob's and a shared record, all tagged `t`, all expiring tomorrow, all saying `marmalade`."""
    records = {}
    for owner, headers in [("anna", mem.anna()), ("bob", mem.bob()), ("shared", mem.nobody)]:
        records[owner] = mem.write(headers, f"{owner} likes marmalade", tags=["t"])
    db.execute("UPDATE memory_records SET expires_at = now() + interval '1 day' WHERE index_id = %s",
               (mem.index_id,))
    headers = {"anna": mem.anna(), "bob": mem.bob(), "nobody": mem.nobody,
               "token": bearer(mem.org.subject_token(mem.key, "anna")), "admin": mem.admin,
               "other": bearer(writer_key(other_org))}
    return {"records": records, "headers": headers}


def seen(response: Any) -> set[str]:
    assert response.status_code == 200, response.text
    return {r["id"] for r in response.json()["data"]}


def test_plt_9_access_matrix_for_reads(mem: Mem, world: dict[str, Any], client: Any) -> None:
    rec, headers = world["records"], world["headers"]
    a, b, s = rec["anna"]["id"], rec["bob"]["id"], rec["shared"]["id"]
    expected = {"anna": {a, s}, "bob": {b, s}, "nobody": {a, b, s}, "token": {a, s}, "admin": {a, b, s},
                "other": set()}
    for actor in ACTORS:
        h = headers[actor]
        want = expected[actor]
        if actor == "other":
            for path in ["/memory", "/memory/expiring", "/memory/by-tag", "/memory/search"]:
                params = {"index_id": mem.index_id, "tag": "t", "q": "marmalade"}
                assert_error(client.get(path, params=params, headers=h), 404, param="index_id")
            assert seen(client.get("/memory", headers=h)) == set()
            assert seen(client.get("/memory/search", params={"q": "marmalade"}, headers=h)) == set()
        else:
            assert seen(client.get("/memory", params={"index_id": mem.index_id}, headers=h)) == want, actor
            assert seen(client.get("/memory/expiring", params={"within": "2d", "index_id": mem.index_id},
                                   headers=h)) == want, actor
            assert seen(client.get("/memory/by-tag", params={"tag": "T", "index_id": mem.index_id},
                                   headers=h)) == want, actor
            assert seen(client.get("/memory/search", params={"q": "marmalade", "index_id": mem.index_id},
                                   headers=h)) == want, actor
        recall = client.get("/memory/recall", params={"index_id": mem.index_id} if actor != "other" else {},
                            headers=h)
        assert recall.status_code == 200, recall.text
        assert {o for o in ("anna", "bob", "shared") if f"{o} likes marmalade" in recall.text} == {
            o for o in ("anna", "bob", "shared") if rec[o]["id"] in want}, actor
        tool = client.post(f"/tools/memory__{mem.index_id}__search/call", json={"arguments": {"query": "marmalade"}},
                           headers=h)
        if actor == "other":
            assert_error(tool, 404, param="name")
        else:
            lines = [line for line in tool.json()["output"].splitlines() if line.startswith("{")]
            assert {json.loads(line)["id"] for line in lines} == want, actor
        for owner, record_id in [("anna", a), ("bob", b), ("shared", s)]:
            for path in [f"/memory/{record_id}", f"/memory/{record_id}/history"]:
                response = client.get(path, headers=h)
                if record_id in want:
                    assert response.status_code == 200, (actor, owner, response.text)
                    assert response.json()["id"] == record_id
                else:
                    assert_error(response, 404)


def test_plt_9_access_matrix_for_writes(mem: Mem, world: dict[str, Any], client: Any, db: Any) -> None:
    headers = world["headers"]
    # (actor, owner) -> expected status for PATCH and DELETE
    change = {
        ("anna", "anna"): 200, ("anna", "bob"): 404, ("anna", "shared"): 403,
        ("bob", "anna"): 404, ("bob", "bob"): 200, ("bob", "shared"): 403,
        ("nobody", "anna"): 200, ("nobody", "bob"): 200, ("nobody", "shared"): 200,
        ("token", "anna"): 200, ("token", "bob"): 404, ("token", "shared"): 403,
        ("admin", "anna"): 200, ("admin", "bob"): 200, ("admin", "shared"): 200,
        ("other", "anna"): 404, ("other", "bob"): 404, ("other", "shared"): 404,
    }
    writers = {"anna": mem.anna(), "bob": mem.bob(), "shared": mem.nobody}
    for (actor, owner), status in change.items():
        record = mem.write(writers[owner], f"{owner} record for {actor}")
        patched = client.patch(f"/memory/{record['id']}", json={"text": "changed"}, headers=headers[actor])
        assert patched.status_code == status, (actor, owner, patched.text)
        if status == 200:
            assert patched.json()["subject"] == record["subject"]
        deleted = client.delete(f"/memory/{record['id']}", headers=headers[actor])
        assert deleted.status_code == (204 if status == 200 else status), (actor, owner, deleted.text)
        exists = db.execute("SELECT text FROM memory_records WHERE id = %s", (record["id"],)).fetchone()
        assert (exists is None) == (status == 200)
        if status != 200:
            assert exists[0] == record["text"]
    denied = db.execute("SELECT count(*) FROM audit_events WHERE outcome = 'denied' AND action IN "
                        "('memory.change', 'memory.delete')").fetchone()[0]
    assert denied >= 6  # every 403 above kept its denied event
    # Writing: owner follows the request; the other organisation cannot reach this index.
    for actor, owner in [("anna", "anna"), ("token", "anna"), ("bob", "bob"), ("nobody", None), ("admin", None)]:
        response = client.post("/memory", json={"index_id": mem.index_id, "type": "fact", "text": "w"},
                               headers=headers[actor])
        assert response.status_code == 201, response.text
        assert response.json()["subject"] == owner
    assert_error(client.post("/memory", json={"index_id": mem.index_id, "type": "fact", "text": "w"},
                             headers=headers["other"]), 404, param="index_id")
    assert_error(client.post("/memory/batch", json={"records": [{"index_id": mem.index_id, "type": "fact",
                                                                 "text": "w"}]}, headers=headers["other"]), 404,
                 param="records[0].index_id")
    assert_error(client.post(f"/tools/memory__{mem.index_id}__write/call",
                             json={"arguments": {"type": "fact", "text": "w"}}, headers=headers["other"]), 404)
    # Verification: administrators of this organisation only.
    anna_record = world["records"]["anna"]["id"]
    for actor in ["anna", "bob", "nobody", "token", "other"]:
        assert_error(client.post(f"/memory/{anna_record}/verify", headers=headers[actor]), 403)
    other_admin = bearer(world["headers"]["other"]["Authorization"].split()[1])  # a key of the other org: 403
    assert_error(client.post(f"/memory/{anna_record}/verify", headers=other_admin), 403)
    assert client.post(f"/memory/{anna_record}/verify", headers=headers["admin"]).status_code == 200


def test_plt_6_memory_capability_is_needed_on_every_route(mem: Mem, client: Any) -> None:
    record = mem.write(mem.nobody, "x")["id"]
    knowledge_only = bearer(mem.org.make_key(capabilities=["knowledge"])["secret"])
    calls = [
        ("POST", "/memory", {"index_id": mem.index_id, "type": "fact", "text": "x"}),
        ("POST", "/memory/batch", {"records": [{"index_id": mem.index_id, "type": "fact", "text": "x"}]}),
        ("GET", "/memory", None), ("GET", f"/memory/{record}", None), ("PATCH", f"/memory/{record}", {}),
        ("DELETE", f"/memory/{record}", None), ("GET", f"/memory/{record}/history", None),
        ("GET", "/memory/expiring?within=7d", None), ("GET", "/memory/recall", None),
        ("GET", "/memory/by-tag?tag=x", None), ("GET", "/memory/search?q=x", None),
        ("POST", f"/memory/{record}/verify", None), ("GET", "/tools?source=memory", None),
        ("POST", f"/tools/memory__{mem.index_id}__search/call", {"arguments": {"query": "x"}}),
    ]
    for method, path, body in calls:
        response = client.request(method, path, json=body, headers=knowledge_only)
        body_out = assert_error(response, 403, code="capability_missing")
        assert "memory" in body_out["message"], (method, path)


def test_plt_7_subject_ids_differing_by_case_or_wildcards_never_collide(mem: Mem, client: Any) -> None:
    people = ["anna", "Anna", "ANNA", "a_b", "a-b", "a%b", "a%", "a_", "a\\b", "a b"]
    made = {p: mem.write(bearer(mem.key, p), f"record of {p}")["id"] for p in people}
    shared = mem.write(mem.nobody, "shared")["id"]
    for person in people:
        assert set(mem.list(bearer(mem.key, person))) == {made[person], shared}, person
        assert set(mem.list(mem.nobody, subject=person)) == {made[person]}, person
        others = [made[p] for p in people if p != person]
        for other in others:
            assert_error(client.get(f"/memory/{other}", headers=bearer(mem.key, person)), 404)
    erased = client.delete("/subjects/a_b", headers=mem.admin)
    assert erased.status_code == 200 and erased.json()["counts"]["memory_records"] == 1
    erased = client.delete("/subjects/a%25", headers=mem.admin)
    assert erased.status_code == 200 and erased.json()["counts"]["memory_records"] == 1
    left = set(mem.list(mem.nobody))
    assert left == {made[p] for p in people if p not in ("a_b", "a%")} | {shared}


def test_plt_2_every_administrator_read_is_audited(mem: Mem, world: dict[str, Any], client: Any, db: Any) -> None:
    a = world["records"]["anna"]["id"]
    admin = mem.admin
    before = db.execute("SELECT coalesce(max(seq), 0) FROM audit_events WHERE org_id = %s",
                        (mem.org.org_id,)).fetchone()[0]
    client.get("/memory", params={"index_id": mem.index_id, "subject": "anna", "q": "marmalade",
                                  "metadata": "customer:anna-secret"}, headers=admin)
    client.get(f"/memory/{a}", headers=admin)
    client.get(f"/memory/{a}/history", headers=admin)
    client.get("/memory/search", params={"q": "marmalade", "index_id": mem.index_id}, headers=admin)
    client.get("/memory/recall", params={"index_id": mem.index_id}, headers=admin)
    client.get("/memory/by-tag", params={"tag": "t", "index_id": mem.index_id}, headers=admin)
    client.get("/memory/expiring", params={"within": "2d", "index_id": mem.index_id}, headers=admin)
    client.post(f"/tools/memory__{mem.index_id}__search/call", json={"arguments": {"query": "marmalade"}},
                headers=admin)
    rows = db.execute("SELECT actor_type, actor_id, action, object_id, detail FROM audit_events "
                      "WHERE org_id = %s AND seq > %s ORDER BY seq", (mem.org.org_id, before)).fetchall()
    routes = [row[4]["route"] for row in rows]
    assert routes == ["GET /memory", "GET /memory/{id}", "GET /memory/{id}/history", "GET /memory/search",
                      "GET /memory/recall", "GET /memory/by-tag", "GET /memory/expiring",
                      "POST /tools/{name}/call"]
    assert all(row[0] == "admin" and row[2] == "memory.read" for row in rows)
    assert rows[0][4]["ids"] == [] and rows[0][4]["count"] == 0  # no record has that metadata
    assert rows[1][3] == a
    assert set(rows[3][4]["ids"]) == {r["id"] for r in world["records"].values()}
    text = json.dumps([row[4] for row in rows])
    assert "anna" not in text and "marmalade" not in text  # the person is a keyed hash, the question is not kept
    assert rows[0][4]["filters"]["subject_hash"] and rows[0][4]["filters"]["metadata"] == ["customer"]
    # A key's reads are not administrator reads.
    client.get("/memory", params={"index_id": mem.index_id}, headers=mem.nobody)
    after = db.execute("SELECT count(*) FROM audit_events WHERE org_id = %s AND seq > %s",
                       (mem.org.org_id, before)).fetchone()[0]
    assert after == len(rows)


def test_plt_12_a_tag_filter_is_audited_only_as_used(mem: Mem, client: Any, db: Any) -> None:
    """Tags are record content and may name a person: an administrator's read keeps only that it filtered by tag."""
    before = db.execute("SELECT coalesce(max(seq), 0) FROM audit_events WHERE org_id = %s",
                        (mem.org.org_id,)).fetchone()[0]
    client.get("/memory", params={"index_id": mem.index_id, "tag": "diagnosis-annavdberg"}, headers=mem.admin)
    by_tag = client.get("/memory/by-tag", params={"tag": "diagnosis-annavdberg", "index_id": mem.index_id},
                        headers=mem.admin)
    assert by_tag.status_code == 200, by_tag.text
    rows = db.execute("SELECT detail FROM audit_events WHERE org_id = %s AND seq > %s ORDER BY seq",
                      (mem.org.org_id, before)).fetchall()
    assert [row[0]["filters"]["tag"] for row in rows] == [True, True]
    assert "annavdberg" not in json.dumps([row[0] for row in rows])


def test_plt_10_an_index_the_policy_does_not_name_is_absent(mem: Mem, client: Any) -> None:
    hidden_index = make_index(mem.org)
    hidden = mem.write(mem.nobody, "in the hidden index", index_id=hidden_index)
    narrow = bearer(mem.org.make_key(policy={"indexes": [mem.index_id], "rules": [
        {"id": "all", "effect": "permit", "kind": "memory_record"},
        {"id": "w", "effect": "permit", "kind": "memory_write"}]})["secret"])
    assert_error(client.get(f"/memory/{hidden['id']}", headers=narrow), 404)
    assert hidden["id"] not in seen(client.get("/memory", headers=narrow))
    assert_error(client.get("/memory", params={"index_id": hidden_index}, headers=narrow), 404, param="index_id")
    tools = {t["index_id"] for t in client.get("/tools", params={"source": "memory"}, headers=narrow).json()["data"]}
    assert tools == {mem.index_id}
