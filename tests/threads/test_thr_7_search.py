"""THR-7: search messages and refusals in exactly the threads GET /threads shows, newest first, by slices of days."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from urllib.parse import quote

from tests.helpers import assert_error, bearer
from tests.threads.util import append, msg, new_thread


def utf16_slice(text: str, start: int, end: int) -> str:
    """What a JavaScript string's `slice(start, end)` gives."""
    return text.encode("utf-16-le")[start * 2:end * 2].decode("utf-16-le")


def search(client, headers, query: str = "", **params):
    url = "/thread-items?" + "&".join([f"q={quote(query)}"] * bool(query) +
                                      [f"{k}={quote(str(v))}" for k, v in params.items()])
    response = client.get(url, headers=headers)
    assert response.status_code == 200, response.text
    return response.json()


def texts(page) -> list[str]:
    return [hit["snippet"] for hit in page["data"]]


def test_thr_7_syntax_scope_and_kinds(client, org):
    key = bearer(org.key)
    anna = bearer(org.key, "anna")
    annas = new_thread(client, anna, metadata={"kanaal": "support"}, items=[
        msg("user", "Wanneer komt mijn terugbetaling?"),
        msg("assistant", "De terugbetaling volgt binnen vijf dagen, met koffie."),
        {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": '{"q": "terugbetaling"}'},
        {"type": "function_call_output", "call_id": "c1", "output": "terugbetaling gepland"},
        {"type": "reasoning", "summary": [{"type": "summary_text", "text": "terugbetaling"}]},
        {"type": "refusal", "refusal": "Over een terugbetaling van anderen zeg ik niets."},
        msg("user", "Ik drink graag café au lait."),
        msg("user", "Liever lait au café of thee."),
    ])
    bobs = new_thread(client, bearer(org.key, "bob"), items=[msg("user", "Bob wil ook een terugbetaling")])
    shared = new_thread(client, key, items=[msg("developer", "Beleid voor elke terugbetaling")])

    everyone = search(client, key, "terugbetaling")
    # Messages and refusals only; tool calls, tool results and reasoning are never searched. Newest first.
    assert [h["item_id"] for h in everyone["data"]] == [
        shared["items"][0]["id"], bobs["items"][0]["id"], annas["items"][5]["id"], annas["items"][1]["id"],
        annas["items"][0]["id"]]
    refusal = everyone["data"][2]
    assert refusal["type"] == "refusal" and refusal["role"] == "assistant" and refusal["thread_id"] == annas["id"]
    assert set(refusal) >= {"thread_id", "item_id", "role", "created_at", "snippet", "highlights"}

    # A request for Anna finds her threads and the shared one, as GET /threads shows her; never Bob's.
    hers = {h["thread_id"] for h in search(client, anna, "terugbetaling")["data"]}
    assert hers == {annas["id"], shared["id"]}
    listed = {t["id"] for t in client.get("/threads", headers=anna).json()["data"]}
    assert hers == listed

    assert texts(search(client, key, '"café au lait"')) == ["Ik drink graag café au lait."]
    assert len(search(client, key, "café lait")["data"]) == 2
    assert texts(search(client, key, "thee or vijf")) == ["Liever lait au café of thee.",
                                                          "De terugbetaling volgt binnen vijf dagen, met koffie."]
    excluded = search(client, anna, "terugbetaling -koffie")
    assert len(excluded["data"]) == 3 and all("koffie" not in s for s in texts(excluded))
    assert_error(client.get("/thread-items?q=-koffie", headers=key), 400, code="exclusions_only", param="q")
    assert_error(client.get(f"/thread-items?q={quote('-koffie -thee')}", headers=key), 400, code="exclusions_only")
    assert_error(client.get("/thread-items", headers=key), 400, code="query_required")
    assert_error(client.get("/thread-items?q=%20", headers=key), 400)

    # Filters: thread, thread metadata, role, time.
    assert len(search(client, key, "terugbetaling", thread_id=bobs["id"])["data"]) == 1
    assert len(search(client, key, "terugbetaling", thread_metadata="kanaal:support")["data"]) == 3
    assert texts(search(client, key, "terugbetaling", role="developer")) == ["Beleid voor elke terugbetaling"]
    assert_error(client.get("/thread-items?q=x&role=system", headers=key), 422)
    assert_error(client.get("/thread-items?q=x&from=2026-01-01T00:00:00", headers=key), 422)
    future = (datetime.now(UTC) + timedelta(days=1)).isoformat()
    assert search(client, key, "terugbetaling", **{"from": future})["data"] == []


def test_thr_7_snippet_and_utf16_highlights(client, org):
    key = bearer(org.key)
    text = "😀 Héllo 👩‍👩‍👧 wereld, de CAFÉ crème kost € 3 en het café sluit 🎉 om café-tijd"
    long = " ".join(f"woord{n}" for n in range(60)) + " naald " + " ".join(f"rest{n}" for n in range(60))
    new_thread(client, key, items=[msg("user", text), msg("assistant", long)])
    hit = search(client, key, "café")["data"][0]
    assert hit["snippet"] == text
    marked = [utf16_slice(hit["snippet"], h["start"], h["end"]) for h in hit["highlights"]]
    assert marked == ["CAFÉ", "café", "café"]
    # JavaScript counts the emoji as two code units each: the first highlight starts after them.
    assert hit["highlights"][0]["start"] == hit["snippet"].encode("utf-16-le").find("CAFÉ".encode("utf-16-le")) // 2
    phrase = search(client, key, '"crème kost"')["data"][0]
    assert [utf16_slice(phrase["snippet"], h["start"], h["end"]) for h in phrase["highlights"]] == ["crème kost"]

    needle = search(client, key, "naald")["data"][0]
    words = needle["snippet"].split()
    assert 20 <= len(words) <= 30 and "naald" in words  # about thirty words around the match
    (span,) = needle["highlights"]
    assert utf16_slice(needle["snippet"], span["start"], span["end"]) == "naald"


def _age(db, item_id: str, days: float) -> None:
    db.execute("UPDATE thread_items SET created_at = now() - make_interval(secs => %s) WHERE id = %s",
               (days * 86400, item_id))


def test_thr_7_pages_read_fixed_slices_with_searched_to(client, org, db):
    key = bearer(org.key)
    thread = new_thread(client, key, items=[msg("user", f"oud bericht {n}") for n in range(4)] +
                        [msg("user", "uniek en oud"), msg("user", "ander recent bericht")])
    ids = [i["id"] for i in thread["items"]]
    _age(db, ids[0], 0.01)
    _age(db, ids[1], 1)
    _age(db, ids[2], 12)
    _age(db, ids[3], 40)
    _age(db, ids[4], 60)
    _age(db, ids[5], 0.02)
    # A slice's first day counts from the day of the newest message it reads, which is not today just after
    # midnight: the expected days are taken from the messages' own (UTC) days.
    day = {row[0]: row[1].astimezone(UTC).date() for row in db.execute(
        "SELECT id, created_at FROM thread_items WHERE id = ANY(%s)", (ids,)).fetchall()}

    first = search(client, key, "bericht")
    assert [h["item_id"] for h in first["data"]] == [ids[0], ids[5], ids[1]]
    assert first["searched_to"] == str(day[ids[0]] - timedelta(days=6)) and first["next_cursor"]
    second = search(client, key, "bericht", cursor=first["next_cursor"])
    # The next slice starts at the newest older message's day, so empty weeks cost no page.
    assert [h["item_id"] for h in second["data"]] == [ids[2]]
    assert second["searched_to"] == str(day[ids[2]] - timedelta(days=6))
    third = search(client, key, "bericht", cursor=second["next_cursor"])
    assert [h["item_id"] for h in third["data"]] == [ids[3]]
    assert third["next_cursor"] is not None  # the "uniek" message is older still
    fourth = search(client, key, "bericht", cursor=third["next_cursor"])
    assert fourth["data"] == [] and fourth["next_cursor"] is None

    # A page can come back empty and still carry a cursor: the only match lies in an older slice.
    empty = search(client, key, "uniek")
    assert empty["data"] == [] and empty["next_cursor"] is not None
    assert empty["searched_to"] == str(day[ids[0]] - timedelta(days=6))
    found = search(client, key, "uniek", cursor=empty["next_cursor"])
    while not found["data"] and found["next_cursor"]:
        found = search(client, key, "uniek", cursor=found["next_cursor"])
    assert [h["item_id"] for h in found["data"]] == [ids[4]]

    # `from` and `to` bound the search; `to` is exclusive.
    bounded = search(client, key, "bericht", **{"from": (datetime.now(UTC) - timedelta(days=13)).isoformat(),
                                                "to": (datetime.now(UTC) - timedelta(days=0.5)).isoformat()})
    assert [h["item_id"] for h in bounded["data"]] == [ids[1]]
    rest = search(client, key, "bericht", cursor=bounded["next_cursor"], **{
        "from": (datetime.now(UTC) - timedelta(days=13)).isoformat()})
    assert [h["item_id"] for h in rest["data"]] == [ids[2]] and rest["next_cursor"] is None


def test_thr_7_full_pages_continue_inside_the_slice(client, org):
    key = bearer(org.key)
    thread = new_thread(client, key, items=[msg("user", f"zelfde woord {n}") for n in range(5)])
    append(client, key, thread["id"], msg("user", "zelfde woord 5"))
    seen: list[str] = []
    page = search(client, key, "zelfde", limit=2)
    while True:
        if not seen:  # a full page with more in its slice searched back to its last hit's day
            assert page["searched_to"] == page["data"][-1]["created_at"][:10]
        seen += [h["item_id"] for h in page["data"]]
        if not page["next_cursor"]:
            break
        page = search(client, key, "zelfde", limit=2, cursor=page["next_cursor"])
    expected = client.get(f"/threads/{thread['id']}/items?order=desc", headers=key).json()["items"]
    assert seen == [i["id"] for i in expected]
    assert_error(client.get("/thread-items?q=x&cursor=bogus", headers=key), 400, code="invalid_cursor")


def test_thr_7_deleted_threads_are_not_searched(client, org):
    key = bearer(org.key)
    thread = new_thread(client, key, items=[msg("user", "verdwijnwoord")])
    assert len(search(client, key, "verdwijnwoord")["data"]) == 1
    assert client.delete(f"/threads/{thread['id']}", headers=key).status_code == 204
    assert search(client, key, "verdwijnwoord")["data"] == []


def test_thr_7_a_deny_rule_still_filters_a_request_naming_nobody(client, org):
    """A request naming nobody under the default policy sees every live thread, so search leaves out its join to
    threads; a policy with a deny rule must keep it, and `or` queries (planned differently) must agree."""
    policy = {"indexes": ["*"], "rules": [
        {"id": "all", "effect": "permit", "kind": "thread", "when": [{"atom": "no_subject"}]},
        {"id": "hide", "effect": "deny", "kind": "thread", "match": {"labels": {"vertrouwelijk": "ja"}}}]}
    guarded = bearer(org.make_key(policy=policy, name="guarded")["secret"])
    everything = bearer(org.key)
    open_thread = new_thread(client, everything, items=[msg("user", "kikkerwoord open")])
    hidden = new_thread(client, everything, labels={"vertrouwelijk": "ja"}, items=[msg("user", "kikkerwoord dicht")])
    for query in ("kikkerwoord", "open or dicht"):
        assert {h["thread_id"] for h in search(client, everything, query)["data"]} == {open_thread["id"], hidden["id"]}
        assert {h["thread_id"] for h in search(client, guarded, query)["data"]} == {open_thread["id"]}


def test_thr_7_slices_reveal_nothing_of_threads_the_request_cannot_read(client, org, db):
    """`searched_to` and `next_cursor` come from the threads the request reads only: Anna learns nothing of the
    days Bob wrote, neither by paging back nor by naming his thread (404, as GET /threads/{id} answers her)."""
    anna, bob = bearer(org.key, "anna"), bearer(org.key, "bob")
    hers = new_thread(client, anna, items=[msg("user", "mijn eigen bericht")])
    bobs = new_thread(client, bob, items=[msg("user", "zijn bericht"), msg("user", "nog een bericht")])
    _age(db, bobs["items"][0]["id"], 30)
    _age(db, bobs["items"][1]["id"], 20)
    today = db.execute("SELECT created_at FROM thread_items WHERE id = %s",
                       (hers["items"][0]["id"],)).fetchone()[0].astimezone(UTC).date()

    first = search(client, anna, "bericht")
    assert [h["item_id"] for h in first["data"]] == [hers["items"][0]["id"]]
    # Nothing older that she may read: no cursor into Bob's weeks.
    assert first["searched_to"] == str(today - timedelta(days=6)) and first["next_cursor"] is None
    # Bob, reading his own thread, pages back into them.
    assert search(client, bob, "bericht")["next_cursor"] is not None

    # Naming Bob's thread is the 404 GET /threads/{id} gives her, whatever it holds; so is a thread that is not.
    unreadable = client.get(f"/threads/{bobs['id']}", headers=anna)
    named = client.get(f"/thread-items?q=bericht&thread_id={bobs['id']}", headers=anna)
    assert_error(named, 404, code=unreadable.json()["code"], param="thread_id")
    assert named.json()["message"] == unreadable.json()["message"]
    assert_error(client.get("/thread-items?q=bericht&thread_id=thr_none", headers=anna), 404, param="thread_id")
    # Her own thread and Bob's for him answer as before.
    assert [h["item_id"] for h in search(client, anna, "bericht", thread_id=hers["id"])["data"]] == [
        hers["items"][0]["id"]]
    assert len(search(client, bob, "bericht", thread_id=bobs["id"])["data"]) == 1
