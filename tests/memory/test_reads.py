"""Reading records: filters and paging, decay, expiry, recall, tags and search (MEM-6, MEM-9 … MEM-13)."""

from __future__ import annotations

import math
from typing import Any

import pytest

from backend.access.policy import writer_policy
from tests.helpers import assert_error, bearer
from tests.memory.conftest import Mem


def age(db: Any, record_id: str, days: float, column: str = "updated_at") -> None:
    db.execute(f"UPDATE memory_records SET {column} = now() - make_interval(secs => %s) WHERE id = %s",
               (days * 86400, record_id))


def test_mem_6_every_filter(mem: Mem, client: Any, db: Any) -> None:
    a = mem.write(mem.anna(), "Anna drinks tea every morning.", metadata={"customer": "acme", "n": 5},
                  labels={"department": "payroll"}, tags=["Drinks"], type="preference")
    b = mem.write(mem.bob(), "Bob drinks coffee.", metadata={"customer": "globex"}, tags=["drinks", "bob"])
    s = mem.write(mem.nobody, "The office kitchen has tea and coffee.", labels={"audience": "everyone"},
                  type="note", confidence=0.4)
    expired = mem.write(mem.nobody, "Old notice about tea.", expires_at="2020-01-01T00:00:00Z")
    age(db, a["id"], 10, "created_at")
    nobody = mem.nobody

    def ids(**params: Any) -> set[str]:
        return set(mem.list(nobody, **params))

    assert ids() == {a["id"], b["id"], s["id"]}
    assert ids(type=["preference", "note"]) == {a["id"], s["id"]}
    assert ids(subject="anna") == {a["id"]}
    assert ids(metadata="customer:acme") == {a["id"]}
    assert ids(metadata=["customer:acme", "n:5"]) == {a["id"]}
    assert ids(metadata=["customer:acme", "n:6"]) == set()
    assert ids(metadata="n:1e999") == set() and ids(metadata="n:NaN") == set()
    assert ids(label="department:payroll") == {a["id"]}
    assert ids(label="audience:everyone") == {s["id"]}
    assert ids(tag="DRINKS") == {a["id"], b["id"]}
    assert ids(tag=["drinks", "bob"]) == {b["id"]}
    assert ids(min_confidence=0.5) == {a["id"], b["id"]}
    assert ids(after="2000-01-01T00:00:00Z", before="2001-01-01T00:00:00+01:00") == set()
    five_days_ago = db.execute("SELECT to_char((now() - interval '5 days') AT TIME ZONE 'UTC', "
                               "'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')").fetchone()[0]
    assert ids(before=five_days_ago) == {a["id"]}
    assert ids(after=five_days_ago) == {b["id"], s["id"]}
    assert ids(include_expired="true") == {a["id"], b["id"], s["id"], expired["id"]}
    assert ids(q="tea") == {a["id"], s["id"]}
    assert ids(q='"tea and coffee"') == {s["id"]}
    assert ids(q="tea -kitchen") == {a["id"]}
    assert ids(q="morning or globex") == {a["id"]}
    # The subject filter is for requests that name nobody and for administrators.
    assert_error(client.get("/memory", params={"subject": "bob"}, headers=mem.anna()), 403, param="subject")
    assert set(mem.list(mem.admin, subject="bob")) == {b["id"]}
    for bad, param in [({"after": "2020-01-01T00:00:00"}, "after"), ({"min_confidence": "2"}, "min_confidence"),
                       ({"metadata": "nocolon"}, "metadata"), ({"cursor": "garbage!"}, "cursor"),
                       ({"limit": "0"}, "limit")]:
        response = client.get("/memory", params={"index_id": mem.index_id, **bad}, headers=nobody)
        assert response.status_code in (400, 422), response.text
        assert response.json()["param"] == param


