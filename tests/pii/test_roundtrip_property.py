"""TRN-10: whatever a text holds, hiding and then restoring gives it back exactly, and a value once hidden is
hidden again wherever it appears in the thread (hypothesis)."""

from __future__ import annotations

import re

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from backend.providers.pii import DefaultDetector, KnownValue, Pseudonymizer

DETECTOR = DefaultDetector()
VALUES = [
    "Anna de Vries", "Sanne van den Berg", "Kees van 't Hof", "Emma Thompson", "Mr. Smith", "mevrouw De Vries",
    "J.P. de Vries", "anna.devries@example.com", "BERT@EXAMPLE.NL", "+31 6 1234 5678", "06-12345678",
    "+44 20 7946 0958", "(415) 555-0132", "0031 6 12345678", "NL91 ABNA 0417 1643 00", "NL91ABNA0417164300",
    "GB82 WEST 1234 5698 7654 32", "4111 1111 1111 1111", "378282246310005", "https://example.com/a?b=1",
    "www.voorbeeld.nl", "221B Baker Street", "Prinsengracht 263-1, 1016 GV Amsterdam", "Kerkstraat 12a",
    "1016 GV Amsterdam", "NW1 6XE",
]
# Filler: letters, digits, punctuation, brackets, quotes, whitespace and some non-Latin text.
FILLER = st.text(alphabet=st.sampled_from(list("abcXYZ019 \n\t.,;:!?-_'\"()[]{}<>@+/#€%&éßłж中😀")), max_size=12)
# Words that change what is around a value: name parts, street words, numbers, titles.
WORDS = st.sampled_from([" Street ", " Jansen", "Anna ", " van der ", " de ", " 12", " 1016 GV ", "Mr. ", " EMP-",
                         "Will ", " Mark ", "\n", " order ", "straat ", " +", "0", "@", "www.", "NL"])
PIECE = st.one_of(st.sampled_from(VALUES), FILLER, WORDS)
# A text that itself spells a placeholder of these kinds ("[url 1]") is read as one on the way back (documented).
PLACEHOLDER_LIKE = re.compile(r"(?i)(person|email|phone|iban|card|url|address)[ _-]?\d")


def _text(pieces: list[str]) -> str:
    return "".join(pieces)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(PIECE, max_size=12), st.lists(PIECE, max_size=12))
def test_trn_10_restore_of_hide_is_the_text_and_values_stay_hidden_across_turns(first: list[str],
                                                                                 second: list[str]) -> None:
    x, y = _text(first), _text(second)
    assume(not PLACEHOLDER_LIKE.search(x + y))
    pz = Pseudonymizer(DETECTOR, known=[KnownValue("PERSON", "Anna de Vries", "anna")], subject="anna")
    hidden_x = pz.hide(x)
    assert pz.restore(hidden_x) == x
    assert pz.hide(x) == hidden_x  # hiding again changes nothing and adds nothing
    # The next turn loads the stored mapping and hides another text with it.
    later = Pseudonymizer(DETECTOR, pz.entries, subject="bert")
    hidden_y = later.hide(y)
    assert later.restore(hidden_y) == y
    assert later.restore(hidden_x) == x
    for entry in pz.entries:
        assert later.hide(entry.value) == entry.placeholder
        # No occurrence of a hidden value is left standing on its own anywhere in the text (one right after or
        # before a placeholder was glued to the value that placeholder replaced).
        assert not re.search(r"(?<![\w>])" + re.escape(entry.value) + r"(?![\w<])", hidden_x), entry
