"""TRN-10: every known value is found wherever it appears, as the longest value at each place, never glued to a
letter or digit, across any whitespace, in any case. The values are one trie-shaped pattern (an alternation of all
of them was quadratic: a 1 MiB text with its thousands of findings took minutes to hide, 2.7 s now); it must find
exactly what the plain alternation finds (hypothesis)."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from backend.providers.pii.literals import matcher


def _alternation(spellings: list[str]) -> re.Pattern[str] | None:
    """The former matcher, longest value first (by its words: " +" is the one-character value "+")."""
    ordered = sorted(set(spellings), key=lambda s: len(" ".join(s.split())), reverse=True)
    words = [r"\s+".join(re.escape(part) for part in s.split()) for s in ordered if s.split()]
    return re.compile("|".join(rf"(?<!\w){w}(?!\w)" for w in words), re.IGNORECASE) if words else None


def _found(pattern: re.Pattern[str] | None, text: str) -> list[tuple[int, int]]:
    return [m.span() for m in pattern.finditer(text)] if pattern is not None else []


# Small alphabets so that values share prefixes, nest ("an", "anna", "anna b") and differ only by case.
VALUE = st.text(alphabet=st.sampled_from(list("aAnN b.@-+1é")), min_size=1, max_size=8)
TEXT = st.text(alphabet=st.sampled_from(list("aAnN b.@-+1é\n\tx")), max_size=60)


@settings(max_examples=600, deadline=None)
@given(st.lists(VALUE, max_size=8), TEXT)
def test_trn_10_the_trie_finds_what_the_alternation_finds(values: list[str], text: str) -> None:
    for value in values[:3]:  # the values themselves appear too, not only by chance
        text += " " + value.upper() + " " + value
    assert _found(matcher(values), text) == _found(_alternation(values), text)


def test_trn_10_known_values_across_whitespace_case_and_boundaries() -> None:
    pattern = matcher(["Anna de Vries", "anna", "+31 6 1234 5678", "anna@example.com"])
    text = "ANNA  de\nvries wrote anna@example.com; xanna, annas and +31 6 1234 5678 to Anna."
    assert [text[a:b] for a, b in _found(pattern, text)] == [
        "ANNA  de\nvries", "anna@example.com", "+31 6 1234 5678", "Anna"]
    assert matcher([]) is None and matcher(["  "]) is None


def test_trn_10_values_nested_hundreds_deep_still_match() -> None:
    values = ["a" * n for n in range(1, 1200)]
    pattern = matcher(values)
    assert _found(pattern, "b " + "a" * 700 + " c") == [(2, 702)]