def test_mem_6_paging_and_limit_cap(mem: Mem, client: Any) -> None:
    records = [{"index_id": mem.index_id, "type": "fact", "text": f"fact number {i}"} for i in range(250)]
    assert client.post("/memory/batch", json={"records": records}, headers=mem.nobody).status_code == 201
    first = client.get("/memory", params={"index_id": mem.index_id, "limit": 1000000}, headers=mem.nobody).json()
    assert len(first["data"]) == 200 and first["next_cursor"]
    second = client.get("/memory", params={"index_id": mem.index_id, "limit": 1000000, "cursor": first["next_cursor"]},
                        headers=mem.nobody).json()
    assert len(second["data"]) == 50 and second["next_cursor"] is None
    seen = [r["id"] for r in first["data"] + second["data"]]
    assert len(set(seen)) == 250 and seen == sorted(seen, reverse=True)  # newest first


def test_mem_9_min_confidence_uses_the_effective_value(mem: Mem, client: Any, db: Any) -> None:
    org_url = f"/tenants/{mem.org.org_id}"
    assert client.patch(org_url, json={"memory": {"decay": {"note": {"half_life_days": 1}}}},
                        headers=mem.admin).status_code == 200
    try:
        key = mem.org.make_key(policy=writer_policy(), memory={"decay": {"fact": {"half_life_days": 10}}})["secret"]
        h = bearer(key)
        cases = [("fact", 1.0, 5, True), ("fact", 1.0, 15, False), ("fact", 0.6, 2, True), ("fact", 0.6, 4, False),
                 ("preference", 0.5, 100, True), ("preference", 0.4, 0, False), ("note", 1.0, 0.5, True),
                 ("note", 1.0, 1.5, False), ("fact", 0.9, 1.49, True), ("fact", 0.9, 60, False)]
        made = []
        for type_name, confidence, days, _ in cases:
            record = mem.write(h, f"{type_name} {confidence} {days}", type=type_name, confidence=confidence)
            age(db, record["id"], days)
            made.append(record["id"])
        expected = {rid for rid, case in zip(made, cases, strict=True) if case[3]}
        assert set(mem.list(h, min_confidence=0.5)) == expected
        listed = {r["id"]: r for r in client.get("/memory", params={"index_id": mem.index_id, "limit": 50},
                                                 headers=h).json()["data"]}
        for rid, (type_name, confidence, days, _) in zip(made, cases, strict=True):
            half_life = {"fact": 10, "note": 1}.get(type_name)
            want = confidence * 0.5 ** (days / half_life) if half_life else confidence
            assert math.isclose(listed[rid]["effective_confidence"], want, rel_tol=1e-4), (type_name, days)
            assert listed[rid]["confidence"] == confidence  # decay never changes the stored value
        # Administrators use the organisation's half-lives (no `fact` decay there) unless they name a key.
        admin_view = set(mem.list(mem.admin, min_confidence=0.5))
        assert admin_view == expected | {made[1], made[3], made[9]}
        key_id = client.get("/key", headers=h).json()["id"]
        assert set(mem.list(mem.admin, min_confidence=0.5, key_id=key_id)) == expected
        assert_error(client.get("/memory", params={"key_id": key_id}, headers=h), 400, param="key_id")
        # A PATCH restarts the age; a recall, a read and a verification do not.
        client.get("/memory/recall", params={"index_id": mem.index_id}, headers=h)
        client.post(f"/memory/{made[1]}/verify", headers=mem.admin)
        assert made[1] not in mem.list(h, min_confidence=0.5)
        assert client.patch(f"/memory/{made[1]}", json={}, headers=h).status_code == 200
        assert made[1] in mem.list(h, min_confidence=0.5)
    finally:
        client.patch(org_url, json={"memory": {"decay": {}}}, headers=mem.admin)


