"""The policy decision as SQL (PLT-8, ARCHITECTURE rule 2): the same rules `policy.decide` applies in Python,
rendered as a boolean over a row's owner and labels columns, so every read filters in the database."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import ColumnElement, Text, and_, bindparam, false, func, literal, not_, or_, true
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, array

from backend.access.policy import SUBJECT_LABEL, Atom, Requester, Rule

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
    # An empty list holds no value: absent, as `decide` reads it (erasure can leave `participants: []`).
    absent = or_(not_(labels_col.op("?")(literal(name))), labels_col.op("->")(literal(name)) == literal([], JSONB))
    return func.coalesce(absent, true())


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
