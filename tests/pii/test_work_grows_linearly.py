"""TRN-10/EXT-11: hiding and restoring run on the event loop, so their work must not grow faster than what they are
given. Counted, not timed: the values compiled into patterns while hiding many strings each with a new value (a
pattern of all values was compiled again for every new one: 1000 strings took 10 s), the placeholder patterns
looked up while restoring many strings (the thread's kinds were gathered from the whole mapping for each one), and
a run of spaces restored in a child process with a time limit (each space scanned the rest of the run: 16 KiB
took 6 s). What is found must not change (hypothesis against a rebuild every time and against the old pattern)."""

from __future__ import annotations

import math
import re
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from backend.providers.pii import DefaultDetector, KnownValue, Pseudonym, Pseudonymizer, literals
from backend.providers.pii.pseudonymizer import _restore_pattern

DETECTOR = DefaultDetector()
ROOT = Path(__file__).resolve().parents[2]


def test_trn_10_hiding_n_strings_with_a_new_value_each_compiles_each_value_log_n_times(
        monkeypatch: pytest.MonkeyPatch) -> None:
    n = 512
    pz = Pseudonymizer(DETECTOR)
    compiled: list[tuple[int, int]] = []  # (spellings in the pattern, values the thread held then)
    matcher = literals.matcher

    def counting(spellings: Iterable[str]) -> re.Pattern[str] | None:
        spellings = list(spellings)
        compiled.append((len(spellings), len(pz.entries)))
        return matcher(spellings)

    monkeypatch.setattr(literals, "matcher", counting)
    hidden = pz.hide_json([f"mail u{i}@example.com" for i in range(n)])
    assert hidden == [f"mail <EMAIL_{i + 1}>" for i in range(n)]
    # Compiling all values for every new one is n * n / 2 = 131072 spellings; in halving levels about n log n / 2.
    assert sum(size for size, _ in compiled) <= n * math.log2(n)
    over_half = [size for size, held in compiled if size > 1 and size > held / 2]
    assert len(over_half) <= 2 * math.log2(n) + 4


def _hide_all(texts: list[str], rebuild: bool, known: list[KnownValue], entries: list[Pseudonym]) -> tuple:
    pz = Pseudonymizer(DETECTOR, entries, known=known, subject="anna")
    hidden = []
    for text in texts:
        if rebuild:
            assert hasattr(pz, "_matcher")
            pz._matcher = None  # what hiding did before: every value compiled again for each text
        hidden.append(pz.hide(text))
    return hidden, pz.entries, [pz.restore(h) for h in hidden]


VALUES = ["Anna", "Anna de Vries", "ANNA", "de Vries", "anna@example.com", "Anna de Vries-Jansen", "Bert Jansen",
          "bert@example.com", "+31 6 1234 5678", "06-12345678", "Mark", "mark", "https://example.com/a",
          "Kerkstraat 12a", "NL91 ABNA 0417 1643 00"]
PIECES = st.one_of(st.sampled_from(VALUES), st.sampled_from([" ", "\n", ", ", " wrote to ", " x", "-", "@", "."]),
                   st.text(alphabet=st.sampled_from(list("aAnNdeVr sb@.1")), max_size=6))
TEXTS = st.lists(st.lists(PIECES, max_size=8).map("".join), max_size=10)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(TEXTS, st.lists(st.sampled_from(VALUES[:6]), max_size=2), st.lists(st.sampled_from(VALUES), max_size=3))
def test_trn_10_hiding_text_after_text_finds_what_compiling_every_value_again_finds(
        texts: list[str], known: list[str], stored: list[str]) -> None:
    entries = [Pseudonym(f"<PERSON_{i + 1}>", "PERSON", value) for i, value in enumerate(dict.fromkeys(stored))]
    knowns = [KnownValue("PERSON", value, "anna") for value in known]
    assert _hide_all(texts, False, knowns, entries) == _hide_all(texts, True, knowns, entries)


SPELLING = st.text(alphabet=st.sampled_from(list("aAnN b.@-+1é")), min_size=1, max_size=8)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.lists(SPELLING, max_size=5), max_size=8),
       st.text(alphabet=st.sampled_from(list("aAnN b.@-+1é\n\tx")), max_size=200))
