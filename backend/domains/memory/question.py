"""A search question in parts (MEM-13): plain words, "phrases", -exclusions; `or` between alternatives.

Plain words are alternatives: a record needs one of them, and ranks by how many it has and how rare they are.
A quoted phrase must be in the record, an excluded word or phrase must not. `or` keeps its web-search meaning:
a phrase joined by `or` to other phrases or words is one of alternatives the record needs one of (between plain
words it changes nothing, they are alternatives already). Stop words and stems are PostgreSQL's business (the
`coremem_en`/`coremem_nl` configurations).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

MAX_WORDS = 32  # plain words weighed one by one; a longer question keeps its first 32 distinct ones
MAX_PARTS = 8  # required groups, alternatives in a group, and exclusions
MAX_EMBEDDED_CHARS = 2000  # of the question as written, for the query vector
_TOKEN = re.compile(r'(-?)"([^"]*)"?|(\S+)')
_WORD = re.compile(r"\w+(?:[-']\w+)*", re.UNICODE)


@dataclass(frozen=True)
class Question:
    words: tuple[str, ...] = ()
    # What a record must hold: each group is a quoted phrase, or phrases and words joined by `or`, of which the
    # record needs one.
    required: tuple[tuple[str, ...], ...] = ()
    excluded: tuple[str, ...] = ()
    # The question as written without its operators (exclusions, `or`, quote marks): what the query vector embeds.
    written: str = field(default="", compare=False)

    @property
    def empty(self) -> bool:
        return not (self.words or self.required or self.excluded)

    @property
    def shape(self) -> tuple[bool, tuple[int, ...], int]:
        """What a search statement for this question depends on: whether it has words, the size of each required
        group, how many exclusions (the words themselves travel as one array)."""
        return bool(self.words), tuple(len(group) for group in self.required), len(self.excluded)

    def for_embedding(self) -> str:
        """What the question is about as its asker wrote it, without operators: a sentence model reads the sentence
        (case, order and punctuation kept), which measured better than the bag of lowercased words (MEM-13)."""
        return self.written or " ".join([*(" ".join(group) for group in self.required), *self.words])


def parse(q: str | None) -> Question:
    words: list[str] = []
    excluded: list[str] = []
    written: list[str] = []
    # Phrases and plain words in order, grouped by `or`: (text, is a phrase) for each.
    groups: list[list[tuple[str, bool]]] = []
    joined = False  # the last term was followed by `or`
    for match in _TOKEN.finditer(q or ""):
        minus, quoted, bare = match.group(1), match.group(2), match.group(3)
        if quoted is not None:
            text = " ".join(_WORD.findall(quoted))
            if not text:
                continue
            if minus:
                excluded.append(text)
                joined = False
                continue
            written.append(quoted.strip())
            term = (text, True)
        elif bare.lower() == "or":
            joined = bool(groups)
            continue
        elif bare.startswith("-") and len(bare) > 1:
            found = _WORD.findall(bare[1:])
            if found:
                excluded.append(" ".join(found))
                joined = False
            continue
        else:
            found = _WORD.findall(bare)
            if not found:
                continue
            written.append(bare)
            words += found
            term = (" ".join(found), False)
        if joined:
            groups[-1].append(term)
        else:
            groups.append([term])
        joined = False
    distinct = list(dict.fromkeys(w.lower() for w in words))[:MAX_WORDS]
    required = [tuple(text for text, _ in group[:MAX_PARTS]) for group in groups if any(p for _, p in group)]
    return Question(tuple(distinct), tuple(required[:MAX_PARTS]), tuple(excluded[:MAX_PARTS]),
                    " ".join(written)[:MAX_EMBEDDED_CHARS])
