"""Memory records' read surfaces at the edges of their inputs (MEM-9 half-lives short and long, a forged change
cursor, a preview centuries ahead: answers, never a 500) and their reach (a management key's preview of another
key, INJ-12/PLT-4; every read surface agreeing under a narrowing policy; an unseen record answering like a missing
one, PLT-8)."""

from __future__ import annotations

import csv
import io
from typing import Any

from backend.access.policy import default_policy, writer_policy
from backend.params import encode_cursor
from tests.helpers import assert_error, bearer
from tests.memory.conftest import Mem


def _no_500(response: Any, spec: str, where: str) -> None:
    assert response.status_code != 500, f"{spec}: {where} answered 500 instead of an answer or a PLT-14 error: " \
                                        f"{response.text[:200]}"


def _age(db: Any, record_id: str, days: float) -> None:
    db.execute("UPDATE memory_records SET updated_at = now() - make_interval(secs => %s) WHERE id = %s",
               (days * 86400, record_id))


def test_mem_9_a_short_half_life_decays_an_old_record_to_nothing_on_every_read(mem: Mem, client: Any, db: Any
                                                                                   ) -> None:
    """MEM-9 allows any positive half-life ("fractions allowed"): 0.01 days (about 15 minutes) decays a month-old
    record to 0.5 ** 3000, which PostgreSQL's power() refuses as an underflow, so every read that computes the
    effective confidence fails. The record's effective confidence is simply (about) 0."""
    key = mem.org.make_key(policy=writer_policy(), memory={"decay": {"fact": {"half_life_days": 0.01}}})
    anna = bearer(key["secret"], "anna")
    record = mem.write(anna, "Anna keeps bees in the garden.", tags=["bees"])
    _age(db, record["id"], 30)
    params = {"index_id": mem.index_id}
    for path, extra in [("/memory", {}), ("/memory/stats", {}), ("/memory/recall", {}),
                        ("/memory/by-tag", {"tag": "bees"}), ("/memory/search", {"q": "bees"}),
                        ("/memory", {"min_confidence": "0.1"})]:
        response = client.get(path, params={**params, **extra}, headers=anna)
        _no_500(response, "MEM-9/PLT-14", f"GET {path} {extra}")
        assert response.status_code == 200, response.text
    response = client.get(f"/memory/{record['id']}", headers=anna)
    _no_500(response, "MEM-9/PLT-14", "GET /memory/{id}")
    assert response.json()["effective_confidence"] < 1e-6
    preview = client.post(f"/memory/stores/{mem.index_id}/injection/preview", headers=mem.admin,
                          json={"subject": {"id": "anna"}, "key_id": key["id"], "store_override": True})
    _no_500(preview, "MEM-9/INJ-12", "the injection preview (a turn builds the same block)")


def test_mem_9_a_very_long_half_life_takes_a_min_confidence_filter(mem: Mem, client: Any) -> None:
    """A key may set a very long half-life (1e9 days: "practically never decays"; the schema only asks > 0). Any
    `min_confidence` filter then turns half_life * log2(1/m) days into a Python timedelta, which overflows."""
    key = mem.org.make_key(policy=writer_policy(), memory={"decay": {"fact": {"half_life_days": 1e9}}})
    anna = bearer(key["secret"], "anna")
    mem.write(anna, "Anna keeps bees.")
    for path in ("/memory", "/memory/stats", "/memory/recall", "/memory/expiring"):
        response = client.get(path, params={"index_id": mem.index_id, "min_confidence": "0.5"}, headers=anna)
        _no_500(response, "MEM-9/PLT-14", f"GET {path}?min_confidence=0.5")
    response = client.get("/memory", params={"index_id": mem.index_id, "min_confidence": "0.5", "key_id": key["id"]},
                          headers=mem.admin)
    _no_500(response, "MEM-9/PLT-14", "an administrator's GET /memory?min_confidence=0.5&key_id=…")
    assert [r["text"] for r in response.json()["data"]] == ["Anna keeps bees."]


def test_plt_14_a_change_feed_cursor_with_a_version_past_integer_is_invalid_cursor(mem: Mem, client: Any) -> None:
    """`GET /activity/changes` reads its cursor's version with int() and compares it with an `integer` column:
    a cursor the API never handed out must be 400 `invalid_cursor` (as every other list route answers)."""
    cursor = encode_cursor(["2020-01-01T00:00:00+00:00", "mem_x", 2 ** 40])
    for headers in (mem.admin, mem.org.full):
        response = client.get("/activity/changes", params={"cursor": cursor}, headers=headers)
        _no_500(response, "PLT-14", "GET /activity/changes with a cursor holding version 2**40")
        assert response.status_code == 400 and response.json()["code"] == "invalid_cursor", response.text