def test_trn_10_values_added_over_time_are_found_as_one_pattern_of_all_finds_them(
        batches: list[list[str]], text: str) -> None:
    values = literals.Values()
    added: list[str] = []
    for batch in batches:
        for spelling in batch:
            values.add(spelling)
        added += batch
        text += " " + " ".join(batch).upper()
        whole = literals.matcher(added)
        assert [m.span() for m in values.finditer(text)] == \
            ([m.span() for m in whole.finditer(text)] if whole is not None else [])


def test_trn_10_restoring_many_strings_looks_the_placeholder_pattern_up_once_per_new_kind() -> None:
    pz = Pseudonymizer(DETECTOR, [Pseudonym(f"<EMAIL_{i}>", "EMAIL", f"u{i}@x.nl") for i in range(1, 4001)])
    before = _restore_pattern.cache_info()
    assert pz.restore_json(["<EMAIL_7> x"] * 1000) == ["u7@x.nl x"] * 1000
    after = _restore_pattern.cache_info()
    assert (after.hits + after.misses) - (before.hits + before.misses) <= 1
    # A new kind is restored from then on; one a newer turn took back (adopt) no longer is.
    assert pz.hide("Bert Jansen wrote.") == "<PERSON_1> wrote."
    assert pz.restore_json(["<PERSON_1> and <EMAIL_7>"]) == ["Bert Jansen and u7@x.nl"]
    assert pz.adopt([]) is False
    assert pz.restore("<PERSON_1> and <EMAIL_7>") == "<PERSON_1> and u7@x.nl"


def test_ext_11_restoring_a_mebibyte_of_spaces_is_linear() -> None:
    # Each space of the run tried the brackets and scanned the rest of the run: hours for 1 MiB.
    code = """if True:
        from backend.providers.pii import DefaultDetector, Pseudonym, Pseudonymizer
        pz = Pseudonymizer(DefaultDetector(), [Pseudonym("<PERSON_1>", "PERSON", "Anna"),
                                               Pseudonym("<EMAIL_1>", "EMAIL", "a@b.nl")])
        run = " " * (1 << 20)
        text = "<PERSON_1>" + run + "[ email-1 ]" + "\\t" * (1 << 16) + "PERSON_1" + run + "<" + run
        out = pz.restore(text)
        assert out == "Anna" + run + "a@b.nl" + "\\t" * (1 << 16) + "Anna" + run + "<" + run, out[:80]
        print("ok")
    """
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout == "ok\n", done.stderr[-2000:]


_OLD = (r"(?P<open><<|\{\{|&lt;|[<\[{])?[ \t]*(?<![A-Za-z0-9_])(?P<kind>(?i:PERSON|EMAIL|URL))"
        r"(?P<sep>[_\- ]?)(?P<num>\d{1,9})(?![0-9A-Za-z_])")  # the pattern before; the old match spanned spaces


def _read(pattern: re.Pattern[str], text: str) -> list[tuple]:
    """What `restore` uses of each match: the opening bracket (its place is where the match starts), kind,
    separator and number."""
    return [(m.span("open") if m.group("open") is not None else None, m.span("kind"), m.group("sep"), m.span("num"))
            for m in pattern.finditer(text)]


OPEN = st.sampled_from(["", "<", "<<", "{{", "{", "[", "&lt;", "a", "&", "<<<"])
CLOSE = st.sampled_from(["", ">", ">>", "}}", "}", "]", "&gt;", "a", ">>>"])
SPACE = st.sampled_from(["", " ", "  ", "\t", " \t ", "\n"])
KIND = st.sampled_from(["PERSON", "person", "Person", "EMAIL", "email", "URL", "PERSONA", "xPERSON", "PHONE"])
SEP = st.sampled_from(["", "_", "-", " ", "__", "\t"])
NUMBER = st.sampled_from(["1", "12", "0", "1234567890", "1a", ""])
PLACEHOLDERISH = st.tuples(OPEN, SPACE, KIND, SEP, NUMBER, SPACE, CLOSE).map("".join)


@settings(max_examples=2000, deadline=None)
@given(st.lists(st.one_of(PLACEHOLDERISH, OPEN, CLOSE, SPACE, KIND, NUMBER), max_size=12).map("".join))
def test_ext_11_the_placeholder_pattern_reads_what_the_old_one_read(text: str) -> None:
    old = re.compile(_OLD)
    new = _restore_pattern(("EMAIL", "PERSON", "URL"))
    assert _read(new, text) == _read(old, text)
