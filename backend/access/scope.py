"""Scope: what one request reaches. Repositories turn it into WHERE clauses (ARCHITECTURE rule 2)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, false, true

from backend.access.policy import Policy, Requester, Rule, decide, parse_policy, permits_every_row, visible_clause
from backend.access.principal import Principal
from backend.errors import BadRequest


@dataclass(frozen=True)
class Scope:
    org_id: str
    requester: Requester
    indexes: frozenset[str] | None  # None: every index of the organisation
    rules: tuple[Rule, ...]
    unrestricted: bool  # administrators reach every object of their organisation
    policy: Policy | None = None

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
        return index_col.in_(sorted(self.indexes))

    def visible(self, kind: str, action: str, owner_col: Any, labels_col: Any) -> ColumnElement[bool]:
        if self.unrestricted:
            return true()
        return visible_clause(self.rules, kind, action, self.requester, owner_col, labels_col)

    def sees_every(self, kind: str, action: str) -> bool:
        """True when `visible(kind, action, ...)` holds for every row, so a statement may leave it out."""
        return self.unrestricted or permits_every_row(self.rules, kind, action, self.requester)

    def may(self, kind: str, action: str, owner: str | None, labels: Mapping[str, Any]) -> bool:
        if self.unrestricted:
            return True
        return decide(self.rules, kind, action, self.requester, owner, labels)


def build_scope(principal: Principal, org_policy_doc: Mapping[str, Any] | None, *,
                require_subject_setting: bool = True) -> Scope:
    """The scope of a data request; applies the key's `subjects_required` setting (PLT-7)."""
    subject = principal.subject
    requester = Requester(subject.id if subject else None, subject.attributes if subject else {})
    org_rules = parse_policy(org_policy_doc, "org.policy", org_level=True).rules if org_policy_doc else ()
    if principal.is_admin:
        return Scope(principal.org_id, requester, None, org_rules, unrestricted=True)
    assert principal.key is not None
    policy = parse_policy(principal.key["policy"], "policy")
    if require_subject_setting and policy.subjects_required and subject is None:
        raise BadRequest("This key's policy requires every request to name a person (X-Core-Subject or a "
                         "subject token).", code="subject_required", param="X-Core-Subject")
    return Scope(principal.org_id, requester, policy.indexes, policy.rules + org_rules, unrestricted=False,
                 policy=policy)


async def scope_for(db: Any, principal: Principal, *, require_subject_setting: bool = True) -> Scope:
    """Load the organisation's policy and build the request's scope."""
    from backend.domains.orgs import repository as orgs_repo

    org = await orgs_repo.get(db, principal.org_id)
    return build_scope(principal, org["policy"] if org else None, require_subject_setting=require_subject_setting)
