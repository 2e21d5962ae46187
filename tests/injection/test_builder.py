"""INJ-4 … INJ-12 against the database: who gets what, filters, reasons, recall counts, the previewer route."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime

from backend.access.policy import default_policy
from backend.access.scope import build_scope
from backend.db.engine import make_engine, make_sessionmaker
from backend.db.tenant import use_org
from backend.domains.injection import service as injection
from tests.helpers import as_request, assert_error, bearer
from tests.injection.test_block import WORKED_BLOCK


def _index(client, org, name="support"):
    return client.post("/indexes", headers=org.full, json={"name": name}).json()["id"]


def _write(client, org, index_id, subject=None, **body):
    headers = bearer(org.key, subject=subject) if subject else org.full
    response = client.post("/memory", headers=headers, json={"index_id": index_id, **body})
    assert response.status_code == 201, response.text
    return response.json()["id"]


def _preview(client, org, index_id, subject=None, **extra):
    body = {"subject": {"id": subject} if subject else None, **extra}
    response = client.post(f"/memory/stores/{index_id}/injection/preview", headers=org.admin, json=body)
    assert response.status_code == 200, response.text
    return response.json()


def _worked_store(client, org, db):
    index_id = _index(client, org)
    ids = {
        "bank": _write(client, org, index_id, "anna", type="commitment", text="Call the bank back",
                       commitment={"due_at": "2026-12-04T09:00:00+00:00", "promised_to": "bank"}),
        "q4": _write(client, org, index_id, None, type="commitment", text="Send the Q4 report", confidence=0.9,
                     commitment={"due_at": "2026-12-10T17:00:00+00:00", "promised_to": "finance"}),
        "dutch": _write(client, org, index_id, "anna", type="behaviour", text="Answer in Dutch"),
        "booking": _write(client, org, index_id, "anna", type="behaviour", text="Ask before booking"),
        "rex": _write(client, org, index_id, "anna", type="fact", text="Has a dog named Rex", confidence=0.9),
        "mornings": _write(client, org, index_id, "anna", type="preference", text="Prefers mornings",
                           confidence=0.82),
        "expenses": _write(client, org, index_id, None, type="fact", text="Expense claims go to finance by the 25th"),
        "tea": _write(client, org, index_id, "bob", type="preference", text="Bob likes tea"),
    }
    db.execute("UPDATE memory_records SET created_at = now() - interval '2 days' WHERE id = %s", (ids["dutch"],))
    db.execute("UPDATE memory_records SET contested = true WHERE id = %s", (ids["rex"],))
    return index_id, ids


def test_inj_worked_example_through_the_previewer(org, client, db):
    index_id, ids = _worked_store(client, org, db)
    anna = _preview(client, org, index_id, "anna")
    assert anna["block"] == WORKED_BLOCK
    assert anna["trace"]["estimated_tokens"] == 176
    assert (anna["trace"]["dropped_by_count"], anna["trace"]["dropped_by_budget"]) == (0, 0)
    assert ids["tea"] not in anna["trace"]["injected_ids"]
    nobody = _preview(client, org, index_id)
    assert nobody["block"] == (
        "[commitments]\n"
        '{"type":"commitment","confidence":"90%","text":"Send the Q4 report","due_at":"2026-12-10T17:00:00+00:00",'
        '"promised_to":"finance"}\n'
        "[organisation]\n"
        '{"type":"fact","confidence":"100%","text":"Expense claims go to finance by the 25th"}')


def test_inj_12_preview_is_audited_changes_no_recall_count_and_is_refused_to_others(org, client, db):
    index_id, _ = _worked_store(client, org, db)
    _preview(client, org, index_id, "anna")
    counts = {r[0]: r[1] for r in db.execute("SELECT id, recall_count FROM memory_records")}
    assert set(counts.values()) == {0}
    events = client.get(f"/audit?action=injection.preview&object_id={index_id}", headers=org.admin).json()["data"]
    assert len(events) == 1 and events[0]["detail"]["injected"] == 7
    token = org.subject_token(org.key, "anna")
    assert_error(client.post(f"/memory/stores/{index_id}/injection/preview", headers=bearer(token), json={}), 403)
    plain = org.make_key(["knowledge", "memory"])
    assert_error(client.post(f"/memory/stores/{index_id}/injection/preview", headers=bearer(plain["secret"]),
                             json={}), 403, "capability_missing")
    assert_error(client.post("/memory/stores/idx_nope/injection/preview", headers=org.admin, json={}), 404)


def test_plt_7_a_key_naming_a_person_cannot_preview_another_persons_block(org, client, db):
    """The previewer is the organisation's route: a management key naming Anna in X-Core-Subject is refused,
    whatever person the body names, and shows no record (before, it built Bob's block for her)."""
    index_id, ids = _worked_store(client, org, db)
    url = f"/memory/stores/{index_id}/injection/preview"
    for body in ({"subject": {"id": "bob"}, "store_override": True}, {"subject": {"id": "anna"}}, {}):
        refused = assert_error(client.post(url, headers=bearer(org.key, "anna"), json=body), 403, "subject_named",
                               "X-Core-Subject")
        assert "without naming a person" in refused["message"]
        assert "block" not in refused and "Bob likes tea" not in json.dumps(refused)
    assert db.execute("SELECT count(*) FROM audit_events WHERE action = 'injection.preview'").fetchone()[0] == 0
    # The same key naming nobody previews Bob's block, as the organisation's management may.
    bob = client.post(url, headers=org.full, json={"subject": {"id": "bob"}, "store_override": True})
    assert bob.status_code == 200, bob.text
    assert ids["tea"] in bob.json()["trace"]["injected_ids"]


def test_inj_4_a_turn_bumps_recall_counts_of_what_it_injected(org, client, db, settings, database_url):
    index_id, ids = _worked_store(client, org, db)
    key = org.make_key(["knowledge", "memory"], memory={"injection": {"index_id": index_id}})

    async def turn(ctx) -> list[str]:
        built = await injection.for_turn(ctx, agent_block=None, turn_input="bank")
        return built.block.injected_ids if built.block else []

    injected = as_request(database_url, settings, key["secret"], "anna", turn)
    assert len(injected) == 7
    counts = {r[0]: r[1] for r in db.execute("SELECT id, recall_count FROM memory_records")}
    assert {i for i, n in counts.items() if n == 1} == set(injected)
    assert counts[ids["tea"]] == 0


def test_inj_7_types_metadata_and_min_confidence_narrow_every_section(org, client, db):
    index_id, ids = _worked_store(client, org, db)
    facts = org.make_key(["knowledge", "memory"], memory={"injection": {"index_id": index_id, "types": ["fact"]}})
    block = _preview(client, org, index_id, "anna", key_id=facts["id"])["block"]
    assert "[commitments]" not in block and "[behaviour]" not in block and "preference" not in block
    assert "Has a dog named Rex" in block and "Expense claims" in block
    confident = org.make_key(["knowledge", "memory"],
                             memory={"injection": {"index_id": index_id, "min_confidence": 0.95}})
    result = _preview(client, org, index_id, "anna", key_id=confident["id"])
    assert "Send the Q4 report" not in result["block"] and "Prefers mornings" not in result["block"]
    reasons = {x["id"]: x["reason"] for x in result["trace"]["left_out"]}
    assert reasons[ids["q4"]] == "below_min_confidence" and reasons[ids["rex"]] == "below_min_confidence"
    client.patch(f"/memory/{ids['expenses']}", headers=org.full, json={"metadata": {"team": "finance"}})
    tagged = org.make_key(["knowledge", "memory"],
                          memory={"injection": {"index_id": index_id, "metadata": {"team": "finance"}}})
    only = _preview(client, org, index_id, "anna", key_id=tagged["id"])
    assert only["trace"]["injected_ids"] == [ids["expenses"]]
    assert {x["id"]: x["reason"] for x in only["trace"]["left_out"]}[ids["rex"]] == "filtered_by_metadata"


def test_inj_7_expired_and_replaced_are_never_injected(org, client, db):
    index_id = _index(client, org)
    old = _write(client, org, index_id, "anna", type="fact", text="Lives in Utrecht")
    db.execute("UPDATE memory_records SET expires_at = now() - interval '1 hour' WHERE id = %s", (old,))
    result = _preview(client, org, index_id, "anna")
    assert result["block"] == ""
    assert result["trace"]["reason"] == "no_records"
    assert {x["id"]: x["reason"] for x in result["trace"]["left_out"]} == {old: "expired"}


def test_inj_5_behaviour_never_shared_never_for_nobody_newest_first_max_ten(org, client, db):
    index_id = _index(client, org)
    for i in range(12):
        rid = _write(client, org, index_id, "anna", type="behaviour", text=f"rule {i}")
        db.execute("UPDATE memory_records SET created_at = now() - make_interval(mins => %s) WHERE id = %s",
                   (100 - i, rid))
    _write(client, org, index_id, None, type="behaviour", text="shared rule")
    anna = _preview(client, org, index_id, "anna")
    lines = anna["block"].split("\n")
    assert lines[0] == "[behaviour]" and len(lines) == 11
    assert '"text":"rule 11"' in lines[1] and '"text":"rule 2"' in lines[10]
    assert "shared rule" not in anna["block"]
    assert anna["trace"]["dropped_by_count"] == 2
    assert _preview(client, org, index_id)["block"] == ""


def test_inj_9_episodes_and_lessons_follow_types_and_episodes_limit(org, client, db):
    index_id = _index(client, org)
    _write(client, org, index_id, "anna", type="lesson", text="Check the calendar first")
    db.execute("""INSERT INTO memory_records (org_id, id, index_id, subject, type, text, norm_hash, confidence,
                  source, episode) VALUES (%s, 'mem_episode1', %s, 'anna', 'episode', 'Planned the move', 'h', 0.8,
                  'extraction', '{"from": "2026-11-01T09:00:00+00:00", "to": "2026-11-01T09:30:00+00:00",
                  "thread_id": "thr_a", "first_item_id": "itm_a"}')""", (org.org_id, index_id))
    assert "past_sessions" not in _preview(client, org, index_id, "anna")["block"]
    client.patch(f"/memory/stores/{index_id}", headers=org.full, json={"injection": {"episodes_limit": 2}})
    block = _preview(client, org, index_id, "anna", input="the move")["block"]
    assert block.endswith('[past_sessions]\n{"type":"episode","confidence":"80%","from":"2026-11-01T09:00:00+00:00",'
                          '"to":"2026-11-01T09:30:00+00:00","thread_id":"thr_a","first_item_id":"itm_a",'
                          '"text":"Planned the move"}')
    assert '"type":"lesson"' in block
    facts_only = org.make_key(["knowledge", "memory"], memory={"injection": {"index_id": index_id,
                                                                               "types": ["fact"]}})
    assert _preview(client, org, index_id, "anna", key_id=facts_only["id"])["block"] == ""
    assert _preview(client, org, index_id, None)["block"] == ""  # her episodes are hers alone


def test_inj_6_instants_render_in_utc_with_plus_zero_whatever_form_they_are_stored_in(org, client, db):
    """Extraction stores an episode's `from`/`to` with `Z` and commitments store `due_at` with `Z`; a line shows
    each instant in UTC with `+00:00`, another offset converted."""
    from backend.domains.extraction.episodes import _instant as extraction_instant

    index_id = _index(client, org)
    started = extraction_instant(datetime(2026, 11, 1, 9, 0, 0, 250000, tzinfo=UTC))
    ended = extraction_instant(datetime(2026, 11, 1, 9, 30, tzinfo=UTC))
    assert (started, ended) == ("2026-11-01T09:00:00.250000Z", "2026-11-01T09:30:00Z")  # the form extraction writes
    for rid, when in (("mem_episode_z", {"from": started, "to": ended}),
                      ("mem_episode_cet", {"from": "2026-11-02T10:00:00+01:00", "to": "2026-11-02T10:45:00+01:00"})):
        db.execute("""INSERT INTO memory_records (org_id, id, index_id, subject, type, text, norm_hash, confidence,
                      source, episode) VALUES (%s, %s, %s, 'anna', 'episode', %s, %s, 0.8, 'extraction', %s)""",
                   (org.org_id, rid, index_id, f"Planned the move {rid}", rid,
                    json.dumps({**when, "thread_id": "thr_a", "first_item_id": "itm_a"})))
    due = _write(client, org, index_id, "anna", type="commitment", text="Call the bank back",
                 commitment={"due_at": "2026-12-04T10:00:00+01:00", "promised_to": "bank"})
    stored = db.execute("SELECT commitment->>'due_at' FROM memory_records WHERE id = %s", (due,)).fetchone()
    assert stored == ("2026-12-04T09:00:00Z",)
    client.patch(f"/memory/stores/{index_id}", headers=org.full, json={"injection": {"episodes_limit": 2}})
    lines = _preview(client, org, index_id, "anna", input="the move")["block"].split("\n")
    assert ('{"type":"commitment","confidence":"100%","text":"Call the bank back",'
            '"due_at":"2026-12-04T09:00:00+00:00","promised_to":"bank"}') in lines
    assert ('{"type":"episode","confidence":"80%","from":"2026-11-01T09:00:00.250000+00:00",'
            '"to":"2026-11-01T09:30:00+00:00","thread_id":"thr_a","first_item_id":"itm_a",'
            '"text":"Planned the move mem_episode_z"}') in lines
    assert ('{"type":"episode","confidence":"80%","from":"2026-11-02T09:00:00+00:00",'
            '"to":"2026-11-02T09:45:00+00:00","thread_id":"thr_a","first_item_id":"itm_a",'
            '"text":"Planned the move mem_episode_cet"}') in lines


def test_inj_10_a_store_budget_of_zero_injects_nothing(org, client, db):
    """0 is a budget like any other (the schema allows it), not "unset": nothing fits, the ceiling does not apply."""
    index_id, ids = _worked_store(client, org, db)
    response = client.patch(f"/memory/stores/{index_id}", headers=org.full, json={"injection": {"budget_tokens": 0}})
    assert response.status_code == 200, response.text
    assert response.json()["injection"]["budget_tokens"] == 0
    result = _preview(client, org, index_id, "anna")
    trace = result["trace"]
    assert result["block"] == ""
    assert (trace["budget_tokens"], trace["estimated_tokens"], trace["injected_ids"]) == (0, 0, [])
    assert trace["reason"] == "nothing_fits_budget"
    assert trace["dropped_by_budget"] == 7 and trace["dropped_by_count"] == 0
    budget_dropped = {x["id"] for x in trace["left_out"] if x["reason"] == "dropped_by_budget"}
    assert budget_dropped == set(ids.values()) - {ids["tea"]}


def test_inj_2_disabled_block_and_unnamed_store_inject_nothing_silently(org, client, db):
    index_id, _ = _worked_store(client, org, db)
    off = org.make_key(["knowledge", "memory"], memory={"injection": {"index_id": index_id, "enabled": False}})
    result = _preview(client, org, index_id, "anna", key_id=off["id"])
    assert result["block"] == "" and result["trace"]["reason"] == "disabled"
    other = _index(client, org, "other")
    policy = default_policy()
    policy["indexes"] = [other]
    narrow = org.make_key(["knowledge", "memory"], policy=policy, memory={"injection": {"index_id": index_id}})
    result = _preview(client, org, index_id, "anna", key_id=narrow["id"])
    assert result["block"] == "" and result["trace"]["reason"] == "index_not_named"


def test_inj_8_relevance_ranking_orders_by_the_turn_input(org, client, db):
    index_id = _index(client, org)
    _write(client, org, index_id, "anna", type="fact", text="Likes hiking in the Alps", confidence=0.6)
    _write(client, org, index_id, "anna", type="fact", text="Works as a nurse", confidence=0.9)
    by_confidence = _preview(client, org, index_id, "anna", input="hiking trip")["block"]
    assert by_confidence.index("nurse") < by_confidence.index("hiking")
    client.patch(f"/memory/stores/{index_id}", headers=org.full, json={"injection": {"rank": "relevance"}})
    by_relevance = _preview(client, org, index_id, "anna", input="hiking trip")["block"]
    assert by_relevance.index("hiking") < by_relevance.index("nurse")


def test_inj_8_relevance_is_the_vector_similarity_when_the_store_embeds(org, client, db):
    """INJ-8: on a store that embeds, records are ordered by their vector's similarity to the input, words or
    not; a record without a vector of the index's setting (not embedded yet, or by an older model) is ranked by
    its full-text rank instead, which is in [0, 1) like a clamped similarity."""
    from backend.providers.embeddings import HashingEmbeddings

    embedding = {"provider": "hashing", "model": "hashing", "dimensions": 64}
    response = client.post("/indexes", headers=org.full, json={"name": "embedded", "embedding": embedding})
    assert response.status_code == 201, response.text
    index_id = response.json()["id"]
    ids = {name: _write(client, org, index_id, "anna", type="fact", text=text, confidence=0.8) for name, text in (
        ("closest", "Owns a red bicycle"), ("wordy", "Loves a hiking trip, every hiking trip"),
        ("unembedded", "Planned a hiking trip"), ("unrelated", "Works as a nurse"),
        ("old_model", "Went on a hiking trip"))}
    turn_input = "hiking trip"
    query = HashingEmbeddings(64).embed_one(turn_input)
    other = [1.0 if n == 0 else 0.0 for n in range(64)]  # made orthogonal to the query, then mixed in
    other = [o - query[0] * q for o, q in zip(other, query, strict=True)]
    norm = sum(o * o for o in other) ** 0.5
    near = [0.9 * q + (1 - 0.9 ** 2) ** 0.5 * o / norm for q, o in zip(query, other, strict=True)]
    for name, vector in (("closest", query), ("wordy", near), ("unrelated", [-x for x in query])):
        db.execute("UPDATE memory_records SET embedding = %s::vector WHERE id = %s", (str(vector), ids[name]))
    db.execute("UPDATE memory_records SET embedding = NULL, embedding_model = NULL WHERE id = %s",
               (ids["unembedded"],))
    db.execute("UPDATE memory_records SET embedding_model = 'hashing/old/64' WHERE id = %s", (ids["old_model"],))
    for rank in ("relevance", "blend"):  # equal confidences: blend orders as relevance does
        changed = client.patch(f"/memory/stores/{index_id}", headers=org.full, json={"injection": {"rank": rank}})
        assert changed.status_code == 200, changed.text
        order = _preview(client, org, index_id, "anna", input=turn_input)["trace"]["injected_ids"]
        # Similarity 1.0 before 0.9 although only the second shares the input's words (0.7·sim + 0.3·words had
        # put it first); the records without a current vector by their words, above the opposite vector (0).
        assert order.index(ids["closest"]) < order.index(ids["wordy"]), rank
        for name in ("unembedded", "old_model"):
            assert order.index(ids[name]) < order.index(ids["unrelated"]), (rank, name)


def test_inj_13_confidence_floor_gives_exactly_the_full_ranking(org, client, db, database_url, monkeypatch):
    """The index-range shortcut (a stored-confidence floor) must pick the same top records as sorting them all."""
    import random

    from backend.domains.injection import repository as repo
    from backend.domains.memory import decay

    monkeypatch.setattr(repo, "HEAD", 40)  # a head smaller than the store, so the floor really cuts

    index_id = _index(client, org)
    client.patch(f"/tenants/{org.org_id}", headers=org.admin,
                 json={"memory": {"decay": {"fact": {"half_life_days": 5}, "preference": {"half_life_days": 40}}}})
    rng = random.Random(7)
    for n in range(600):
        db.execute("""INSERT INTO memory_records (org_id, id, index_id, subject, type, text, norm_hash, confidence,
                      source, updated_at) VALUES (%s, %s, %s, %s, %s, 'x', 'h', %s, 'api',
                      now() - make_interval(secs => %s))""",
                   (org.org_id, f"mem_{n:05d}", index_id, rng.choice(["anna", None, None]),
                    rng.choice(["fact", "preference", "note"]), rng.random(), rng.random() * 86400 * 60))
    principal_org = db.execute("SELECT memory_decay FROM orgs WHERE id = %s", (org.org_id,)).fetchone()[0]
    half_lives = decay.half_lives({"memory_decay": principal_org}, None)
    from backend.access.actor import Actor
    from backend.access.principal import Principal
    from backend.access.subjects import Subject

    key = {"id": "key_x", "org_id": org.org_id, "policy": default_policy(), "capabilities": ["memory"], "memory": {}}
    principal = Principal("key", org.org_id, Actor("key", "key_x"), frozenset({"memory"}), Subject("anna"), key=key)
    scope = build_scope(principal, None)
    sel = repo.Selection(index_id, "anna", [], {}, None)

    async def fetch(bound: int) -> dict[str, list[str]]:
        engine = make_engine(database_url, pool_size=1)
        async with make_sessionmaker(engine)() as session:
            await use_org(session, org.org_id)  # row-level security: as the turn's context sets it
            found = await repo.candidates(session, scope, half_lives, sel,
                                          {"about_this_person": bound, "organisation": bound},
                                          repo.Ranking("confidence", None, None))
        await engine.dispose()
        return {s: [r["id"] for r in rows] for s, rows in found.items()}

    def naive(owner_sql: str, bound: int) -> list[str]:
        age = "extract(epoch FROM now() - updated_at) / 86400"
        eff = (f"CASE WHEN type = 'fact' THEN confidence * power(0.5, {age} / 5)"
               f" WHEN type = 'preference' THEN confidence * power(0.5, {age} / 40) ELSE confidence END")
        rows = db.execute(f"SELECT id FROM memory_records WHERE index_id = %s AND {owner_sql} "
                          f"ORDER BY {eff} DESC, recall_count DESC, id ASC LIMIT %s", (index_id, bound)).fetchall()
        return [r[0] for r in rows]

    for bound in (1, 7, 70, 400):
        got = asyncio.run(fetch(bound))
        assert got["about_this_person"] == naive("subject = 'anna'", bound)
        assert got["organisation"] == naive("subject IS NULL", bound)


def test_inj_13_commitments_read_as_two_ranges_give_exactly_the_full_ranking(org, client, db, database_url):
    """Her open commitments and the shared ones are read as two due-ordered index ranges (migration 0006); the
    section must equal sorting all of them: soonest due first, no due last, then confidence, then id."""
    import json
    import random

    from backend.access.actor import Actor
    from backend.access.principal import Principal
    from backend.access.subjects import Subject
    from backend.domains.injection import repository as repo

    index_id = _index(client, org)
    rng = random.Random(11)
    dues = [f"2026-12-0{d}T09:00:00Z" for d in range(1, 6)] + ["2026-12-03T11:00:00+02:00", None]
    for n in range(300):
        due = rng.choice(dues)  # few distinct times: many ties, broken by confidence and id
        commitment = {"status": rng.choice(["open", "open", "open", "done"]), "due_at": due, "promised_to": None}
        db.execute("""INSERT INTO memory_records (org_id, id, index_id, subject, type, text, norm_hash, confidence,
                      source, commitment) VALUES (%s, %s, %s, %s, 'commitment', 'x', 'h', %s, 'api', %s::jsonb)""",
                   (org.org_id, f"mem_{n:05d}", index_id, rng.choice(["anna", "bob", None]),
                    rng.choice([0.5, 0.7, 0.9]), json.dumps(commitment)))
    key = {"id": "key_x", "org_id": org.org_id, "policy": default_policy(), "capabilities": ["memory"], "memory": {}}

    async def fetch(person: str | None, bound: int) -> list[str]:
        principal = Principal("key", org.org_id, Actor("key", "key_x"), frozenset({"memory"}),
                              Subject(person) if person else None, key=key)
        engine = make_engine(database_url, pool_size=1)
        async with make_sessionmaker(engine)() as session:
            await use_org(session, org.org_id)  # row-level security: as the turn's context sets it
            found = await repo.candidates(session, build_scope(principal, None), {},
                                          repo.Selection(index_id, person, [], {}, None), {"commitments": bound},
                                          repo.Ranking("confidence", None, None))
        await engine.dispose()
        return [r["id"] for r in found["commitments"]]

    def naive(owner_sql: str, bound: int) -> list[str]:
        rows = db.execute(f"SELECT id FROM memory_records WHERE index_id = %s AND {owner_sql} "
                          "AND commitment ->> 'status' = 'open' ORDER BY (commitment ->> 'due_at')::timestamptz "
                          "ASC NULLS LAST, confidence DESC, id ASC LIMIT %s", (index_id, bound)).fetchall()
        return [r[0] for r in rows]

    for bound in (1, 9, 40, 300):
        assert asyncio.run(fetch("anna", bound)) == naive("(subject = 'anna' OR subject IS NULL)", bound)
        assert asyncio.run(fetch(None, bound)) == naive("subject IS NULL", bound)
    # The indexed due time reads an offset the way PostgreSQL does, and a due_at without one as none.
    assert db.execute("SELECT coremem_commitment_due('{\"due_at\": \"2026-12-03T11:00:00+02:00\"}'), "
                      "coremem_commitment_due('{\"due_at\": \"2026-12-03T09:00:00Z\"}'), "
                      "coremem_commitment_due('{\"due_at\": \"2026-12-03 09:00\"}'), "
                      "coremem_commitment_due('{}')").fetchone() == (
        db.execute("SELECT '2026-12-03T09:00:00Z'::timestamptz").fetchone()[0],) * 2 + (None, None)


def test_inj_11_left_out_candidates_keep_their_type(org, client, db):
    index_id, ids = _worked_store(client, org, db)
    one = org.make_key(["knowledge", "memory"], memory={"injection": {"index_id": index_id, "limit": 1}})
    by_count = _preview(client, org, index_id, "anna", key_id=one["id"])["trace"]
    left = {x["id"]: (x["type"], x["reason"]) for x in by_count["left_out"]}
    assert left[ids["mornings"]] == ("preference", "dropped_by_count")
    assert left[ids["expenses"]] == ("fact", "dropped_by_count")
    tight = org.make_key(["knowledge", "memory"], memory={"injection": {"index_id": index_id, "budget_tokens": 40}})
    by_budget = _preview(client, org, index_id, "anna", key_id=tight["id"])["trace"]
    assert by_budget["dropped_by_budget"] > 0
    assert all(x["type"] is not None for x in by_budget["left_out"])
    assert {x["type"] for x in by_budget["left_out"] if x["reason"] == "dropped_by_budget"} >= {"behaviour"}


def test_inj_10_dropped_by_count_is_exact_or_says_it_is_a_lower_bound(org, client, db):
    index_id = _index(client, org)
    few = [{"index_id": index_id, "type": "fact", "text": f"fact {i}"} for i in range(30)]
    assert client.post("/memory/batch", headers=bearer(org.key, "anna"), json={"records": few}).status_code == 201
    trace = _preview(client, org, index_id, "anna")["trace"]
    assert (trace["dropped_by_count"], trace["dropped_by_count_is_lower_bound"]) == (10, False)
    many = [{"index_id": index_id, "type": "fact", "text": f"more {i}"} for i in range(100)]
    assert client.post("/memory/batch", headers=bearer(org.key, "anna"), json={"records": many}).status_code == 201
    trace = _preview(client, org, index_id, "anna")["trace"]
    # 130 candidates; the builder fetches the limit (20) plus its slack (50) and says the 50 it counted are a floor.
    assert trace["sections"]["about_this_person"] == 20
    assert trace["dropped_by_count"] == 50 and trace["dropped_by_count_is_lower_bound"] is True


def test_inj_12_preview_shows_what_the_turn_would_inject_and_overrides_only_when_asked(org, client, db):
    index_id, _ = _worked_store(client, org, db)
    blockless = org.make_key(["knowledge", "memory"])
    nothing = _preview(client, org, index_id, "anna", key_id=blockless["id"])
    assert nothing["block"] == "" and nothing["trace"]["reason"] == "no_injection_block"
    assert nothing["note"] == "Nothing is injected: this key injects no block (its memory.injection is not set)."
    assert nothing["store_override"] is False
    forced = _preview(client, org, index_id, "anna", key_id=blockless["id"], store_override=True)
    assert forced["block"] == WORKED_BLOCK and forced["store_override"] is True
    # A key whose block names another store: the turn injects from that store, and so does the preview.
    other = _index(client, org, "other")
    elsewhere = _write(client, org, other, "anna", type="fact", text="Collects stamps")
    pointed = org.make_key(["knowledge", "memory"], memory={"injection": {"index_id": other}})
    there = _preview(client, org, index_id, "anna", key_id=pointed["id"])
    assert there["trace"]["index_id"] == other and there["trace"]["injected_ids"] == [elsewhere]
    assert there["note"] == (f"This key injects from the store {other}, not from {index_id}; "
                             "shown is what its turns get.")
    here = _preview(client, org, index_id, "anna", key_id=pointed["id"], store_override=True)
    assert here["trace"]["index_id"] == index_id and here["block"] == WORKED_BLOCK
    # An administrator naming no key has no turn to mirror: the store's default block, said so.
    default = _preview(client, org, index_id, "anna")
    assert default["block"] == WORKED_BLOCK and default["store_override"] is True
    assert default["note"].startswith("No key chosen")


def test_inj_13_a_builds_transaction_is_planned_serially_and_the_next_one_is_not(org, client, db, database_url):
    """The candidates statement's floors hide how few rows a section reads, and the planner's parallel workers cost
    more than the ranges (backend/db/plan_mode.py): the build's first statement turns them off for its transaction
    only. Without it, this build's transaction would run at the server's setting. The same statement has the
    candidates planned for the person asking again when a write before it (a turn's input items) let plans be
    kept."""
    from sqlalchemy import text as sql_text

    from backend.access.actor import Actor
    from backend.access.principal import Principal
    from backend.access.subjects import Subject
    from backend.db.plan_mode import let_key_checks_keep_plans
    from backend.domains.injection.config import ChosenBlock, parse_block

    index_id, ids = _worked_store(client, org, db)
    server_default = db.execute("SHOW max_parallel_workers_per_gather").fetchone()[0]
    assert server_default != "0"
    key = {"id": "key_x", "org_id": org.org_id, "policy": default_policy(), "capabilities": ["memory"], "memory": {}}
    principal = Principal("key", org.org_id, Actor("key", "key_x"), frozenset({"memory"}), Subject("anna"), key=key)
    chosen = ChosenBlock(parse_block({"index_id": index_id}, "memory_injection"), None)

    settings = "SELECT current_setting('max_parallel_workers_per_gather'), current_setting('plan_cache_mode')"

    async def run() -> tuple[list[str], tuple[str, str], tuple[str, str]]:
        engine = make_engine(database_url, pool_size=1)
        try:
            async with make_sessionmaker(engine)() as session, session.begin():
                await use_org(session, org.org_id)
                await let_key_checks_keep_plans(session)  # as a turn does before inserting its input
                built = await injection.build(session, build_scope(principal, None), {}, chosen, turn_input=None,
                                              max_budget=4000)
                during = tuple((await session.execute(sql_text(settings))).one())
            async with make_sessionmaker(engine)() as session, session.begin():
                after = tuple((await session.execute(sql_text(settings))).one())
            return built.block.injected_ids if built.block else [], during, after
        finally:
            await engine.dispose()

    injected, during, after = asyncio.run(run())
    assert ids["rex"] in injected and ids["tea"] not in injected
    assert (during, after) == (("0", "force_custom_plan"), (server_default, "force_custom_plan"))


def test_inj_13_a_sections_confidence_floor_reads_the_index_alone(org, client, db, database_url):
    """The floors of "about this person" and "organisation" read the records of highest stored confidence with
    their type, expiry and last update; the confidence indexes carry those (migration 0021), so once the table is
    vacuumed each floor is an index-only range that visits no table page."""
    from backend.access.actor import Actor
    from backend.access.principal import Principal
    from backend.access.subjects import Subject
    from backend.domains.injection import repository as repo
    from bench.plans import Wanted, explaining, starting

    index_id = _index(client, org)
    # A page is marked visible to all only once its rows' commit is on disk (the test server commits without
    # waiting: tests/conftest.py).
    db.execute("SET synchronous_commit = on")
    db.execute("""INSERT INTO memory_records (org_id, id, index_id, subject, type, text, norm_hash, confidence,
                  source, updated_at)
                  SELECT %s, 'mem_floor_' || n, %s, CASE WHEN n %% 2 = 0 THEN 'anna' END,
                         (ARRAY['fact', 'preference', 'note'])[1 + n %% 3], 'x', 'h', (n %% 997) / 997.0, 'api',
                         now() - make_interval(days => n %% 90)
                  FROM generate_series(1, 6000) n""", (org.org_id, index_id))
    db.execute("VACUUM ANALYZE memory_records")
    key = {"id": "key_x", "org_id": org.org_id, "policy": default_policy(), "capabilities": ["memory"], "memory": {}}
    principal = Principal("key", org.org_id, Actor("key", "key_x"), frozenset({"memory"}), Subject("anna"), key=key)

    async def plan() -> list[str]:
        engine = make_engine(database_url, pool_size=1)
        try:
            async with make_sessionmaker(engine)() as session, session.begin():
                await use_org(session, org.org_id)
                with explaining([Wanted("candidates", starting("SELECT candidates."))]) as plans:
                    await repo.candidates(session, build_scope(principal, None), {"fact": 30.0},
                                          repo.Selection(index_id, "anna", [], {}, None),
                                          {"about_this_person": 20, "organisation": 20},
                                          repo.Ranking("confidence", None, None))
        finally:
            await engine.dispose()
        found = plans["candidates"]
        assert isinstance(found, list), found
        return found

    lines = asyncio.run(plan())
    floors = [i for i, line in enumerate(lines) if "Scan Backward using ix_memory_records_" in line]
    assert [lines[i].split(" using ")[1].split(" on ")[0] for i in floors] == [
        "ix_memory_records_org_id_index_id_subject_confidence", "ix_memory_records_shared_confidence"], lines
    for i in floors:
        assert "Index Only Scan Backward" in lines[i], lines
        fetches = next(line for line in lines[i + 1:] if "Heap Fetches" in line)
        assert fetches.strip() == "Heap Fetches: 0", lines


def test_inj_11_nothing_left_out_by_a_count_alone_is_not_blamed_on_the_budget(org, client, db):
    """A block with `limit: 0` (or a store with `commitments.inject_limit: 0`) injects nothing although every line
    fits: the reason names the count, and the previewer's note says which setting to raise, not the budget."""
    index_id = _index(client, org)
    fact = _write(client, org, index_id, "anna", type="fact", text="Has a dog named Rex")
    none = org.make_key(["knowledge", "memory"], memory={"injection": {"index_id": index_id, "limit": 0}})
    result = _preview(client, org, index_id, "anna", key_id=none["id"])
    trace = result["trace"]
    assert result["block"] == "" and (trace["dropped_by_count"], trace["dropped_by_budget"]) == (1, 0)
    assert trace["reason"] == "limit_reached"
    assert "`limit`" in result["note"] and "budget" not in result["note"]
    assert {x["id"]: x["reason"] for x in trace["left_out"]} == {fact: "dropped_by_count"}

    promises = _index(client, org, "promises")
    _write(client, org, promises, "anna", type="commitment", text="Call the bank back",
           commitment={"due_at": "2026-12-04T09:00:00+00:00", "promised_to": "bank"})
    response = client.patch(f"/memory/stores/{promises}", headers=org.full, json={"commitments": {"inject_limit": 0}})
    assert response.status_code == 200, response.text
    result = _preview(client, org, promises, "anna")
    assert result["block"] == "" and result["trace"]["reason"] == "limit_reached"
    assert "inject_limit" in result["note"]
    # Left out by the budget (here alongside the count): the budget is the one to raise.
    response = client.patch(f"/memory/stores/{promises}", headers=org.full,
                            json={"commitments": {"inject_limit": 0}, "injection": {"budget_tokens": 0}})
    assert response.status_code == 200, response.text
    _write(client, org, promises, "anna", type="fact", text="Prefers mornings")
    result = _preview(client, org, promises, "anna")
    assert result["trace"]["reason"] == "nothing_fits_budget" and "budget_tokens" in result["note"]
