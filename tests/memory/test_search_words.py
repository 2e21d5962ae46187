"""MEM-13: a question in plain words finds records: words are alternatives ranked by how many and how rare they
are, English and Dutch stop words are ignored, words are reduced to their stem, and web-search operators keep
their meaning. The same words rule `GET /memory?q=` (every word, stems, no stop words)."""

from __future__ import annotations

from typing import Any

from backend.domains.memory.question import Question, Term, parse
from tests.helpers import assert_error
from tests.memory.conftest import Mem


def search(mem: Mem, client: Any, q: str, headers: dict[str, str] | None = None) -> list[str]:
    return mem.ids(client.get("/memory/search", params={"q": q, "index_id": mem.index_id},
                              headers=headers or mem.anna()))


def test_mem_13_question_parts() -> None:
    assert parse('Which foods could make her ill?') == Question(("which", "foods", "could", "make", "her", "ill"))
    assert parse('"peanut butter" jam -"strawberry jam" -sugar') == Question(
        ("jam",), ((Term("peanut butter"),),), ("strawberry jam", "sugar"))
    # `or` joins terms into alternatives the record needs one of (web-search meaning): a phrase with what stands
    # beside it, an exclusion too (`kitchen or -butter`: kitchen, or no butter).
    assert parse('"peanut butter" or jam "on toast"') == Question(
        ("jam",), ((Term("peanut butter"), Term("jam")), (Term("on toast"),)))
    assert parse('nuts or "peanut butter" or "pinda kaas" bread').required == \
        ((Term("nuts"), Term("peanut butter"), Term("pinda kaas")),)
    assert parse('kitchen or -butter') == Question(("kitchen",), ((Term("kitchen"), Term("butter", True)),))
    assert parse('jam or nuts').required == ()  # plain words are alternatives already
    assert parse('  -  "" or OR ').empty
    assert parse('pinda-allergie').words == ("pinda-allergie",)
    assert parse('"peanut butter" jam').for_embedding() == "peanut butter jam"
    # The query vector reads the question as written (case, order, punctuation), without its operators.
    assert parse('Which foods could make her ill?').for_embedding() == "Which foods could make her ill?"
    assert parse('Is she allergic to "Peanut butter" -jam or OR nuts?').for_embedding() == \
        "Is she allergic to Peanut butter nuts?"


def test_mem_13_more_operators_than_a_question_takes_are_refused_not_cut(mem: Mem, client: Any) -> None:
    fine = " ".join(f"-w{n}" for n in range(8))
    assert client.get("/memory/search", params={"q": f"tea {fine}", "index_id": mem.index_id},
                      headers=mem.anna()).status_code == 200
    for q in (f"tea {fine} -w8", " ".join(f'"p{n} q"' for n in range(9)), " or ".join(f'"p{n} q"' for n in range(9))):
        assert_error(client.get("/memory/search", params={"q": q, "index_id": mem.index_id}, headers=mem.anna()),
                     422, param="q")
    called = client.post(mem.tool("search"), json={"arguments": {"query": f"tea {fine} -w8"}}, headers=mem.anna())
    assert_error(called, 422, param="arguments.query")


def test_mem_13_a_plain_question_finds_records_by_stems_without_stop_words(mem: Mem, client: Any) -> None:
    peanuts = mem.write(mem.anna(), "Is allergic to peanuts.")
    dutch = mem.write(mem.anna(), "Heeft twee honden en een kat.")
    cycling = mem.write(mem.anna(), "Cycles to the office every morning.")
    # Every word had to match before: a question never found anything. Now its meaningful words do, stemmed:
    # "peanut" finds "peanuts", "hond" finds "honden", "cycling" finds "Cycles".
    assert search(mem, client, "is she allergic to any peanut?") == [peanuts["id"]]
    assert search(mem, client, "heeft ze een hond?") == [dutch["id"]]
    assert search(mem, client, "how does she go cycling?") == [cycling["id"]]
    # A question of stop words only (English and Dutch) matches no record by its words.
    assert search(mem, client, "what is the one she had?") == []
    assert search(mem, client, "wat is het dat zij heeft?") == []
    # Another person's record is never found, whatever the words.
    mem.write(mem.bob(), "Bob is allergic to peanuts too.")
    assert search(mem, client, "allergic peanuts") == [peanuts["id"]]


def test_mem_13_more_and_rarer_words_rank_first(mem: Mem, client: Any) -> None:
    for n in range(6):
        mem.write(mem.anna(), f"Visited the office on day {n}.")
    both = mem.write(mem.anna(), "Visited the Rotterdam office.")
    rare = mem.write(mem.anna(), "Lived in Rotterdam as a child.")
    found = search(mem, client, "when was she in the Rotterdam office?")
    # The record with both words first, then the one with the rare word, then those with the common word only.
    assert found[:2] == [both["id"], rare["id"]] and len(found) == 8
    hits = client.get("/memory/search", params={"q": "Rotterdam office", "index_id": mem.index_id},
                      headers=mem.anna()).json()["data"]
    assert hits[0]["score"] > hits[1]["score"] > hits[2]["score"] > 0


def test_mem_13_web_search_operators_keep_their_meaning(mem: Mem, client: Any) -> None:
    butter = mem.write(mem.anna(), "Loves peanut butter on toast.")
    jam = mem.write(mem.anna(), "Loves strawberry jam on toast.")
    peanuts = mem.write(mem.anna(), "Eats peanuts and butter cookies.")
    # A phrase must be in the record, in that order (stems apply inside it too).
    assert search(mem, client, '"peanut butter"') == [butter["id"]]
    assert search(mem, client, '"peanuts butter"') == [butter["id"]]
    # An exclusion keeps records with the word (or phrase) out; the plain words stay alternatives.
    assert set(search(mem, client, "toast -jam")) == {butter["id"]}
    assert set(search(mem, client, 'loves -"strawberry jam"')) == {butter["id"]}
    assert set(search(mem, client, "jam or cookies")) == {jam["id"], peanuts["id"]}
    # A phrase with plain words: the phrase is required, the words rank.
    assert search(mem, client, '"on toast" strawberry') == [jam["id"], butter["id"]]
    # `or` beside a phrase makes it one of alternatives, as in web search: either phrase, or the phrase or a word.
    assert set(search(mem, client, '"peanut butter" or "strawberry jam"')) == {butter["id"], jam["id"]}
    assert set(search(mem, client, '"strawberry jam" or cookies')) == {jam["id"], peanuts["id"]}
    assert set(search(mem, client, '"strawberry jam" or cookies "on toast"')) == {jam["id"]}
    # An exclusion joined by `or` is an alternative too: on toast, or without peanut butter.
    assert set(search(mem, client, '"on toast" or -"peanut butter"')) == {butter["id"], jam["id"], peanuts["id"]}
    assert set(search(mem, client, 'cookies or -toast')) == {peanuts["id"]}


def test_mem_6_list_filter_q_matches_every_word_by_stem(mem: Mem, client: Any) -> None:
    running = mem.write(mem.anna(), "Goes running in the parks.")
    mem.write(mem.anna(), "Goes swimming in the lake.")
    assert mem.list(mem.anna(), q="run park") == [running["id"]]
    assert mem.list(mem.anna(), q="the run") == [running["id"]]  # a stop word asks for nothing
    assert mem.list(mem.anna(), q="run lake") == []
    assert mem.list(mem.anna(), q="goes -swimming") == [running["id"]]
