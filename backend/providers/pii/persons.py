"""The name heuristic of the default detector (TRN-10): a listed first name followed by a surname, or a title
followed by a surname. Precision before recall:

- a first name counts only from the bundled lists (names.py), written with its capital ("Anna", not "anna");
- the surname is the next capitalised word on the same line, after at most two more first names or initials
  and an optional Dutch/Romance particle ("van der", "de", "ter", "da"), and never a word of `NOT_SURNAMES`
  (function words, months, days, "Street", "Station", big cities and countries);
- a first name that is also an everyday word ("Will", "Mark", "Hope", "Roos") does not start a name at the
  start of a sentence unless a particle follows ("Mark van Dam");
- a run of three or more capitalised words ("Grace Period Policy") reads as a title, not a name, unless the
  surname came after a particle;
- "Mr Smith", "Dr. J. Jansen" and "mevrouw De Vries" are names by their title (the title stays visible).

Not found, by design: a first name alone ("Hi Anna"), lowercase names, names not in the lists, surnames alone,
and names written in capitals. Names the request gives in the person's attributes are matched literally by the
pseudonymizer, whatever their spelling.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from backend.providers.pii.names import AMBIGUOUS_FIRST_NAMES, FIRST_NAMES, NOT_SURNAMES, PARTICLES, TITLES
from backend.providers.pii.spans import Span

# A word, with apostrophes and hyphens inside it; a Dutch double surname keeps its particle ("de Jong-van Dijk").
_TOKEN = re.compile(r"[^\W\d_]+(?:-(?:van der|van den|van de|van|de|den|der|ter|ten) (?=[A-Z])[^\W\d_]+"
                    r"|['’][^\W\d_]+|-[^\W\d_]+)*|'t\b|\S", re.UNICODE)
_POSSESSIVE = re.compile(r"['’]s$")
# "Anna de Kerkstraat 12" is an address after a first name, not a surname.
_STREET_WORD = re.compile(r"(?:straat|gracht|plein|kade|singel|steeg|dreef|plantsoen|burgwal)$", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class _Token:
    start: int
    end: int
    word: str
    joined: bool  # separated from the previous token by spaces or tabs only
    sentence_start: bool


_SENTENCE_ENDS = frozenset({".", "!", "?", ":", "•", "*"})
_OPENERS = frozenset({"\"", "“", "‘", "(", "[", "'"})


def _tokens(text: str) -> list[_Token]:
    out: list[_Token] = []
    prev_end = 0
    at_start = True
    for m in _TOKEN.finditer(text):
        gap = text[prev_end:m.start()]
        if "\n" in gap:
            at_start = True
        out.append(_Token(m.start(), m.end(), m.group(0), bool(out) and gap != "" and gap.strip(" \t") == "",
                          at_start))
        if m.group(0) in _SENTENCE_ENDS:
            at_start = True
        elif m.group(0) not in _OPENERS:  # a quote or bracket keeps a sentence start for the word after it
            at_start = False
        prev_end = m.end()
    return out


def _is_capitalised(word: str) -> bool:
    letters = word.replace("'", "").replace("’", "").replace("-", "").replace(" ", "")
    return (len(letters) >= 2 and letters.isalpha() and word[0].isupper() and not word.isupper()
            and any(c.islower() for c in letters))


def _surname_end(tok: _Token) -> int:
    """Where a surname token ends without an English or Dutch possessive ("Smith's", "Anna's")."""
    m = _POSSESSIVE.search(tok.word)
    return tok.end - 2 if m and len(tok.word) > 4 else tok.end


def _surname_ok(tok: _Token) -> bool:
    base = _POSSESSIVE.sub("", tok.word)
    return _is_capitalised(base) and base.lower() not in NOT_SURNAMES and not _STREET_WORD.search(base)


def _is_initial(toks: list[_Token], i: int) -> bool:
    t = toks[i]
    return (len(t.word) == 1 and t.word.isupper() and i + 1 < len(toks) and toks[i + 1].word == "."
            and toks[i + 1].start == t.end)


def _skip_initials(toks: list[_Token], i: int, limit: int = 3) -> int:
    """Index after up to `limit` initials ("J." / "J.P.") starting at i."""
    n = 0
    while n < limit and i < len(toks) and _is_initial(toks, i):
        if n and not (toks[i].joined or toks[i].start == toks[i - 1].end):
            break
        i += 2
        n += 1
    return i


def _particle_at(toks: list[_Token], i: int, *, capitalised: bool) -> int:
    """Index after the longest particle starting at i (0 words when none); `capitalised` also accepts "De"."""
    for particle in PARTICLES:
        j = i
        ok = True
        for k, part in enumerate(particle):
            if j >= len(toks) or not toks[j].joined:
                ok = False
                break
            word = toks[j].word
            if not (word == part or (capitalised and k == 0 and word == part.capitalize())):
                ok = False
                break
            j += 1
        if ok:
            return j
    return i


def _run_continues(toks: list[_Token], j: int) -> bool:
    """True when a capitalised word follows right after index j-1: a Title Case run ("Grace Period Policy",
    "Thomas Cook Airlines") is a heading or an organisation, not a name."""
    return j < len(toks) and toks[j].joined and _is_capitalised(toks[j].word)


def _from_first_name(toks: list[_Token], i: int) -> tuple[int, int] | None:
    first = toks[i]
    j = i + 1
    names = 1
    while j < len(toks) and names < 3:
        if toks[j].joined and toks[j].word in FIRST_NAMES:
            j += 1
            names += 1
        elif toks[j].joined and _is_initial(toks, j):
            j = _skip_initials(toks, j)
        else:
            break
    after_particle = _particle_at(toks, j, capitalised=False)
    has_particle = after_particle > j
    if after_particle < len(toks) and toks[after_particle].joined and _surname_ok(toks[after_particle]):
        last = toks[after_particle]
        end_index = after_particle + 1
    elif names >= 2 and not has_particle:
        # Two listed first names in a row ("Anna Maria", "Jan Willem") are a name on their own.
        last = toks[j - 1]
        end_index = j
    else:
        return None
    if first.sentence_start and first.word in AMBIGUOUS_FIRST_NAMES and not has_particle:
        return None
    if not has_particle and _run_continues(toks, end_index):
        return None
    return first.start, _surname_end(last)


def _from_title(toks: list[_Token], i: int) -> tuple[int, int] | None:
    j = i + 1
    if j < len(toks) and toks[j].word == "." and toks[j].start == toks[i].end:
        j += 1
    if j >= len(toks) or not toks[j].joined:
        return None
    start = toks[j].start
    # First names after the title belong to the name when a surname or particle follows ("Mr John Smith").
    while (j + 1 < len(toks) and toks[j].joined and toks[j].word in FIRST_NAMES and toks[j + 1].joined
           and (_surname_ok(toks[j + 1]) or _particle_at(toks, j + 1, capitalised=False) > j + 1)):
        j += 1
    j = _skip_initials(toks, j)
    j = _particle_at(toks, j, capitalised=True)
    if j < len(toks) and toks[j].joined and _surname_ok(toks[j]):
        return start, _surname_end(toks[j])
    return None


def _from_initials(toks: list[_Token], i: int) -> tuple[int, int] | None:
    """Initials with a particle and a surname ("J.P. de Vries", "A. van Dam"); without the particle, initials
    are too often an abbreviation ("U.S. Army")."""
    j = _skip_initials(toks, i)
    after = _particle_at(toks, j, capitalised=False)
    if after > j and after < len(toks) and toks[after].joined and _surname_ok(toks[after]):
        return toks[i].start, _surname_end(toks[after])
    return None


def find_people(text: str) -> Iterator[Span]:
    toks = _tokens(text)
    i = 0
    while i < len(toks):
        word = toks[i].word
        found = None
        if word in TITLES:
            found = _from_title(toks, i)
        elif word in FIRST_NAMES:
            found = _from_first_name(toks, i)
        elif _is_initial(toks, i) and (i == 0 or toks[i].joined or toks[i - 1].word in _OPENERS):
            found = _from_initials(toks, i)
        if found is not None:
            yield Span(found[0], found[1], "PERSON")
            while i < len(toks) and toks[i].start < found[1]:
                i += 1
        else:
            i += 1
