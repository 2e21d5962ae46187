"""One regular expression that finds any of many known values in a text (TRN-10: a value found once is hidden
everywhere), in time that does not grow with the number of values.

A value matches as its words with any run of whitespace between them, in any case, never glued to a letter or
digit ("x+31 6 …" and "abcanna@x.nl" are other strings). At a position the longest value that matches there wins.
The values are laid out as a trie, so at each position of the text the engine follows one path of characters; an
alternation of the values (`anna@x.nl|bob@y.nl|…`) tried every value at every position, which made a long text
with thousands of findings quadratic (128 KiB: 2.7 s, 1 MiB: minutes).

A thread's values grow one by one as texts are hidden. `Values` keeps them in a few patterns of halving size and
compiles each value O(log n) times; rebuilding one pattern of all values for every new value made hiding n
strings with a new value each quadratic (1000 strings: 10 s).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

__all__ = ["Values", "matcher"]

_SPACE = " "  # the unit between two words of a value: any run of whitespace in the text
_END = ""  # marks a node where a value ends
_Trie = dict[str, "_Trie"]  # a unit (a character, or _SPACE) to the node it leads to


def matcher(spellings: Iterable[str]) -> re.Pattern[str] | None:
    """The pattern matching any of `spellings`, or None when there are none."""
    spellings = list(spellings)
    trie: _Trie = {}
    for spelling in spellings:
        node = trie
        for unit in _units(spelling):
            node = node.setdefault(unit, {})
        if node is not trie:
            node[_END] = {}
    if not trie:
        return None
    try:
        return re.compile(r"(?<!\w)" + _render(trie) + r"(?!\w)", re.IGNORECASE)
    except RecursionError:  # values nested hundreds deep ("a", "aa", "aaa", …): one alternative per value
        ordered = sorted(set(spellings), key=lambda s: len(" ".join(s.split())), reverse=True)
        return re.compile(r"(?<!\w)(?:" + "|".join(_words(s) for s in ordered) + r")(?!\w)", re.IGNORECASE)


class Values:
    """Spellings to find, added over time; `finditer` finds what `matcher` of all of them finds. The spellings
    live in levels, each at most half the size of the one before; new ones form a level of their own that is
    merged with the smaller levels before it, so each spelling is compiled again only when its level doubles."""

    def __init__(self, spellings: Iterable[str] = ()) -> None:
        self._levels: list[tuple[list[str], re.Pattern[str] | None]] = []
        self._pending = list(spellings)
        self._size = len(self._pending)

    def add(self, spelling: str) -> None:
        self._pending.append(spelling)
        self._size += 1

    def finditer(self, text: str) -> Iterator[re.Match[str]]:
        """Leftmost first, the longest value at that place, none overlapping: what one pattern finds."""
        if len(self._levels) + bool(self._pending) > 1 and len(text) >= 16 * self._size:
            # scanning a long text once per level costs more than compiling all values into one pattern
            self._pending = [s for level, _ in self._levels for s in level] + self._pending
            self._levels = []
        if self._pending:
            level, self._pending = self._pending, []
            while self._levels and 2 * len(level) > len(self._levels[-1][0]):
                level = self._levels.pop()[0] + level
            self._levels.append((level, matcher(level)))
        patterns = [pattern for _, pattern in self._levels if pattern is not None]
        if len(patterns) <= 1:
            return patterns[0].finditer(text) if patterns else iter(())
        return _leftmost_longest(text, patterns)


def _leftmost_longest(text: str, patterns: list[re.Pattern[str]]) -> Iterator[re.Match[str]]:
    """Each pattern's next match is searched again only once the text taken has passed its start."""
    pos = 0
    upcoming = [pattern.search(text) for pattern in patterns]
    while True:
        best: re.Match[str] | None = None
        for i, found in enumerate(upcoming):
            if found is not None and found.start() < pos:
                found = upcoming[i] = patterns[i].search(text, pos)
            if found is not None and (best is None or (found.start(), -found.end()) < (best.start(), -best.end())):
                best = found
        if best is None:
            return
        yield best
        pos = best.end()


def _words(spelling: str) -> str:
    return r"\s+".join(re.escape(word) for word in spelling.split())


def _units(spelling: str) -> list[str]:
    units: list[str] = []
    for word in spelling.split():
        if units:
            units.append(_SPACE)
        # Case variants share a node ("Anna" and "ANNA"): sibling branches that match the same text could
        # otherwise pick a shorter value before a longer one.
        units.extend(c.lower() if len(c.lower()) == 1 else c for c in word)
    return units


def _render(node: _Trie) -> str:
    """The node's continuations; a node where a value ends makes them optional (greedy: the longest first)."""
    branches = []
    for unit, child in node.items():
        if unit == _END:
            continue
        chain = r"\s+" if unit == _SPACE else re.escape(unit)
        while len(child) == 1 and _END not in child:  # a run of single continuations: no group, no recursion
            unit, child = next(iter(child.items()))
            chain += r"\s+" if unit == _SPACE else re.escape(unit)
        branches.append(chain + _render(child))
    if not branches:
        return ""
    body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
    return f"(?:{body})?" if _END in node else body
