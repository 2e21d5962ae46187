"""TRN-10/EXT-11: `resolve` keeps non-overlapping spans, the longest winning an overlap, then a preferred span, then
the earlier one. It compared each candidate with every span taken, so a text of many findings was quadratic (64 KiB
of e-mail addresses: four seconds under the event loop); it now looks only at the neighbours. Both must choose the
same spans (hypothesis, against the straightforward rule)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from backend.providers.pii.spans import Span, resolve


def _by_the_rule(candidates: list[Span], preferred: list[Span]) -> list[Span]:
    ranked = [(s, 0) for s in preferred] + [(s, 1) for s in candidates]
    ranked.sort(key=lambda p: (-(p[0].end - p[0].start), p[1], p[0].start))
    taken: list[Span] = []
    for span, _ in ranked:
        if span.end > span.start and all(span.end <= t.start or span.start >= t.end for t in taken):
            taken.append(span)
    return sorted(taken, key=lambda s: s.start)


SPANS = st.lists(st.builds(lambda start, length, kind: Span(start, start + length, kind),
                           st.integers(0, 60), st.integers(0, 12), st.sampled_from(["PERSON", "EMAIL", "PHONE"])),
                 max_size=40)


@settings(max_examples=400, deadline=None)
@given(SPANS, SPANS)
def test_trn_10_resolve_takes_the_spans_the_rule_takes(candidates: list[Span], preferred: list[Span]) -> None:
    assert resolve(candidates, preferred) == _by_the_rule(candidates, preferred)


def test_trn_10_resolve_on_many_adjacent_and_nested_findings() -> None:
    emails = [Span(i * 7, i * 7 + 6, "EMAIL") for i in range(5000)]
    inner = [Span(i * 7 + 2, i * 7 + 4, "PERSON") for i in range(5000)]
    assert resolve(inner + emails) == emails
    wide = Span(0, 35_000, "ADDRESS")
    assert resolve([*emails, wide], preferred=inner) == [wide]
