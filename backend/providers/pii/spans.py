"""What a detector answers (TRN-10, EXT-11): spans of personal data in a text, each with its kind."""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterable
from dataclasses import dataclass

# The kinds the default detector finds; a plugged detector may name others of the same shape.
KINDS = ("PERSON", "EMAIL", "PHONE", "IBAN", "CARD", "URL", "ADDRESS")
KIND_SHAPE = re.compile(r"[A-Z][A-Z0-9]{0,31}")


class PiiUnavailable(Exception):
    """Personal data could not be hidden (the detector failed or is missing): nothing may be sent (EXT-11)."""

    code = "pii_unavailable"


@dataclass(frozen=True, slots=True)
class Span:
    """`text[start:end]` is personal data of `kind` (`PERSON`, `EMAIL`, ...)."""

    start: int
    end: int
    kind: str

    def value(self, text: str) -> str:
        return text[self.start:self.end]


def resolve(candidates: Iterable[Span], preferred: Iterable[Span] = ()) -> list[Span]:
    """Non-overlapping spans in text order: the longest candidate wins an overlap; at equal length a
    `preferred` span (a value the thread already knows) beats a newly detected one, then the earlier one."""
    ranked = [(s, 0) for s in preferred] + [(s, 1) for s in candidates]
    ranked.sort(key=lambda p: (-(p[0].end - p[0].start), p[1], p[0].start))
    # The spans taken are disjoint, so ordered by start they are ordered by end too: a candidate can only overlap
    # its neighbours in that order. (Comparing it with every span taken made a text of many findings quadratic:
    # 64 KiB of e-mail addresses took four seconds.)
    starts: list[int] = []
    taken: list[Span] = []
    for span, _ in ranked:
        if span.end <= span.start:
            continue
        at = bisect_right(starts, span.start)
        if (at > 0 and taken[at - 1].end > span.start) or (at < len(taken) and taken[at].start < span.end):
            continue
        starts.insert(at, span.start)
        taken.insert(at, span)
    return taken
