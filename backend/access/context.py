"""One request context (house rule 11): who asks, their organisation's row, what they reach, the deployment
settings and the audit trail, in the request's (or job's) one transaction.

Every route, and every turn, job and tool that acts for a credential, gets a `RequestContext`; domains never
build a per-request view of their own. The audit writer is handed in by the layer that builds the context
(backend/contexts.py), so this layer imports nothing from the domains.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping
from typing import Any, Protocol

from sqlalchemy.ext.asyncio import AsyncSession

from backend.access.actor import Actor
from backend.access.principal import Principal
from backend.access.scope import Scope, build_scope
from backend.config import Settings
from backend.errors import PolicyDenied


class AuditWriter(Protocol):
    """Appends one event to the organisation's trail in the given transaction (domains/audit/service.record)."""

    def __call__(self, db: AsyncSession, *, org_id: str, actor: Actor, action: str, secret: str,
                 subject_id: str | None = None, object_type: str | None = None, object_id: str | None = None,
                 outcome: str = "allowed", detail: dict[str, Any] | None = None) -> Awaitable[str]: ...


class RequestContext:
    """The per-request view every domain uses; cheap to build, its scope computed once when first asked for."""

    __slots__ = ("_audit", "_management_scope", "_scope", "db", "org", "principal", "settings")

    def __init__(self, db: AsyncSession, principal: Principal, org: Mapping[str, Any] | None, settings: Settings,
                 audit: AuditWriter) -> None:
        self.db = db
        self.principal = principal
        self.org: Mapping[str, Any] = org or {}
        self.settings = settings
        self._audit = audit
        self._scope: Scope | None = None
        self._management_scope: Scope | None = None

    @property
    def org_id(self) -> str:
        return self.principal.org_id

    @property
    def person(self) -> str | None:
        """The person the request is for (PLT-7), or None when it names nobody."""
        subject = self.principal.subject
        return subject.id if subject else None

    @property
    def actor(self) -> Actor:
        return self.principal.actor

    @property
    def is_admin(self) -> bool:
        return self.principal.is_admin

    @property
    def is_subject_token(self) -> bool:
        return self.principal.kind == "subject_token"

    @property
    def scope(self) -> Scope:
        """What a data route reaches; refuses a request naming nobody when the key's policy requires a person."""
        if self._scope is None:
            self._scope = build_scope(self.principal, self.org, group_reach=self.settings.threads_group_reach_by_rule)
        return self._scope

    @property
    def management_scope(self) -> Scope:
        """The same reach for the organisation's management routes, which name nobody by nature (PLT-7)."""
        if self._management_scope is None:
            self._management_scope = build_scope(self.principal, self.org, require_subject_setting=False,
                                                 group_reach=self.settings.threads_group_reach_by_rule)
        return self._management_scope

    # ------------------------------------------------------------ capability gates (one place: Principal)

    def require(self, capability: str) -> None:
        self.principal.require(capability)

    def require_threads(self) -> None:
        self.principal.require_threads()

    def require_management(self) -> None:
        self.principal.require_management()

    def require_admin(self) -> None:
        self.principal.require_admin()

    def refuse_person_named(self, message: str) -> None:
        self.principal.refuse_person_named(message)

    # ------------------------------------------------------------ the audit trail

    async def audit(self, action: str, *, object_type: str | None = None, object_id: str | None = None,
                    detail: dict[str, Any] | None = None, subject_id: str | None = None,
                    outcome: str = "allowed", org_id: str | None = None) -> str:
        """Append an event in this request's transaction (PLT-12); a person is named only by her keyed hash.
        `org_id` names another trail than the request's (an operator acting on an organisation she named)."""
        return await self._audit(self.db, org_id=org_id or self.org_id, actor=self.actor, action=action,
                                 secret=self.settings.secret, subject_id=subject_id, object_type=object_type,
                                 object_id=object_id, outcome=outcome, detail=detail)

    def deny(self, message: str, *, action: str, object_type: str, object_id: str | None = None,
             detail: dict[str, Any] | None = None, param: str | None = None) -> PolicyDenied:
        """A 403 for what the policy refuses; the request rolls back and keeps a `denied` event (backend/http.py)."""
        return PolicyDenied(message, action=action, object_type=object_type, object_id=object_id, detail=detail,
                            param=param, org_id=self.principal.chosen_org_id, actor=self.actor, subject_id=self.person)

    def acting_as(self, principal: Principal) -> RequestContext:
        """The same request seen as another credential (the previewer acts as the key it previews)."""
        return RequestContext(self.db, principal, self.org, self.settings, self._audit)