def test_mem_9_min_confidence_plan_uses_the_type_and_age_index(mem: Mem, db: Any) -> None:
    """At scale the filter is a range scan per decaying type on (org_id, index_id, type, updated_at)."""
    from sqlalchemy import select
    from sqlalchemy.dialects import postgresql

    from backend.domains.memory.expressions import R, min_confidence_clause

    db.execute(
        "INSERT INTO memory_records (org_id, id, index_id, subject, type, text, norm_hash, confidence, source, "
        "updated_at, created_at) SELECT %(org)s, 'mem_plan' || g, %(idx)s, NULL, "
        "(ARRAY['fact','preference','note','project','context'])[1 + g %% 5], 'text ' || g, md5(g::text), "
        "CASE WHEN g %% 5 = 4 AND g %% 1000 <> 4 THEN 0.3 ELSE 0.9 END, 'api', "
        "now() - make_interval(days => 30 + g %% 700), now() FROM generate_series(1, 20000) g",
        {"org": mem.org.org_id, "idx": mem.index_id})
    db.execute("ANALYZE memory_records")
    half_lives = {"fact": 10.0, "preference": 30.0, "note": 5.0, "project": 20.0}
    query = select(R.c.id).where(R.c.org_id == mem.org.org_id, R.c.index_id == mem.index_id,
                                 min_confidence_clause(half_lives, 0.5))
    sql = str(query.compile(dialect=postgresql.dialect(), compile_kwargs={"literal_binds": True}))
    plan = "\n".join(row[0] for row in db.execute("EXPLAIN " + sql).fetchall())
    assert "ix_memory_records_org_id_index_id_type_updated_at" in plan, plan
    assert "Seq Scan" not in plan, plan
    found = {row[0] for row in db.execute(sql).fetchall()}
    # Every row is at least 30 days old, so no decaying type reaches 0.5; of `context` (no half-life) only the
    # rows stored with 0.9 do.
    assert found == {f"mem_plan{g}" for g in range(4, 20001, 1000)}


def test_mem_10_expiry_and_the_expiring_window(mem: Mem, client: Any, db: Any) -> None:
    soon = mem.write(mem.anna(), "Meeting topic: Q3 roadmap.", type="context")
    days3 = mem.write(mem.anna(), "Parking permit renewal.")
    days10 = mem.write(mem.anna(), "Conference hotel booking.")
    gone = mem.write(mem.anna(), "Yesterday's standup notes.")
    never = mem.write(mem.anna(), "Birthday in May.")
    bobs = mem.write(mem.bob(), "Bob's train ticket.")
    for record, interval in [(soon, "2 hours"), (days3, "3 days"), (days10, "10 days"), (gone, "-1 hour"),
                             (bobs, "1 hour")]:
        db.execute(f"UPDATE memory_records SET expires_at = now() + interval '{interval}' WHERE id = %s",
                   (record["id"],))

    def expiring(within: str, headers: dict[str, str] | None = None) -> list[str]:
        response = client.get("/memory/expiring", params={"within": within, "index_id": mem.index_id},
                              headers=headers or mem.anna())
        return mem.ids(response)

    assert expiring("1d") == [soon["id"]]
    assert expiring("24h") == [soon["id"]]
    assert expiring("7d") == [soon["id"], days3["id"]]
    assert expiring("2w") == [soon["id"], days3["id"], days10["id"]]
    assert expiring("2w", mem.nobody) == [bobs["id"], soon["id"], days3["id"], days10["id"]]
    for bad in ["7", "7m", "d", "-1d", "0d", "1.5d"]:
        assert_error(client.get("/memory/expiring", params={"within": bad}, headers=mem.anna()), 422, param="within")
    assert gone["id"] not in mem.list(mem.anna())
    assert gone["id"] in mem.list(mem.anna(), include_expired="true")
    recall = client.get("/memory/recall", params={"index_id": mem.index_id}, headers=mem.anna()).text
    assert "standup" not in recall and "Birthday" in recall
    search = client.get("/memory/search", params={"q": "standup", "index_id": mem.index_id}, headers=mem.anna())
    assert mem.ids(search) == []
    assert db.execute("SELECT count(*) FROM memory_records WHERE id = %s", (gone["id"],)).fetchone()[0] == 1
    assert never["id"] in mem.list(mem.anna())


