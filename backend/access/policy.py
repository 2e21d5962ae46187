"""The policy engine (PLT-8 … PLT-11): validation, single-object decisions, and the same decision as SQL.

A request may do an action on an object when at least one permit rule of the key's or the organisation's
policy matches and no deny rule matches. `decide` answers that for one object in Python (used for writes,
where the object is the record as it will be written); `visible_clause` renders the same logic as a SQL
boolean over an object's owner and labels columns (used for every read, ARCHITECTURE rule 2). The
table-driven tests check that both agree.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import ColumnElement, Text, and_, bindparam, false, func, literal, not_, or_, true
from sqlalchemy.dialects.postgresql import ARRAY, array

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
RULE_FIELDS = frozenset({"id", "effect", "kind", "actions", "match", "when", "description"})
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


# ---------------------------------------------------------------- granting (PLT-4)

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
    for name, wanted in rule.match_labels:
        present = [owner] if name == SUBJECT_LABEL and owner is not None else (
            [] if name == SUBJECT_LABEL else _label_values(labels, name))
        if not any((not present) if value == "" else value in present for value in wanted):
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


# ---------------------------------------------------------------- the same decision, in SQL

# Every test below is two-valued (TRUE or FALSE, never NULL), as `decide` is. Under a deny rule's NOT, a NULL
# would read as "hidden": `owner = 'bob'` is NULL on a shared row, so a rule denying Bob's rows hid every shared
# one. `x IS NOT NULL AND x = v` is FALSE there and still lets the planner use an index on `x = v`.

def _equals(column: Any, value: Any) -> ColumnElement[bool]:
    return and_(column.is_not(None), column == value)


def _has_label_value(labels_col: Any, name: str, value: Any) -> ColumnElement[bool]:
    # A label holds a string or a list of strings; jsonb containment covers both and can use a GIN index.
    value = value if isinstance(value, ColumnElement) else literal(value)
    as_string = labels_col.op("@>")(func.jsonb_build_object(literal(name), value))
    as_list = labels_col.op("@>")(func.jsonb_build_object(literal(name), func.jsonb_build_array(value)))
    return and_(labels_col.is_not(None), or_(as_string, as_list))


def _label_absent(labels_col: Any, name: str) -> ColumnElement[bool]:
    return not_(func.coalesce(labels_col.op("?")(literal(name)), false()))


def _match_sql(rule: Rule, owner_col: Any, labels_col: Any) -> ColumnElement[bool]:
    parts: list[ColumnElement[bool]] = []
    for name, wanted in rule.match_labels:
        options: list[ColumnElement[bool]] = []
        for value in wanted:
            if name == SUBJECT_LABEL:
                options.append(owner_col.is_(None) if value == "" else _equals(owner_col, literal(value)))
            else:
                options.append(_label_absent(labels_col, name) if value == "" else
                               _has_label_value(labels_col, name, value))
        parts.append(or_(*options))
    return and_(true(), *parts)


SUBJECT_PARAM = "who_subject"


def attribute_names(rules: Sequence[Rule]) -> list[str]:
    """The subject attributes the rules' `label_among` atoms read, in the order their parameters are numbered."""
    return sorted({a.attribute or "" for r in rules for a in r.when if a.atom == "label_among"})


def who_params(rules: Sequence[Rule], who: Requester) -> dict[str, Any]:
    """The values a clause built with `bound=True` takes: the person's id and her attribute values."""
    params: dict[str, Any] = {SUBJECT_PARAM: who.subject_id}
    for i, name in enumerate(attribute_names(rules)):
        params[f"who_attr_{i}"] = [v for v in who.attributes.get(name, ()) if isinstance(v, str)]
    return params


class _Who:
    """The requester inside a clause: her values written in, or (bound) parameters that `who_params` fills, so
    one statement serves every person of the same policy."""

    def __init__(self, rules: Sequence[Rule], who: Requester, bound: bool) -> None:
        self.who = who
        self.bound = bound
        self.attributes = {name: i for i, name in enumerate(attribute_names(rules))} if bound else {}

    def subject(self) -> Any:
        return bindparam(SUBJECT_PARAM, type_=Text) if self.bound else literal(self.who.subject_id)

    def attribute(self, name: str) -> Any | None:
        if self.bound:
            return bindparam(f"who_attr_{self.attributes[name]}", type_=ARRAY(Text))
        values = [v for v in self.who.attributes.get(name, ()) if isinstance(v, str)]
        return array(values) if values else None


def _atom_sql(atom: Atom, who: _Who, owner_col: Any, labels_col: Any) -> ColumnElement[bool]:
    if atom.atom == "no_subject":
        return true() if who.who.subject_id is None else false()
    if who.who.subject_id is None:
        return false()
    if atom.atom == "subject_is_owner":
        return _equals(owner_col, who.subject())
    if atom.atom == "label_is_subject":
        return _has_label_value(labels_col, atom.label or "", who.subject())
    if atom.atom == "label_among":
        values = who.attribute(atom.attribute or "")
        if values is None:
            return false()
        return func.coalesce(labels_col[atom.label or ""].op("?|")(values), false())
    raise AssertionError(atom.atom)


def _rule_sql(rule: Rule, who: _Who, owner_col: Any, labels_col: Any) -> ColumnElement[bool]:
    return and_(_match_sql(rule, owner_col, labels_col), *[_atom_sql(a, who, owner_col, labels_col) for a in rule.when])


def visible_clause(rules: Sequence[Rule], kind: str, action: str, who: Requester, owner_col: Any,
                   labels_col: Any, *, bound: bool = False) -> ColumnElement[bool]:
    """SQL boolean: some permit rule matches the row and no deny rule does.

    With `bound`, the person's id and attribute values are parameters (`who_params`), so the statement depends
    only on the rules and on whether the request names a person."""
    relevant = [r for r in rules if r.covers(kind, action)]
    requester = _Who(rules, who, bound)
    permits = [_rule_sql(r, requester, owner_col, labels_col) for r in relevant if r.effect == "permit"]
    denies = [_rule_sql(r, requester, owner_col, labels_col) for r in relevant if r.effect == "deny"]
    if not permits:
        return false()
    clause = or_(*permits)
    if denies:
        clause = and_(clause, not_(or_(*denies)))
    return clause


__all__ = ("SUBJECT_PARAM", "Atom", "Policy", "Requester", "Rule", "attribute_names", "decide", "default_policy",
           "parse_policy", "permits_every_row", "visible_clause", "who_params", "widening", "writer_policy")
