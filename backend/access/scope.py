"""Scope: what one request reaches. Repositories turn it into WHERE clauses (ARCHITECTURE rule 2)."""

from __future__ import annotations

import copy
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import ColumnElement, Text, false, func, literal, true
from sqlalchemy.dialects.postgresql import ARRAY

from backend.access.policy import (
    Policy,
    Requester,
    Rule,
    decide,
    parse_policy,
    permits_every_row,
    reads_own_and_shared_only,
)
from backend.access.policy_sql import visible_clause, who_params
from backend.access.principal import Principal
from backend.errors import BadRequest

GROUP_ATOM = "label_is_subject"


@dataclass(frozen=True)
class Scope:
    org_id: str
    requester: Requester
    indexes: frozenset[str] | None  # None: every index of the organisation
    rules: tuple[Rule, ...]
    unrestricted: bool  # administrators and the system reach every object of their organisation
    policy: Policy | None = None
    _params: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def subject_id(self) -> str | None:
        return self.requester.subject_id

    def reaches_index(self, index_id: str) -> bool:
        return self.indexes is None or index_id in self.indexes

    def index_clause(self, index_col: Any) -> ColumnElement[bool]:
        if self.indexes is None:
            return true()
        if not self.indexes:
            return false()
        # `= ANY(array)` rather than `IN (…)`: one value, so a statement built once per shape can hold it.
        return index_col == func.any(literal(sorted(self.indexes), ARRAY(Text)))

    def visible(self, kind: str, action: str, owner_col: Any, labels_col: Any, *,
                bound: bool = False) -> ColumnElement[bool]:
        """The policy as SQL; with `bound`, the person's values are the parameters of `params()`."""
        if self.unrestricted:
            return true()
        return visible_clause(self.rules, kind, action, self.requester, owner_col, labels_col, bound=bound)

    def reads_own_and_shared_only(self, kind: str) -> bool:
        """A person who can see only her own objects of `kind` and the shared ones (the default policy)."""
        return not self.unrestricted and reads_own_and_shared_only(self.rules, kind, "see", self.requester)

    def params(self) -> dict[str, Any]:
        """The values of a clause built with `bound=True`."""
        if not self._params:
            self._params.update(who_params(self.rules, self.requester))
        return self._params

    @property
    def shape(self) -> tuple[Any, ...]:
        """What a bound clause's SQL depends on: the same shape, the same statement, whoever the person is."""
        return (self.unrestricted, self.rules, self.requester.subject_id is None, self.indexes)

    def sees_every(self, kind: str, action: str) -> bool:
        """True when `visible(kind, action, ...)` holds for every row, so a statement may leave it out."""
        return self.unrestricted or permits_every_row(self.rules, kind, action, self.requester)

    def may(self, kind: str, action: str, owner: str | None, labels: Mapping[str, Any]) -> bool:
        if self.unrestricted:
            return True
        return decide(self.rules, kind, action, self.requester, owner, labels)


# Parsed policies by the key or organisation they belong to, each kept with the document it was parsed from: a
# cached policy is used only while the row still holds that very document (a dict comparison), so a changed
# policy applies at once and an unchanged one is not parsed again on every request.
_parsed: OrderedDict[tuple[str, Any], tuple[Any, Policy]] = OrderedDict()
_PARSED_SIZE = 4096


def _parse(kind: str, row: Mapping[str, Any], *, org_level: bool) -> Policy:
    cache_key = (kind, row.get("id"))
    document = row["policy"]
    found = _parsed.get(cache_key)
    if found is not None and found[0] == document:
        _parsed.move_to_end(cache_key)
        return found[1]
    policy = parse_policy(document, "org.policy" if org_level else "policy", org_level=org_level)
    _parsed[cache_key] = (copy.deepcopy(document), policy)
    if len(_parsed) > _PARSED_SIZE:
        _parsed.popitem(last=False)
    return policy


def _without_group_reach(rules: tuple[Rule, ...]) -> tuple[Rule, ...]:
    """THR-9: without the deployment setting, a rule that opens threads to the people a label names opens nothing."""
    return tuple(r for r in rules if not (
        r.kind == "thread" and r.effect == "permit" and any(a.atom == GROUP_ATOM for a in r.when)))


def build_scope(principal: Principal, org: Mapping[str, Any] | None, *, group_reach: bool = False,
                require_subject_setting: bool = True) -> Scope:
    """The scope of a data request; applies the key's `subjects_required` setting (PLT-7)."""
    subject = principal.subject
    requester = Requester(subject.id if subject else None, subject.attributes if subject else {})
    org_rules = _parse("org", org, org_level=True).rules if org and org.get("policy") else ()
    if principal.unrestricted:
        rules = org_rules if group_reach else _without_group_reach(org_rules)
        return Scope(principal.org_id, requester, None, rules, unrestricted=True)
    assert principal.key is not None
    policy = _parse("key", principal.key, org_level=False)
    if require_subject_setting and policy.subjects_required and subject is None:
        raise BadRequest("This key's policy requires every request to name a person (X-Core-Subject or a "
                         "subject token).", code="subject_required", param="X-Core-Subject")
    rules = policy.rules + org_rules
    return Scope(principal.org_id, requester, policy.indexes, rules if group_reach else _without_group_reach(rules),
                 unrestricted=False, policy=policy)