def test_mem_10_recall_and_search_never_show_expired_or_replaced_records(mem: Mem, client: Any) -> None:
    """Expired records are left out of recall and search whatever the query says; only lists take
    `include_expired` (MEM-10). Recall and search show the records in force, so a replaced record is left out too,
    and asking for either there is 422 naming the parameter. By-tag is a list (`GET /memory` with tags)."""
    import json

    live = mem.write(mem.anna(), "Quokka sightings are on Tuesdays.", tags=["zoo"])
    gone = mem.write(mem.anna(), "Quokka feeding was on Mondays.", tags=["zoo"], expires_at="2020-01-01T00:00:00Z")
    tool = mem.tool("write")
    old = json.loads(client.post(tool, json={"arguments": {"type": "fact", "text": "The quokka keeper is Piet."}},
                                 headers=mem.anna()).json()["output"])["memory_id"]
    fix = json.loads(client.post(tool, json={"arguments": {"type": "fact", "text": "The quokka keeper is Joke.",
                                                           "replaces": old}}, headers=mem.anna()).json()["output"])
    in_force = {live["id"], fix["memory_id"]}
    where = {"index_id": mem.index_id}
    for flag in ("include_expired", "include_replaced"):
        for route, params in (("/memory/recall", where), ("/memory/search", {**where, "q": "quokka"})):
            assert_error(client.get(route, params={**params, flag: "true"}, headers=mem.anna()), 422, param=flag)
            assert_error(client.get(route, params={**params, flag: "true"}, headers=mem.admin), 422, param=flag)
        recall = client.get("/memory/recall", params={**where, flag: "false"}, headers=mem.anna())
        assert recall.status_code == 200, recall.text
        assert "Tuesdays" in recall.text and "Joke" in recall.text
        assert "Mondays" not in recall.text and "Piet" not in recall.text
        assert "Memories: 2 total" in recall.text
        found = client.get("/memory/search", params={**where, "q": "quokka", flag: "false"}, headers=mem.anna())
        assert set(mem.ids(found)) == in_force
    by_tag = client.get("/memory/by-tag", params={**where, "tag": "zoo"}, headers=mem.anna())
    assert mem.ids(by_tag) == [live["id"]]
    by_tag = client.get("/memory/by-tag", params={**where, "tag": "zoo", "include_expired": "true"}, headers=mem.anna())
    assert set(mem.ids(by_tag)) == {live["id"], gone["id"]}


def test_mem_11_recall_text_format_and_order(mem: Mem, client: Any, db: Any) -> None:
    identity = mem.write(mem.anna(), "Anna de Vries", type="identity", key="user_name", priority="critical",
                         tags=["person", "identity"])
    client.post(f"/memory/{identity['id']}/verify", headers=mem.admin)
    style = mem.write(mem.anna(), "Prefers concise answers", type="preference", key="communication_style",
                      priority="high", tags=["communication"])
    project = mem.write(mem.anna(), "Moving to Delft\nin March", type="project", priority="high")
    low = mem.write(mem.anna(), "Likes jazz", priority="low")
    shared = mem.write(mem.nobody, "Office closes at six", type="fact")
    mem.write(mem.bob(), "Bob's secret")
    age(db, style["id"], 2)
    age(db, project["id"], 1)
    age(db, low["id"], 0.1)
    response = client.get("/memory/recall", params={"index_id": mem.index_id}, headers=mem.anna())
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    assert response.text == (
        "Owner: anna (with the shared records)\n"
        "Memories: 5 total (1 verified, 4 unverified)\n"
        "\n"
        "[001] identity (CRITICAL) [verified]\n"
        "  user_name\n"
        "  Anna de Vries\n"
        "  Tags: person, identity\n"
        "\n"
        "[002] project (HIGH) [unverified]\n"
        "  Moving to Delft\n"
        "  in March\n"
        "\n"
        "[003] preference (HIGH) [unverified]\n"
        "  communication_style\n"
        "  Prefers concise answers\n"
        "  Tags: communication\n"
        "\n"
        "[004] fact (NORMAL) [unverified]\n"
        "  Office closes at six\n"
        "\n"
        "[005] fact (LOW) [unverified]\n"
        "  Likes jazz\n"
    )
    counted = db.execute("SELECT id, recall_count FROM memory_records WHERE index_id = %s AND subject IS DISTINCT "
                         "FROM 'bob'", (mem.index_id,)).fetchall()
    assert {rid for rid, n in counted if n == 1} == {identity["id"], style["id"], project["id"], low["id"],
                                                     shared["id"]}
    limited = client.get("/memory/recall", params={"index_id": mem.index_id, "limit": 2}, headers=mem.anna()).text
    assert "Memories: 5 total" in limited and "[002]" in limited and "[003]" not in limited


