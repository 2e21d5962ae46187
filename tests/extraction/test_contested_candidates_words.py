"""MEM-16: contested marking's pairs are found with each record's words made once, not once per pair.

`candidates` split and folded both texts of every pair it looked at: 200 records of 8,000 characters took ~9 s of
the maintenance worker. It must find exactly the pairs the per-pair version found (hypothesis, against that
version written out here), and make each record's words once (counted through `_words`)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from backend.domains.maintenance import contested
from backend.domains.maintenance.contested import MOST_PAIRS, OVERLAP, _words, candidates


def _candidates_plain(rows: list[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Each pair's words made when the pair is looked at (the reference)."""
    found = []
    for i, a in enumerate(rows):
        for b in rows[i + 1:]:
            if a["type"] != b["type"] or a["norm_hash"] == b["norm_hash"]:
                continue
            if a["subject"] != b["subject"] and None not in (a["subject"], b["subject"]):
                continue
            wa, wb = _words(a["text"]), _words(b["text"])
            if wa and wb and len(wa & wb) / len(wa | wb) >= OVERLAP:
                found.append((a, b))
                if len(found) >= MOST_PAIRS:
                    return found
    return found


# Few words, so texts often share half their words or just miss; short words (dropped) and punctuation too.
TEXT = st.lists(st.sampled_from(["Anna", "anna.", "likes", "LIKES", "tea", "coffee", "no", "(tea)", "ok!", "x"]),
                max_size=6).map(" ".join)
ROW = st.fixed_dictionaries({"type": st.sampled_from(["fact", "preference"]), "norm_hash": st.sampled_from("abc"),
                             "subject": st.sampled_from([None, "anna", "bob"]), "text": TEXT})


@given(st.lists(ROW, max_size=40))
@settings(max_examples=500, deadline=None)
def test_mem_16_pairs_are_exactly_the_per_pair_versions(rows: list[dict[str, Any]]) -> None:
    rows = [{**r, "id": str(i)} for i, r in enumerate(rows)]
    assert candidates(rows) == _candidates_plain(rows)


def test_mem_16_each_records_words_are_made_once(monkeypatch: pytest.MonkeyPatch) -> None:
    made = [0]

    def counted(text: str) -> set[str]:
        made[0] += 1
        return _words(text)

    monkeypatch.setattr(contested, "_words", counted)
    rows = [{"id": str(i), "type": "fact", "norm_hash": str(i), "subject": None,
             "text": " ".join(f"w{i}x{j}" for j in range(20))} for i in range(200)]
    assert candidates(rows) == []  # no two share a word: every one of the 19,900 pairs is looked at
    assert made[0] == len(rows)
    same = [{**r, "text": "anna drinks tea"} for r in rows[:MOST_PAIRS + 5]]
    made[0] = 0
    assert len(candidates(same)) == MOST_PAIRS
    assert made[0] <= len(same)
