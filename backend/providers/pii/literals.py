"""One regular expression that finds any of many known values in a text (TRN-10: a value found once is hidden
everywhere), in time that does not grow with the number of values.

A value matches as its words with any run of whitespace between them, in any case, never glued to a letter or
digit ("x+31 6 …" and "abcanna@x.nl" are other strings). At a position the longest value that matches there wins.
The values are laid out as a trie, so at each position of the text the engine follows one path of characters; an
alternation of the values (`anna@x.nl|bob@y.nl|…`) tried every value at every position, which made a long text
with thousands of findings quadratic (128 KiB: 2.7 s, 1 MiB: minutes).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["matcher"]

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
        ordered = sorted(set(spellings), key=len, reverse=True)
        return re.compile(r"(?<!\w)(?:" + "|".join(_words(s) for s in ordered) + r")(?!\w)", re.IGNORECASE)


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
