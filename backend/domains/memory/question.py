"""A search question in parts (MEM-13): plain words, "phrases", -exclusions; `or` between words.

Plain words are alternatives: a record needs one of them, and ranks by how many it has and how rare they are.
A quoted phrase must be in the record, an excluded word or phrase must not; `or` joins alternatives, which plain
words already are. Stop words and stems are PostgreSQL's business (the `coremem_en`/`coremem_nl` configurations).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

MAX_WORDS = 32  # plain words weighed one by one; a longer question keeps its first 32 distinct ones
MAX_PARTS = 8  # phrases and exclusions each
MAX_EMBEDDED_CHARS = 2000  # of the question as written, for the query vector
_TOKEN = re.compile(r'(-?)"([^"]*)"?|(\S+)')
_WORD = re.compile(r"\w+(?:[-']\w+)*", re.UNICODE)


@dataclass(frozen=True)
class Question:
    words: tuple[str, ...] = ()
    phrases: tuple[str, ...] = ()
    excluded: tuple[str, ...] = ()
    # The question as written without its operators (exclusions, `or`, quote marks): what the query vector embeds.
    written: str = field(default="", compare=False)

    @property
    def empty(self) -> bool:
        return not (self.words or self.phrases or self.excluded)

    @property
    def shape(self) -> tuple[int, int, int]:
        """What a statement for this question depends on: how many of each part."""
        return len(self.words), len(self.phrases), len(self.excluded)

    def for_embedding(self) -> str:
        """What the question is about as its asker wrote it, without operators: a sentence model reads the sentence
        (case, order and punctuation kept), which measured better than the bag of lowercased words (MEM-13)."""
        return self.written or " ".join([*self.phrases, *self.words])


def parse(q: str | None) -> Question:
    words: list[str] = []
    phrases: list[str] = []
    excluded: list[str] = []
    written: list[str] = []
    for match in _TOKEN.finditer(q or ""):
        minus, quoted, bare = match.group(1), match.group(2), match.group(3)
        if quoted is not None:
            text = " ".join(_WORD.findall(quoted))
            if text:
                (excluded if minus else phrases).append(text)
                if not minus:
                    written.append(quoted.strip())
            continue
        if bare.lower() == "or":
            continue
        if bare.startswith("-") and len(bare) > 1:
            found = _WORD.findall(bare[1:])
            if found:
                excluded.append(" ".join(found))
            continue
        found = _WORD.findall(bare)
        if found:
            written.append(bare)
        words += found
    distinct = list(dict.fromkeys(w.lower() for w in words))[:MAX_WORDS]
    return Question(tuple(distinct), tuple(phrases[:MAX_PARTS]), tuple(excluded[:MAX_PARTS]),
                    " ".join(written)[:MAX_EMBEDDED_CHARS])
