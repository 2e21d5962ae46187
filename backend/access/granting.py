"""What a key that holds `management` may give other keys, and itself (PLT-4): never more than it has."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from backend.access.policy import Atom, Policy, Rule


@dataclass(frozen=True, eq=False)
class _Form:
    """A rule as `_covers` compares it, made once per rule: label conditions and atoms as sets."""

    kind: str
    effect: str
    actions: frozenset[str] | None
    labels: dict[str, frozenset[str]]
    when: frozenset[Atom]

    def key(self) -> tuple[object, ...]:
        return self.kind, self.effect, self.actions, frozenset(self.labels.items()), self.when


def _form(rule: Rule, *, broad: bool) -> _Form:
    labels: dict[str, frozenset[str]] = {}
    for name, values in rule.match_labels:
        # As the broad rule every condition on a repeated name must hold; as the narrow one the last is read.
        labels[name] = labels[name] & frozenset(values) if broad and name in labels else frozenset(values)
    return _Form(rule.kind, rule.effect, rule.actions, labels, frozenset(rule.when))


def _covers(broad: _Form, narrow: _Form) -> bool:
    """True when `broad` matches every object and request that `narrow` matches (a sufficient test): the same
    kind and effect, its actions among broad's, broad's label conditions among narrow's, broad's atoms too."""
    if broad.kind != narrow.kind or broad.effect != narrow.effect:
        return False
    if broad.actions is not None and (narrow.actions is None or not narrow.actions <= broad.actions):
        return False
    for name, values in broad.labels.items():
        if name not in narrow.labels or not narrow.labels[name] <= values:
            return False
    return broad.when <= narrow.when


class _Coverers:
    """Rules filed so that those that could cover a given rule are found without trying every one (PLT-4).

    A rule is filed under one condition that any rule it covers must have: a label (under each of its values,
    one of which the covered rule's values must include) or an atom, whichever is rarest among the rules; a
    rule with neither is tried for every rule of its kind and effect. Equal rules are filed once."""

    def __init__(self, rules: Iterable[Rule]) -> None:
        forms = list({f.key(): f for f in (_form(r, broad=True) for r in rules)}.values())
        counts: Counter[tuple[object, ...]] = Counter()
        for f in forms:
            for name, values in f.labels.items():
                counts.update((f.kind, f.effect, name, v) for v in values)
            counts.update((f.kind, f.effect, a) for a in f.when)
        self.anywhere: defaultdict[tuple[object, ...], list[_Form]] = defaultdict(list)
        self.filed: defaultdict[tuple[object, ...], list[_Form]] = defaultdict(list)
        for f in forms:
            rarest: list[tuple[float, tuple[object, ...]]] = [
                (sum(counts[f.kind, f.effect, name, v] for v in values) / max(len(values), 1), ("label", name))
                for name, values in f.labels.items()]
            rarest += [(counts[f.kind, f.effect, a], ("atom", a)) for a in f.when]
            if not rarest:
                self.anywhere[f.kind, f.effect].append(f)
                continue
            under = min(rarest, key=lambda c: c[0])[1]
            self.filed[f.kind, f.effect, *under].append(f)  # an atom's list, or a label's for no values
            if under[0] == "label":
                for v in f.labels[str(under[1])]:
                    self.filed[f.kind, f.effect, *under, v].append(f)

    def cover(self, rule: Rule) -> bool:
        """Whether some rule here covers `rule` (by `_covers`)."""
        narrow = _form(rule, broad=False)
        at = (narrow.kind, narrow.effect)
        lists = [self.anywhere.get(at, [])]
        for name, values in narrow.labels.items():
            # A rule filed under `name` has every one of these values: look where the fewest rules are filed.
            lists.append(min((self.filed.get((*at, "label", name, v), []) for v in values), key=len)
                         if values else self.filed.get((*at, "label", name), []))
        lists += [self.filed.get((*at, "atom", a), []) for a in narrow.when]
        return any(_covers(f, narrow) for tried in lists for f in tried)


def widening(new: Policy, own: Policy, path: str = "policy") -> tuple[str, str] | None:
    """Where `new` would let a key do more than `own` lets, as (param, reason); None when it does not.

    A key that holds `management` gives other keys (and itself) only what it has: indexes among its own, permit
    rules each covered by one of its own, every deny rule and setting that limits it."""
    if own.indexes is not None:
        if new.indexes is None:
            return f"{path}.indexes", "This key reaches only the indexes its policy names; name some of those " \
                                      "instead of \"*\"."
        extra = sorted(new.indexes - own.indexes)
        if extra:
            return f"{path}.indexes", f"This key does not reach the index {extra[0]}, so it cannot grant it."
    own_permits = _Coverers(r for r in own.rules if r.effect == "permit")
    for i, rule in enumerate(new.rules):
        if rule.effect == "permit" and not own_permits.cover(rule):
            return f"{path}.rules[{i}]", f"The rule {rule.id!r} permits more than this key's own rules do."
    new_denies = _Coverers(r for r in new.rules if r.effect == "deny")
    for mine in own.rules:
        if mine.effect == "deny" and not new_denies.cover(mine):
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
