"""PLT-8: a rule's label condition is decided per object with a set lookup per value the object holds.

`_match_python` looked each wanted value up in the list of the object's values: a rule wanting tens of thousands
of values cost ~0.25 s per record of a batch write (a batch of ~580 records, minutes). The wanted values are now a
set made once per rule. It must answer exactly what the list lookups answered, for any JSON the labels hold
(hypothesis, against the list version written out here), and compare values a number of times that grows with
the object's values, not with the rule's (counted by the values' own `==`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from backend.access.policy import SUBJECT_LABEL, Requester, Rule, _match_python, decide, parse_policy


def _label_values_plain(labels: Mapping[str, Any], name: str) -> list[str]:
    value = labels.get(name)
    if value is None:
        return []
    if isinstance(value, list):
        return [v for v in value if isinstance(v, str)]
    return [value] if isinstance(value, str) else []


def _match_plain(rule: Rule, owner: str | None, labels: Mapping[str, Any]) -> bool:
    """The list lookups `_match_python` made before (the reference)."""
    for name, wanted in rule.match_labels:
        present = [owner] if name == SUBJECT_LABEL and owner is not None else (
            [] if name == SUBJECT_LABEL else _label_values_plain(labels, name))
        if not any((not present) if value == "" else value in present for value in wanted):
            return False
    return True


WORDS = st.sampled_from(["", "a", "b", "1", "True", "anna"])
NAMES = st.sampled_from([SUBJECT_LABEL, "d", "p"])
SCALAR = st.none() | st.booleans() | st.integers(-2, 2) | st.floats(allow_nan=False, width=16) | WORDS
JSON = st.recursive(SCALAR, lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.sampled_from(["a", "1"]), inner, max_size=2), max_leaves=6)
LABELS = st.dictionaries(NAMES, JSON | st.lists(SCALAR, max_size=4), max_size=3)
RULE = st.builds(lambda labels: Rule("r", "permit", "memory_record", None, tuple(labels), ()),
                 st.lists(st.tuples(NAMES, st.lists(WORDS, max_size=4).map(tuple)), max_size=3))


@given(RULE, st.none() | WORDS, LABELS)
@settings(max_examples=1500, deadline=None)
def test_plt_8_set_lookups_answer_exactly_what_list_lookups_answered(rule: Rule, owner: str | None,
                                                                     labels: dict[str, Any]) -> None:
    assert _match_python(rule, owner, labels) == _match_plain(rule, owner, labels)


class _Counted(str):
    """A label value that counts how often it is compared for equality."""

    compared = 0

    def __eq__(self, other: object) -> bool:
        _Counted.compared += 1
        return str.__eq__(self, other)

    __hash__ = str.__hash__


WANTED = 3000
HELD = 200  # every pair would be 600k comparisons


def test_plt_8_a_rule_wanting_many_values_compares_each_held_value_about_once() -> None:
    rules = parse_policy({"rules": [{"id": "many", "effect": "permit", "kind": "memory_write",
                                     "match": {"labels": {"team": [f"v{i}" for i in range(WANTED)]}}}]}).rules
    who = Requester("s")
    held = [_Counted(f"w{i}") for i in range(HELD)]
    _Counted.compared = 0
    assert decide(rules, "memory_write", "write", who, "s", {"team": held}) is False
    assert _Counted.compared <= HELD
    _Counted.compared = 0
    assert decide(rules, "memory_write", "write", who, "s", {"team": [*held, _Counted(f"v{WANTED - 1}")]}) is True
    assert _Counted.compared <= HELD + 1