def test_inj_12_a_management_key_previews_no_key_that_sees_more_than_it_does(mem: Mem, client: Any) -> None:
    """A `management` key whose policy reaches only Anna's records (and lists only those) previews a turn of
    another key (`key_id`) for Bob and is shown Bob's records: the previewer reads with the named key's policy
    only. No other route lets this key read Bob's records (MEM-6: no route has a wider view than GET /memory;
    PLT-8), and the previewer already refuses a `key_id` whose store the caller does not reach (decisions,
    INJ-12)."""
    mem.write(mem.bob(), "Bob is treated for a heart condition.")
    mem.write(mem.anna(), "Anna likes tea.")
    annas_only = {"indexes": ["*"], "rules": [
        {"id": "anna", "effect": "permit", "kind": "memory_record", "match": {"labels": {"subject": "anna"}}}]}
    narrow = bearer(mem.org.make_key(policy=annas_only)["secret"])
    listed = client.get("/memory", params={"index_id": mem.index_id}, headers=narrow).json()["data"]
    assert [r["text"] for r in listed] == ["Anna likes tea."]  # what this key may read
    turn_key = mem.org.make_key(policy=default_policy(),
                                memory={"injection": {"enabled": True, "index_id": mem.index_id}})
    response = client.post(f"/memory/stores/{mem.index_id}/injection/preview", headers=narrow,
                           json={"subject": {"id": "bob"}, "key_id": turn_key["id"]})
    assert "heart condition" not in response.text, \
        "INJ-12/PLT-8: a management key limited to Anna's records read Bob's record through the preview of " \
        f"another key: {response.status_code} {response.text[:300]}"
    assert_error(response, 403, "key_wider_than_caller", "key_id")
    assert turn_key["id"] in response.json()["message"]
    # A key within its own policy is previewed as before, and so is the caller itself.
    within = mem.org.make_key(policy=annas_only, memory={"injection": {"enabled": True, "index_id": mem.index_id}})
    for key_id in (within["id"], None):
        body = {"subject": {"id": "anna"}, "store_override": True, **({"key_id": key_id} if key_id else {})}
        allowed = client.post(f"/memory/stores/{mem.index_id}/injection/preview", headers=narrow, json=body)
        assert allowed.status_code == 200, allowed.text
        assert "Anna likes tea." in allowed.json()["block"]


def test_plt_8_every_read_surface_agrees_under_a_department_rule_and_a_deny_rule(mem: Mem, client: Any,
                                                                                        db: Any) -> None:
    """Coverage: with a rule that widens (label_among) and one that narrows (deny), list, stats, by-tag, search,
    recall's count, get, history and a management key's export for the person agree, and contested partners she
    may not see stay unnamed (MEM-6, MEM-16)."""
    policy = writer_policy()
    policy["rules"] += [
        {"id": "dept", "effect": "permit", "kind": "memory_record", "actions": ["see"],
         "when": [{"atom": "label_among", "label": "department", "attribute": "department"}]},
        {"id": "no-secret", "effect": "deny", "kind": "memory_record", "actions": ["see"],
         "match": {"labels": {"secret": "yes"}}}]
    key = mem.org.make_key(policy=policy)["secret"]

    def write(headers: dict[str, str], text: str, **fields: Any) -> str:
        return mem.write(headers, text, tags=["t"], **fields)["id"]

    anna = bearer(key, "anna", {"department": ["payroll"]})
    a = write(bearer(key, "anna"), "Anna zebra one.")
    bp = write(bearer(key, "bob"), "Bob zebra payroll.", labels={"department": "payroll"})
    bu = write(bearer(key, "bob"), "Bob zebra private.")
    ss = write(bearer(key), "Shared zebra secret.", labels={"secret": "yes"})
    sp = write(bearer(key), "Shared zebra plain.")
    db.execute("UPDATE memory_records SET contested = true, contested_with = %s WHERE id = %s", (bu, a))
    db.execute("UPDATE memory_records SET contested = true, contested_with = %s WHERE id = %s", (ss, sp))
    want = {a, bp, sp}
    p = {"index_id": mem.index_id}

    def ids(path: str, **extra: Any) -> set[str]:
        response = client.get(path, params={**p, **extra}, headers=anna)
        assert response.status_code == 200, response.text
        return {r["id"] for r in response.json()["data"]}

    assert ids("/memory") == want == ids("/memory/by-tag", tag="t") == ids("/memory/search", q="zebra")
    stats = client.get("/memory/stats", params=p, headers=anna).json()
    assert stats["records"] == 3 and stats["shared"] == 1 and stats["people"] == 2
    assert "3 total" in client.get("/memory/recall", params=p, headers=anna).text
    for rid in (a, sp):
        doc = client.get(f"/memory/{rid}", headers=anna).json()
        assert doc["contested"] and doc["contested_with"] is None, doc
    for rid in (bu, ss):
        assert client.get(f"/memory/{rid}", headers=anna).status_code == 404
        assert client.get(f"/memory/{rid}/history", headers=anna).status_code == 404
    export = client.get("/memory/export", params={**p, "format": "csv"}, headers=anna)
    assert export.status_code == 200, export.text
    rows = list(csv.DictReader(io.StringIO(export.text)))
    assert {r["id"] for r in rows} == want and all(not r["contested_with"] for r in rows)