def test_mem_12_tags_are_lowercase_and_matched_case_insensitively(mem: Mem, client: Any) -> None:
    docker = mem.write(mem.anna(), "Runs Docker Swarm at home.", tags=["Docker", "HomeLab"])
    mem.write(mem.anna(), "Uses Podman at work.", tags=["podman"])
    assert docker["tags"] == ["docker", "homelab"]
    for tag in ["docker", "DOCKER", "Docker"]:
        response = client.get("/memory/by-tag", params={"tag": tag, "index_id": mem.index_id}, headers=mem.anna())
        assert mem.ids(response) == [docker["id"]]
    assert_error(client.get("/memory/by-tag", headers=mem.anna()), 422, param="tag")
    both = client.get("/memory/search", params={"q": "swarm", "tag": "DOCKER", "index_id": mem.index_id},
                      headers=mem.anna())
    assert mem.ids(both) == [docker["id"]]


def test_mem_13_search_results_scores_and_confidence_pct(mem: Mem, client: Any, db: Any) -> None:
    exact = mem.write(mem.anna(), "Prefers email over phone for invoices.", confidence=0.826)
    partial = mem.write(mem.anna(), "Email address changed last year.", confidence=0.824, type="note")
    mem.write(mem.anna(), "Likes phone calls on Fridays.")
    mem.write(mem.bob(), "Bob prefers email over phone too.")
    age(db, partial["id"], 30, "created_at")
    response = client.get("/memory/search", params={"q": "email phone", "index_id": mem.index_id},
                          headers=mem.anna())
    hits = response.json()["data"]
    # Plain words are alternatives: the record with both comes first, then those with one; never Bob's.
    assert hits[0]["id"] == exact["id"] and len(hits) == 3
    assert hits[0]["confidence_pct"] == "83%" and hits[0]["score"] > hits[1]["score"] > 0
    assert hits[0]["contested"] is False
    either = client.get("/memory/search", params={"q": "email", "index_id": mem.index_id}, headers=mem.anna())
    by_id = {h["id"]: h for h in either.json()["data"]}
    assert set(by_id) == {exact["id"], partial["id"]}
    assert by_id[partial["id"]]["confidence_pct"] == "82%"
    typed = client.get("/memory/search", params={"q": "email", "type": "note", "index_id": mem.index_id},
                       headers=mem.anna())
    assert mem.ids(typed) == [partial["id"]]
    recent = client.get("/memory/search", params={"q": "email", "after": exact["created_at"],
                                                  "index_id": mem.index_id}, headers=mem.anna())
    assert mem.ids(recent) == [exact["id"]]
    assert_error(client.get("/memory/search", params={"index_id": mem.index_id}, headers=mem.anna()), 422, param="q")


@pytest.mark.parametrize("value, shown", [(0.824, "82%"), (0.826, "83%"), (1.0, "100%"), (0.0, "0%"), (0.004, "0%"),
                                          (0.006, "1%")])
def test_mem_13_confidence_pct_rounds_half_up(value: float, shown: str) -> None:
    from backend.domains.memory.rules import confidence_pct

    assert confidence_pct(value) == shown
