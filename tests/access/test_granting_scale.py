"""PLT-4: what a key may grant is decided without comparing every new rule with every rule of its own.

`widening` compared each new permit rule with each of the granter's permit rules (and each of its deny rules with
each new deny rule): a 1 MiB policy took about a minute on the event loop. Rules are now filed by a condition any
rule they cover must have, so only a few are tried. It must answer exactly what the plain comparison answered
(hypothesis, against that comparison written out here), and try a number of pairs that grows with the rules, not
with their product (counted through `_covers`, the one comparison of two rules)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from backend.access import granting
from backend.access.granting import widening
from backend.access.policy import Atom, Policy, Rule, parse_policy


def _covers_plain(broad: Rule, narrow: Rule) -> bool:
    if broad.kind != narrow.kind or broad.effect != narrow.effect:
        return False
    if broad.actions is not None and (narrow.actions is None or not narrow.actions <= broad.actions):
        return False
    narrow_labels = dict(narrow.match_labels)
    for name, values in broad.match_labels:
        if name not in narrow_labels or not set(narrow_labels[name]) <= set(values):
            return False
    return set(broad.when) <= set(narrow.when)


def _widening_plain(new: Policy, own: Policy, path: str = "policy") -> tuple[str, str] | None:
    """The comparison of every pair, as `widening` made it before rules were filed (the reference)."""
    if own.indexes is not None:
        if new.indexes is None:
            return f"{path}.indexes", "This key reaches only the indexes its policy names; name some of those " \
                                      "instead of \"*\"."
        extra = sorted(new.indexes - own.indexes)
        if extra:
            return f"{path}.indexes", f"This key does not reach the index {extra[0]}, so it cannot grant it."
    own_permits = [r for r in own.rules if r.effect == "permit"]
    for i, rule in enumerate(new.rules):
        if rule.effect == "permit" and not any(_covers_plain(mine, rule) for mine in own_permits):
            return f"{path}.rules[{i}]", f"The rule {rule.id!r} permits more than this key's own rules do."
    new_denies = [r for r in new.rules if r.effect == "deny"]
    for mine in own.rules:
        if mine.effect == "deny" and not any(_covers_plain(rule, mine) for rule in new_denies):
            return f"{path}.rules", f"This key's own deny rule {mine.id!r} must stay: without it the policy " \
                                    "would permit more than this key may."
    if own.subjects_required and not new.subjects_required:
        return f"{path}.settings.subjects_required", "This key must name a person on every request, and so " \
                                                    "must every key it makes."
    for label, mine_spec in own.writable_labels.items():
        spec = new.writable_labels.get(label)
        where = f"{path}.settings.writable_labels.{label}"
        if spec is None:
            return where, f"This key limits what a person writes under `{label}`; keep that limit."
        if not set(spec.get("values", [])) <= set(mine_spec.get("values", [])) \
                or (spec.get("self") and not mine_spec.get("self")) \
                or (spec.get("attribute") not in (None, mine_spec.get("attribute"))):
            return where, f"This lets a person write more under `{label}` than this key does."
    return None


# Small universes, so that rules often cover each other and often just fail to. Rules are built directly, so
# that shapes the parser never makes (a label named twice, an empty list of values) are compared too.
ATOMS = st.sampled_from([Atom("subject_is_owner"), Atom("no_subject"), Atom("label_is_subject", "p"),
                         Atom("label_among", "d", "dep"), Atom("label_among", "d", "team")])
VALUES = st.lists(st.sampled_from(["", "a", "b", "c"]), max_size=3).map(tuple)
LABELS = st.lists(st.tuples(st.sampled_from(["subject", "d", "p"]), VALUES), max_size=3).map(tuple)
ACTIONS = st.none() | st.frozensets(st.sampled_from(["see", "write", "delete"]), min_size=1)


@st.composite
def _rules(draw: Any, prefix: str) -> tuple[Rule, ...]:
    count = draw(st.integers(0, 8))
    return tuple(Rule(f"{prefix}{i}", draw(st.sampled_from(["permit", "permit", "deny"])),
                      draw(st.sampled_from(["memory_record", "thread"])), draw(ACTIONS), draw(LABELS),
                      tuple(draw(st.lists(ATOMS, max_size=2)))) for i in range(count))


@given(_rules("new"), _rules("own"))
@settings(max_examples=600, deadline=None)
def test_plt_4_filed_rules_answer_exactly_what_every_pair_answered(new: tuple[Rule, ...],
                                                                   own: tuple[Rule, ...]) -> None:
    for granted, granter in ((new, own), (own, own), (own + new, own)):
        assert widening(Policy(None, granted), Policy(None, granter)) == _widening_plain(Policy(None, granted),
                                                                                          Policy(None, granter))


def _policy(rules: list[dict[str, Any]]) -> Policy:
    return parse_policy({"indexes": ["*"], "rules": rules})


def _permit(i: int, **extra: Any) -> dict[str, Any]:
    return {"id": f"r{i}", "effect": "permit", "kind": "memory_record", "match": {"labels": {"t": [f"x{i}"]}},
            **extra}


@pytest.fixture
def pairs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many times two rules are compared (`_covers` counted, then called as it is)."""
    count = [0]
    compare = granting._covers

    def counted(*args: Any) -> bool:
        count[0] += 1
        return compare(*args)

    monkeypatch.setattr(granting, "_covers", counted)
    return count


N = 1500  # rules: every pair would be 1.1M comparisons


def test_plt_4_each_new_permit_rule_is_compared_with_few_of_the_granters(pairs: list[int]) -> None:
    own = _policy([_permit(i) for i in range(N)])
    new = _policy([_permit(i) for i in reversed(range(N))])
    assert widening(new, own) is None
    assert pairs[0] <= 2 * N
    # The last rule is one the granter does not have: found, named, and still few comparisons.
    wider = _policy([_permit(i) for i in reversed(range(N))] + [_permit(N)])
    pairs[0] = 0
    assert widening(wider, own) == ("policy.rules[1500]", "The rule 'r1500' permits more than this key's own "
                                                          "rules do.")
    assert pairs[0] <= 2 * N


def test_plt_4_each_own_deny_rule_is_compared_with_few_new_deny_rules(pairs: list[int]) -> None:
    deny = [{**_permit(i), "effect": "deny", "when": [{"atom": "label_is_subject", "label": f"p{i}"}]}
            for i in range(N)]
    own = _policy([*deny, _permit(N)])
    assert widening(_policy([*reversed(deny), _permit(N)]), own) is None
    assert pairs[0] <= 2 * N
    pairs[0] = 0
    assert widening(_policy([*deny[1:], _permit(N)]), own) == (
        "policy.rules", "This key's own deny rule 'r0' must stay: without it the policy would permit more than "
                        "this key may.")
    assert pairs[0] <= 2 * N