def test_plt_8_an_unseen_record_answers_exactly_like_a_missing_one(mem: Mem, client: Any) -> None:
    """Coverage: status, code, param and message (id aside) are the same for Bob's record and for an id that does
    not exist, on every by-id route, whatever the body (validation runs before the lookup for both)."""
    bob = mem.write(mem.bob(), "Bob's record.")["id"]
    missing = "mem_01zzzzzzzzzzzzzzzzzzzzzzzz"
    calls = [("GET", "/memory/{id}", None), ("GET", "/memory/{id}/history", None),
             ("PATCH", "/memory/{id}", {"text": "x"}), ("PATCH", "/memory/{id}", {"labels": {"a": 5}}),
             ("PATCH", "/memory/{id}", {"commitment": {"status": "done"}}), ("DELETE", "/memory/{id}", None),
             ("POST", "/memory/{id}/verify", None)]
    for method, path, body in calls:
        answers = []
        for rid in (bob, missing):
            r = client.request(method, path.format(id=rid), headers=mem.anna(), json=body)
            answers.append((r.status_code, r.json().get("code"), r.json().get("param"),
                            r.json().get("message", "").replace(rid, "ID")))
        assert answers[0] == answers[1], f"PLT-8: {method} {path} {body}: {answers}"
    for rid in (bob, missing):
        r = client.post(mem.tool("write"), headers=mem.anna(),
                        json={"arguments": {"type": "fact", "text": "Corrected.", "replaces": rid}})
        assert r.status_code == 404 and r.json()["param"] == "arguments.replaces", r.text


def test_inj_9_a_preview_centuries_ahead_ranks_an_old_episode_without_failing(mem: Mem, client: Any, db: Any) -> None:
    """INJ-9 ranks past sessions by recency, 0.5 ** (age / 30 days): at a preview's `at` centuries ahead the
    exponent is past what PostgreSQL's power() computes (an underflow error); the episode is simply the least
    recent, and still shown."""
    db.execute("""INSERT INTO memory_records (org_id, id, index_id, subject, type, text, norm_hash, confidence,
                  source, episode) VALUES (%s, %s, %s, 'anna', 'episode', 'Planned the move', 'h', 0.8,
                  'extraction', '{"from": "2026-11-01T09:00:00+00:00", "to": "2026-11-01T09:30:00+00:00",
                  "thread_id": "thr_a", "first_item_id": "itm_a"}')""",
               (mem.org.org_id, f"mem_episode_{mem.index_id[-8:]}", mem.index_id))
    settings = client.patch(f"/memory/stores/{mem.index_id}", headers=mem.org.full,
                            json={"injection": {"episodes_limit": 2}})
    assert settings.status_code == 200, settings.text
    preview = client.post(f"/memory/stores/{mem.index_id}/injection/preview", headers=mem.admin,
                          json={"subject": {"id": "anna"}, "at": "2400-01-01T00:00:00Z"})
    _no_500(preview, "INJ-9/PLT-14", "a preview at 2400-01-01 with an episode of 2026")
    assert preview.status_code == 200 and "Planned the move" in preview.json()["block"], preview.text


def test_plt_14_a_tool_argument_far_too_long_is_quoted_by_its_start_in_the_error(mem: Mem, client: Any) -> None:
    """The tool's schema refuses a 200,000-character query; the error names the argument and what is wrong with it,
    quoting the value's start and length rather than the whole of it (jsonschema quotes all 200 KB)."""
    response = client.post(mem.tool("search"), json={"arguments": {"query": "bee " * 50_000}}, headers=mem.anna())
    body = assert_error(response, 422, None, "arguments.query")
    assert "is too long" in body["message"] and "200,002 characters" in body["message"], body["message"][:300]
    assert len(body["message"]) < 400, f"the message quotes {len(body['message']):,} characters"


def test_plt_14_a_filter_repeated_past_its_limit_is_refused_naming_it(mem: Mem, client: Any) -> None:
    """Each repeated filter is a clause of the statement (a thousand `label` filters took seconds to plan); at most
    MAX_FILTERS of each, on the memory and the thread routes, and the limit itself is served."""
    from shared.schemas.common import MAX_FILTERS

    for path, name, value in (("/memory", "label", "team:v{}"), ("/memory", "metadata", "k{}:v"),
                              ("/memory", "tag", "t{}"), ("/threads", "label", "team:v{}"),
                              ("/thread-items", "thread_metadata", "k{}:v")):
        for count, refused in ((MAX_FILTERS, False), (MAX_FILTERS + 1, True)):
            params = [(name, value.format(i)) for i in range(count)] + ([("q", "bees")] if "items" in path else [])
            response = client.get(path, params=params, headers=mem.org.admin)
            if refused:
                assert response.status_code in (400, 422) and response.json()["param"] == name, \
                    (path, name, response.status_code, response.text[:300])
            else:
                assert response.status_code == 200, (path, name, count, response.text[:300])
