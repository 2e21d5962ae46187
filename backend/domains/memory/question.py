"""A search question in parts (MEM-13): plain words, "phrases", -exclusions; `or` between alternatives.

Plain words are alternatives: a record needs one of them, and ranks by how many it has and how rare they are.
A quoted phrase must be in the record, an excluded word or phrase must not. `or` keeps its web-search meaning:
terms it joins are alternatives the record needs one of (`"peanut butter" or jam`, `kitchen or -butter`); between
plain words it changes nothing, they are alternatives already. Stop words and stems are PostgreSQL's business
(the `coremem_en`/`coremem_nl` configurations).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import NamedTuple

from backend.errors import ValidationFailed

MAX_WORDS = 32  # plain words weighed one by one; a longer question keeps its first 32 distinct ones
MAX_PARTS = 8  # required groups, alternatives in a group, and exclusions: more is refused, never cut
MAX_EMBEDDED_CHARS = 2000  # of the question as written, for the query vector
_TOKEN = re.compile(r'(-?)"([^"]*)"?|(\S+)')
_WORD = re.compile(r"\w+(?:[-']\w+)*", re.UNICODE)


class Term(NamedTuple):
    """A phrase or word the record must hold, or (`negated`) one it must not."""

    text: str
    negated: bool = False


@dataclass(frozen=True)
class Question:
    words: tuple[str, ...] = ()
    # What a record must satisfy: in each group, one of its terms. A group is a quoted phrase, or terms joined by
    # `or` among which is a phrase or an exclusion.
    required: tuple[tuple[Term, ...], ...] = ()
    excluded: tuple[str, ...] = ()
    # The question as written without its operators (exclusions, `or`, quote marks): what the query vector embeds.
    written: str = field(default="", compare=False)

    @property
    def empty(self) -> bool:
        return not (self.words or self.required or self.excluded)

    @property
    def shape(self) -> tuple[bool, tuple[tuple[bool, ...], ...], int]:
        """What a search statement for this question depends on: whether it has words, which terms of each
        required group are negated, how many exclusions (the words themselves travel as one array)."""
        return (bool(self.words), tuple(tuple(t.negated for t in group) for group in self.required),
                len(self.excluded))

    def for_embedding(self) -> str:
        """What the question is about as its asker wrote it, without operators: a sentence model reads the sentence
        (case, order and punctuation kept), which measured better than the bag of lowercased words (MEM-13)."""
        return self.written or " ".join(self.words)


_WORD_TERM, _PHRASE, _EXCLUDED = "word", "phrase", "excluded"


def parse(q: str | None, *, param: str = "q") -> Question:
    """The question's parts; 422 naming `param` when it has more phrases, exclusions or alternatives than
    MAX_PARTS of each."""
    words: list[str] = []
    written: list[str] = []
    groups: list[list[tuple[str, str]]] = []  # (kind, text) in order, joined by `or` into groups
    joined = False  # the last term was followed by `or`
    for match in _TOKEN.finditer(q or ""):
        minus, quoted, bare = match.group(1), match.group(2), match.group(3)
        if bare is not None and bare.lower() == "or":
            joined = bool(groups)
            continue
        if bare is not None and not (bare.startswith("-") and len(bare) > 1):
            found = _WORD.findall(bare)
            if found:
                written.append(bare)
                words += found
            term = (_WORD_TERM, " ".join(found))
        elif quoted is not None:
            term = (_EXCLUDED if minus else _PHRASE, " ".join(_WORD.findall(quoted)))
            if term[1] and not minus:
                written.append(quoted.strip())
        else:
            term = (_EXCLUDED, " ".join(_WORD.findall(bare[1:])))
        if not term[1]:
            continue
        if joined:
            groups[-1].append(term)
        else:
            groups.append([term])
        joined = False
    excluded: list[str] = []
    required: list[tuple[Term, ...]] = []
    for group in groups:
        kinds = {kind for kind, _ in group}
        if len(group) == 1 and kinds == {_EXCLUDED}:
            excluded.append(group[0][1])
        elif kinds != {_WORD_TERM}:  # plain words alone are alternatives already
            required.append(tuple(Term(text, kind == _EXCLUDED) for kind, text in group))
    _within_limits(required, excluded, param)
    distinct = list(dict.fromkeys(w.lower() for w in words))[:MAX_WORDS]
    return Question(tuple(distinct), tuple(required), tuple(excluded), " ".join(written)[:MAX_EMBEDDED_CHARS])


def _within_limits(required: list[tuple[Term, ...]], excluded: list[str], param: str) -> None:
    widest = max((len(group) for group in required), default=0)
    if len(required) > MAX_PARTS or len(excluded) > MAX_PARTS or widest > MAX_PARTS:
        raise ValidationFailed(
            f"A question takes at most {MAX_PARTS} quoted phrases (or groups joined by `or`), {MAX_PARTS} "
            f"exclusions and {MAX_PARTS} alternatives in one `or` group; this one has {len(required)}, "
            f"{len(excluded)} and {widest}. Shorten it or split it into several searches.", param=param)
