"""THR-7: snippets and highlights. `highlighted` turns ts_headline's marked text into the snippet and its
highlights in UTF-16 code units; it works on runs of text between markers, and must agree exactly with the
character-by-character reading it replaced (kept here as the reference)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from backend.domains.threads.search import START, STOP, highlighted, hit_document
from tests.helpers import bearer
from tests.threads.test_thr_7_search import search, utf16_slice
from tests.threads.util import msg, new_thread


def reference(headline: str) -> tuple[str, list[dict[str, int]]]:
    """The former implementation, one character at a time."""
    out: list[str] = []
    spans: list[dict[str, int]] = []
    units = 0
    start: int | None = None
    gap_is_space = False
    for ch in headline:
        if ch == START:
            start = units
        elif ch == STOP:
            if start is not None and units > start:
                if spans and gap_is_space:
                    spans[-1]["end"] = units
                else:
                    spans.append({"start": start, "end": units})
                gap_is_space = True
            start = None
        else:
            if start is None and not ch.isspace():
                gap_is_space = False
            out.append(ch)
            units += 2 if ord(ch) > 0xFFFF else 1
    return "".join(out), spans


def marked(text: str, *words: str) -> str:
    for word in words:
        text = text.replace(word, f"{START}{word}{STOP}")
    return text


def texts_of(snippet: str, spans: list[dict[str, int]]) -> list[str]:
    return [utf16_slice(snippet, s["start"], s["end"]) for s in spans]


# Letters, accents (precomposed and combining), spaces of several kinds, emoji (with ZWJ and skin tone),
# a flag, CJK and the two markers, in any order.
PIECES = st.sampled_from(["a", "Z", "é", "e\u0301", "ü", "ß", " ", "  ", "\n", "\t", "\u00a0", "😀", "🎉",
                          "👩\u200d👩\u200d👧", "👍🏽", "🇳🇱", "字", "€", "-", ",", START, STOP])


@settings(max_examples=500, deadline=None)
@given(pieces=st.lists(PIECES, max_size=60))
def test_thr_7_highlighted_agrees_with_the_character_reading(pieces):
    headline = "".join(pieces)
    assert highlighted(headline) == reference(headline)


def test_thr_7_highlight_offsets_count_utf16_units():
    headline = marked("😀 Héllo 👩\u200d👩\u200d👧 wereld, de CAFÉ crème kost € 3 🎉 om café-tijd", "CAFÉ", "café")
    snippet, spans = highlighted(headline)
    assert START not in snippet and STOP not in snippet
    assert texts_of(snippet, spans) == ["CAFÉ", "café"]
    # 😀 is two units, 👩‍👩‍👧 eight (three emoji of two, two joiners of one), É one: 2+1+5+1+8+1+7+1+2+1.
    assert spans[0]["start"] == snippet.encode("utf-16-le").find("CAFÉ".encode("utf-16-le")) // 2 == 29
    assert spans[0]["end"] == 33
    assert (snippet, spans) == reference(headline)


def test_thr_7_combining_accents_count_each_code_point():
    # "é" spelled as e + U+0301 is two code units, as JavaScript counts it: 6 + 1 + 2 + 1 before the match.
    snippet, spans = highlighted(marked("cre\u0301me 😀 brûlée", "brûlée"))
    assert spans == [{"start": 10, "end": 16}] and texts_of(snippet, spans) == ["brûlée"]


def test_thr_7_phrase_words_read_as_one_highlight():
    snippet, spans = highlighted(f"de {START}crème{STOP} {START}brûlée{STOP} 😀 en {START}crème{STOP}")
    assert texts_of(snippet, spans) == ["crème brûlée", "crème"]
    # Other text between two marked words keeps them apart; an emoji is not a space.
    _, apart = highlighted(f"{START}a{STOP}😀{START}b{STOP}")
    assert apart == [{"start": 0, "end": 1}, {"start": 3, "end": 4}]


def test_thr_7_stray_or_empty_markers_mark_nothing():
    assert highlighted(f"x{STOP} y {START}{STOP}z") == ("x y z", [])
    assert highlighted("no markers 😀") == ("no markers 😀", [])
    assert highlighted(f"{START}open to the end") == ("open to the end", [])


def test_thr_7_hit_without_headline_is_the_text_cut_to_thirty_words():
    row = {"thread_id": "thr_1", "id": "itm_1", "type": "message", "role": "user", "subject": None,
           "created_at": None, "text": " ".join(f"w{n}" for n in range(40)) + START, "headline": None}
    doc = hit_document(row, with_note=False)
    assert doc["snippet"] == " ".join(f"w{n}" for n in range(30)) and doc["highlights"] == []


def test_thr_7_phrase_and_words_among_emoji_and_accents(client, org):
    key = bearer(org.key)
    text = "👩\u200d👩\u200d👧 Zoë bestelt crème brûlée 😀 en daarna 🇳🇱 nog een crème, geen brûlée?"
    new_thread(client, key, items=[msg("user", text)])
    phrase = search(client, key, '"crème brûlée"')["data"][0]
    assert phrase["snippet"] == text
    # The phrase is one highlight; ts_headline also marks its words where they stand alone.
    assert [utf16_slice(text, h["start"], h["end"]) for h in phrase["highlights"]] == ["crème brûlée", "crème",
                                                                                      "brûlée"]
    words = search(client, key, "zoë brûlée")["data"][0]
    assert [utf16_slice(text, h["start"], h["end"]) for h in words["highlights"]] == ["Zoë", "brûlée", "brûlée"]
