"""What a key that holds `management` may give other keys, and itself (PLT-4): never more than it has."""

from __future__ import annotations

from backend.access.policy import Policy, Rule


def _covers(broad: Rule, narrow: Rule) -> bool:
    """True when `broad` matches every object and request that `narrow` matches (a sufficient test): the same
    kind and effect, its actions among broad's, broad's label conditions among narrow's, broad's atoms too."""
    if broad.kind != narrow.kind or broad.effect != narrow.effect:
        return False
    if broad.actions is not None and (narrow.actions is None or not narrow.actions <= broad.actions):
        return False
    narrow_labels = dict(narrow.match_labels)
    for name, values in broad.match_labels:
        if name not in narrow_labels or not set(narrow_labels[name]) <= set(values):
            return False
    return set(broad.when) <= set(narrow.when)


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
    own_permits = [r for r in own.rules if r.effect == "permit"]
    for i, rule in enumerate(new.rules):
        if rule.effect == "permit" and not any(_covers(mine, rule) for mine in own_permits):
            return f"{path}.rules[{i}]", f"The rule {rule.id!r} permits more than this key's own rules do."
    new_denies = [r for r in new.rules if r.effect == "deny"]
    for mine in own.rules:
        if mine.effect == "deny" and not any(_covers(rule, mine) for rule in new_denies):
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
