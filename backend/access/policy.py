"""The policy engine (PLT-8 … PLT-11): validation, single-object decisions, and the same decision as SQL.

A request may do an action on an object when at least one permit rule of the key's or the organisation's
policy matches and no deny rule matches. `decide` answers that for one object in Python (used for writes,
where the object is the record as it will be written); `policy_sql.visible_clause` renders the same logic as
a SQL boolean over an object's owner and labels columns (used for every read, ARCHITECTURE rule 2). The
table-driven tests check that both agree.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from backend.errors import ValidationFailed

KIND_ACTIONS: dict[str, frozenset[str]] = {
    "memory_record": frozenset({"see", "write", "delete"}),
    "memory_write": frozenset({"write"}),
    "thread": frozenset({"see", "write", "delete"}),
}
ATOMS: dict[str, frozenset[str]] = {
    "subject_is_owner": frozenset(),
    "no_subject": frozenset(),
    "label_is_subject": frozenset({"label"}),
    "label_among": frozenset({"label", "attribute"}),
}
RULE_FIELDS = frozenset({"id", "effect", "kind", "actions", "match", "when"})
POLICY_FIELDS = frozenset({"indexes", "rules", "settings"})
SETTINGS_FIELDS = frozenset({"subjects_required", "writable_labels"})
WRITABLE_LABEL_FIELDS = frozenset({"values", "self", "attribute"})
SUBJECT_LABEL = "subject"  # pseudo-label: the object's owner; "" means shared


def default_policy() -> dict[str, Any]:
    """The document a key gets when created without one (PLT-9); stored verbatim."""

    def three(kind: str, prefix: str) -> list[dict[str, Any]]:
        return [
            {"id": f"{prefix}-own", "effect": "permit", "kind": kind, "when": [{"atom": "subject_is_owner"}]},
            {"id": f"{prefix}-shared" + ("-see" if kind == "thread" else ""), "effect": "permit", "kind": kind,
             "actions": ["see"], "match": {"labels": {SUBJECT_LABEL: ""}}},
            {"id": f"{prefix}-nobody-named", "effect": "permit", "kind": kind, "when": [{"atom": "no_subject"}]},
        ]

    return {"indexes": ["*"], "rules": three("memory_record", "memory-record") + three("thread", "thread"),
            "settings": {}}


def writer_policy() -> dict[str, Any]:
    """The default document plus a rule that permits memory writes (what `coremem bootstrap`'s key gets)."""
    doc = default_policy()
    doc["rules"].append({"id": "memory-write-all", "effect": "permit", "kind": "memory_write"})
    return doc


# ---------------------------------------------------------------- validated form

@dataclass(frozen=True)
class Atom:
    atom: str
    label: str | None = None
    attribute: str | None = None


@dataclass(frozen=True)
class Rule:
    id: str
    effect: str
    kind: str
    actions: frozenset[str] | None
    match_labels: tuple[tuple[str, tuple[str, ...]], ...]
    when: tuple[Atom, ...]

    def covers(self, kind: str, action: str) -> bool:
        return self.kind == kind and (self.actions is None or action in self.actions)

    @cached_property
    def _wanted(self) -> tuple[tuple[str, frozenset[str], bool], ...]:
        """`match_labels` as `_match_python` reads it, made once per rule: per label, the values wanted other
        than "" as a set, and whether "" (the label absent) is wanted."""
        return tuple((name, frozenset(wanted) - {""}, "" in wanted) for name, wanted in self.match_labels)


@dataclass(frozen=True)
class Policy:
    indexes: frozenset[str] | None  # None: every index ("*")
    rules: tuple[Rule, ...]
    subjects_required: bool = False
    writable_labels: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


def _fail(message: str, path: str) -> ValidationFailed:
    return ValidationFailed(message, param=path, code="invalid_policy")


def _check_fields(value: Any, allowed: frozenset[str], path: str) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise _fail("Expected an object.", path)
    for name in value:
        if name not in allowed:
            raise _fail(f"Unknown field `{name}`; allowed: {', '.join(sorted(allowed))}.", f"{path}.{name}")
    return value


def _string(value: Any, path: str, *, allow_empty: bool = False) -> str:
    if not isinstance(value, str) or (not allow_empty and value == ""):
        raise _fail("Expected a non-empty string." if not allow_empty else "Expected a string.", path)
    return value


def _atom(raw: Any, path: str) -> Atom:
    if not isinstance(raw, dict):
        raise _fail("Expected an atom object such as {\"atom\": \"subject_is_owner\"}.", path)
    name = raw.get("atom")
    if name not in ATOMS:
        raise _fail(f"Unknown atom {name!r}; known atoms: {', '.join(sorted(ATOMS))}.", f"{path}.atom")
    needed = ATOMS[name]
    _check_fields(raw, needed | {"atom"}, path)
    for part in needed:
        if part not in raw:
            raise _fail(f"The atom `{name}` needs `{part}`.", f"{path}.{part}")
    return Atom(
        atom=name,
        label=_string(raw["label"], f"{path}.label") if "label" in needed else None,
        attribute=_string(raw["attribute"], f"{path}.attribute") if "attribute" in needed else None,
    )


def _rule(raw: Any, path: str) -> Rule:
    _check_fields(raw, RULE_FIELDS, path)
    rule_id = _string(raw.get("id"), f"{path}.id")
    effect = raw.get("effect")
    if effect not in ("permit", "deny"):
        raise _fail("`effect` must be `permit` or `deny`.", f"{path}.effect")
    kind = raw.get("kind")
    if kind not in KIND_ACTIONS:
        raise _fail(f"Unknown kind {kind!r}; known kinds: {', '.join(sorted(KIND_ACTIONS))}.", f"{path}.kind")
    actions: frozenset[str] | None = None
    if "actions" in raw:
        if not isinstance(raw["actions"], list) or not raw["actions"]:
            raise _fail("`actions` must be a non-empty list.", f"{path}.actions")
        for i, action in enumerate(raw["actions"]):
            if action not in KIND_ACTIONS[kind]:
                raise _fail(f"Unknown action {action!r} for kind `{kind}`; allowed: "
                            f"{', '.join(sorted(KIND_ACTIONS[kind]))}.", f"{path}.actions[{i}]")
        actions = frozenset(raw["actions"])
    match: list[tuple[str, tuple[str, ...]]] = []
    if "match" in raw:
        m = _check_fields(raw["match"], frozenset({"labels"}), f"{path}.match")
        labels = m.get("labels", {})
        if not isinstance(labels, dict):
            raise _fail("Expected an object of label names to values.", f"{path}.match.labels")
        for name, value in labels.items():
            vpath = f"{path}.match.labels.{name}"
            if isinstance(value, str):
                match.append((name, (value,)))
            elif isinstance(value, list) and value and all(isinstance(v, str) for v in value):
                match.append((name, tuple(value)))
            else:
                raise _fail("A label match is a string (\"\" for absent) or a non-empty list of strings.", vpath)
    when: list[Atom] = []
    if "when" in raw:
        if not isinstance(raw["when"], list):
            raise _fail("`when` must be a list of atoms.", f"{path}.when")
        when = [_atom(a, f"{path}.when[{i}]") for i, a in enumerate(raw["when"])]
    return Rule(rule_id, effect, kind, actions, tuple(match), tuple(when))


# The most rules a policy sent to the API may hold. Each request evaluates its key's rules, and checking what a
# management key may grant compares rule with rule: 8,000 rules built to overlap took 45 s there. Stored policies
# are read as they are, so this is checked where a policy is given (`refuse_too_many_rules`), not in parse_policy.
MAX_RULES = 1000


def refuse_too_many_rules(raw: Any, path: str = "policy") -> None:
    rules = raw.get("rules") if isinstance(raw, dict) else None
    if isinstance(rules, list) and len(rules) > MAX_RULES:
        raise _fail(f"A policy holds at most {MAX_RULES:,} rules; this one holds {len(rules):,}. Rules that differ "
                    "only in a label value can be one rule listing the values.", f"{path}.rules[{MAX_RULES}]")


def parse_policy(raw: Any, path: str = "policy", *, org_level: bool = False) -> Policy:
    """Validate a policy document; every problem is a 422 naming its dotted path."""
    _check_fields(raw, POLICY_FIELDS, path)
    indexes: frozenset[str] | None = None
    if not org_level or "indexes" in raw:
        raw_indexes = raw.get("indexes", ["*"])
        if not isinstance(raw_indexes, list):
            raise _fail("`indexes` must be a list of index ids or \"*\".", f"{path}.indexes")
        for i, value in enumerate(raw_indexes):
            if not isinstance(value, str) or not (value == "*" or value.startswith("idx_")):
                raise _fail("Each entry is an index id (`idx_…`) or \"*\".", f"{path}.indexes[{i}]")
        indexes = None if "*" in raw_indexes else frozenset(raw_indexes)
    raw_rules = raw.get("rules", [])
    if not isinstance(raw_rules, list):
        raise _fail("`rules` must be a list.", f"{path}.rules")
    rules = tuple(_rule(r, f"{path}.rules[{i}]") for i, r in enumerate(raw_rules))
    seen: set[str] = set()
    for i, rule in enumerate(rules):
        if rule.id in seen:
            raise _fail(f"Rule id {rule.id!r} is used twice.", f"{path}.rules[{i}].id")
        seen.add(rule.id)
    settings = _check_fields(raw.get("settings", {}), SETTINGS_FIELDS, f"{path}.settings")
    subjects_required = settings.get("subjects_required", False)
    if not isinstance(subjects_required, bool):
        raise _fail("Expected a boolean.", f"{path}.settings.subjects_required")
    writable = settings.get("writable_labels", {})
    if not isinstance(writable, dict):
        raise _fail("Expected an object mapping a label to what may be written under it.",
                    f"{path}.settings.writable_labels")
    for label, spec in writable.items():
        spath = f"{path}.settings.writable_labels.{label}"
        _check_fields(spec, WRITABLE_LABEL_FIELDS, spath)
        if "values" in spec and not (isinstance(spec["values"], list)
                                     and all(isinstance(v, str) for v in spec["values"])):
            raise _fail("Expected a list of strings.", f"{spath}.values")
        if "self" in spec and not isinstance(spec["self"], bool):
            raise _fail("Expected a boolean.", f"{spath}.self")
        if "attribute" in spec:
            _string(spec["attribute"], f"{spath}.attribute")
    return Policy(indexes, rules, subjects_required, copy.deepcopy(writable))


# ---------------------------------------------------------------- decisions

@dataclass(frozen=True)
class Requester:
    """Who the request is for: a person (id and attributes) or nobody."""

    subject_id: str | None
    attributes: Mapping[str, Sequence[str]] = field(default_factory=dict)


def _label_values(labels: Mapping[str, Any], name: str) -> list[str]:
    value = labels.get(name)
    if value is None:
        return []
    if isinstance(value, list):
        return [v for v in value if isinstance(v, str)]
    return [value] if isinstance(value, str) else []


def _match_python(rule: Rule, owner: str | None, labels: Mapping[str, Any]) -> bool:
    # A label matches when it is absent and "" is wanted, or one of its values is wanted (a set lookup per value
    # the object holds, so a rule wanting many values costs no more per object than one wanting few).
    for name, wanted, absent in rule._wanted:
        present = [owner] if name == SUBJECT_LABEL and owner is not None else (
            [] if name == SUBJECT_LABEL else _label_values(labels, name))
        if not ((absent and not present) or any(value in wanted for value in present)):
            return False
    return True


def _atom_python(atom: Atom, who: Requester, owner: str | None, labels: Mapping[str, Any]) -> bool:
    if atom.atom == "no_subject":
        return who.subject_id is None
    if atom.atom == "subject_is_owner":
        return who.subject_id is not None and owner == who.subject_id
    if atom.atom == "label_is_subject":
        return who.subject_id is not None and who.subject_id in _label_values(labels, atom.label or "")
    if atom.atom == "label_among":
        allowed = set(who.attributes.get(atom.attribute or "", ()))
        return who.subject_id is not None and bool(allowed.intersection(_label_values(labels, atom.label or "")))
    raise AssertionError(atom.atom)


def rule_matches(rule: Rule, who: Requester, owner: str | None, labels: Mapping[str, Any]) -> bool:
    return _match_python(rule, owner, labels) and all(_atom_python(a, who, owner, labels) for a in rule.when)


def decide(rules: Sequence[Rule], kind: str, action: str, who: Requester, owner: str | None,
           labels: Mapping[str, Any]) -> bool:
    """True when some permit rule matches and no deny rule matches."""
    relevant = [r for r in rules if r.covers(kind, action)]
    if any(r.effect == "deny" and rule_matches(r, who, owner, labels) for r in relevant):
        return False
    return any(r.effect == "permit" and rule_matches(r, who, owner, labels) for r in relevant)


def permits_every_row(rules: Sequence[Rule], kind: str, action: str, who: Requester) -> bool:
    """True when the decision is `permit` for every object of `kind`, whatever its owner and labels: no deny
    rule applies and some permit rule has no label condition and only atoms that hold for `who` alone
    (`no_subject` for a request naming nobody). Lets a statement leave out a join that could filter nothing."""
    relevant = [r for r in rules if r.covers(kind, action)]
    if any(r.effect == "deny" for r in relevant):
        return False
    return any(r.effect == "permit" and not r.match_labels
               and all(a.atom == "no_subject" and who.subject_id is None for a in r.when) for r in relevant)


def reads_own_and_shared_only(rules: Sequence[Rule], kind: str, action: str, who: Requester) -> bool:
    """True when a request naming a person can reach only her own objects of `kind` and the shared ones: every
    permit rule requires her as the owner, or matches only objects with no owner. Deny rules only take away.
    Lets a search rank her own records exactly and the shared ones through an index of the shared alone."""
    if who.subject_id is None:
        return False

    def bounded(rule: Rule) -> bool:
        owners = dict(rule.match_labels).get(SUBJECT_LABEL)
        return (any(a.atom in ("subject_is_owner", "no_subject") for a in rule.when)
                or (owners is not None and set(owners) <= {""}))

    return all(bounded(r) for r in rules if r.covers(kind, action) and r.effect == "permit")


__all__ = ("MAX_RULES", "SUBJECT_LABEL", "Atom", "Policy", "Requester", "Rule", "decide", "default_policy",
           "parse_policy", "permits_every_row", "reads_own_and_shared_only", "refuse_too_many_rules", "rule_matches",
           "writer_policy")
