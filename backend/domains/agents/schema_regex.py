"""The regular expressions of a working-state schema run in RE2, in time linear in the text (THR-11/TRN-5).

jsonschema matches `pattern`, `patternProperties` (and, through them, `additionalProperties` and
`unevaluatedProperties`) with Python's backtracking `re`: a schema holding `^(a+)+$` made one state write of 30
characters take minutes, holding the event loop (and the interpreter's lock) the whole time. jsonschema has no
hook for its regex engine, so `install` hands its keyword modules an `re` whose `search` runs in RE2; a pattern RE2
does not run (a look-around or a back-reference) is refused where the schema is saved (`unsupported`), so a
working-state schema never reaches the backtracking engine. Patterns of schemas saved before that check still
match with Python's `re`.
"""

from __future__ import annotations

import re
from functools import cache, lru_cache
from typing import Any

import re2

__all__ = ["install", "unsupported"]

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # a refused pattern is our 422, not a line on the server's stderr


@lru_cache(maxsize=1024)
def _compiled(pattern: str) -> Any:
    try:
        return re2.compile(pattern, _OPTIONS)
    except re2.error:
        return re.compile(pattern)


class _Re2:
    """What jsonschema's keyword modules call on `re`."""

    @staticmethod
    def search(pattern: str, string: str) -> Any:
        return _compiled(pattern).search(string)


@cache
def install() -> None:
    """Make every jsonschema keyword that matches a pattern use RE2 (once per process)."""
    from jsonschema import _keywords, _legacy_keywords, _utils

    for module in (_keywords, _legacy_keywords, _utils):
        module.re = _Re2


def unsupported(pattern: str) -> str | None:
    """Why RE2 cannot run `pattern`, or None when it can."""
    try:
        re2.compile(pattern, _OPTIONS)
    except re2.error as error:
        reason = error.args[0] if error.args else error
        return reason.decode() if isinstance(reason, bytes) else str(reason)
    return None
