"""Who is calling: a key, an administrator, a subject token or the system, and the person the request is for."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from backend.access import credentials
from backend.access import repository as repo
from backend.access.actor import Actor
from backend.access.subjects import Subject, combine, parse_subject, subject_from_header
from backend.errors import BadRequest, CapabilityMissing, Forbidden, NotFound, ThreadsCapabilityMissing, Unauthorized

ALL_CAPABILITIES = frozenset({"knowledge", "memory", "threads", "tooling", "compaction", "management",
                              "trust_envelope"})
ORG_HEADER = "X-Core-Org"
KEY_USE_RESOLUTION = timedelta(minutes=1)  # a key's last use is written at most this often


@dataclass(frozen=True)
class Principal:
    """The caller. Its capability gates are the one place a route checks what a credential may do."""

    kind: str  # key | admin | subject_token | system
    chosen_org_id: str | None  # None only for an operator who has not named an organisation
    actor: Actor
    capabilities: frozenset[str]
    subject: Subject | None
    key: dict[str, Any] | None = None  # the api_keys row, for keys and subject tokens
    admin: dict[str, Any] | None = None

    @property
    def org_id(self) -> str:
        if self.chosen_org_id is None:
            raise BadRequest(f"An operator names the organisation with the {ORG_HEADER} header.",
                             param=ORG_HEADER, code="org_required")
        return self.chosen_org_id

    @property
    def is_operator(self) -> bool:
        return self.admin is not None and self.admin["role"] == "operator"

    @property
    def is_admin(self) -> bool:
        return self.kind == "admin"

    @property
    def unrestricted(self) -> bool:
        """Administrators and the system reach every object of their organisation (not bound by key policies)."""
        return self.kind in ("admin", "system")

    @property
    def key_id(self) -> str | None:
        return self.key["id"] if self.key else None

    def require(self, capability: str) -> None:
        if capability not in self.capabilities:
            raise CapabilityMissing(capability)

    def require_threads(self) -> None:
        """PLT-6: without `threads` nothing was kept, and every stored-conversation route says so with a 404."""
        if "threads" not in self.capabilities:
            raise ThreadsCapabilityMissing()

    def require_management(self) -> None:
        """Organisation management: administrators, or a key holding `management`; never a subject token."""
        if self.kind == "subject_token":
            raise Forbidden("A subject token cannot use the organisation's management routes.",
                            code="subject_token_forbidden")
        if self.kind == "key":
            self.require("management")

    def require_admin(self) -> None:
        if self.kind != "admin":
            raise Forbidden("Only an administrator may do this.", code="admin_required")

    def refuse_subject_token(self, what: str) -> None:
        if self.kind == "subject_token":
            raise Forbidden(f"A subject token cannot {what}.", code="subject_token_forbidden")

    def refuse_person_named(self, message: str) -> None:
        """The organisation's own routes (PLT-7): a key naming a person in `X-Core-Subject` asks for her, and these
        answers span every person; `message` says what to send instead."""
        if self.kind == "key" and self.subject is not None:
            raise Forbidden(message, param="X-Core-Subject", code="subject_named")


def system_principal(org_id: str, actor: Actor) -> Principal:
    """Work the platform does itself (the CLI, jobs): every capability, the whole organisation, nobody named."""
    return Principal("system", org_id, actor, ALL_CAPABILITIES, None)


def _bearer(authorization: str | None) -> str:
    if not authorization or authorization.strip().lower() == "bearer":
        raise Unauthorized("Send `Authorization: Bearer <key, administrator token or subject token>`.",
                           code="missing_credential")
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthorized("The Authorization header must read `Bearer <credential>`.", code="bad_credential")
    return token.strip()


def _key_usable(key: dict[str, Any] | None) -> dict[str, Any]:
    if key is None:
        raise Unauthorized("This credential is not known.", code="bad_credential")
    if key["revoked_at"] is not None:
        raise Unauthorized("This key has been revoked.", code="key_revoked")
    if key["expires_at"] is not None and key["expires_at"] <= datetime.now(UTC):
        raise Unauthorized("This key has expired.", code="key_expired")
    return key


async def _used(db: AsyncSession, key: dict[str, Any]) -> dict[str, Any]:
    """Note the key's use to the minute: a write at most once a minute per key, never on every request."""
    last = key.get("last_used_at")
    if last is None or datetime.now(UTC) - last >= KEY_USE_RESOLUTION:
        await repo.touch_key(db, key["org_id"], key["id"])
    return key


def _token_subject(claims: dict[str, Any] | None) -> tuple[dict[str, Any], Subject]:
    """A subject token's claims and the person it names. Only this server signs them, but a token signed with the
    same secret by another tool must be a refused credential, not a crash: its ids and attributes are checked as a
    header's are."""
    refused = Unauthorized("This subject token is invalid or has expired.", code="bad_credential")
    if claims is None or not all(isinstance(claims[k], str) for k in ("org", "kid")):
        raise refused
    try:
        return claims, parse_subject({"id": claims["sub"], "attributes": claims.get("attrs") or {}}, "token")
    except BadRequest:
        raise refused from None


async def resolve(db: AsyncSession, *, secret: str, authorization: str | None, subject_header: str | None,
                  org_header: str | None, path_org_id: str | None = None
                  ) -> tuple[Principal, dict[str, Any] | None]:
    """The caller and its organisation's row (None only for an operator who names no organisation)."""
    token = _bearer(authorization)
    header_subject = subject_from_header(subject_header)
    if token.startswith(credentials.KEY_PREFIX):
        found, org = await repo.key_by_secret_hash(db, credentials.hash_secret(token))
        key = await _used(db, _key_usable(found))
        return Principal("key", key["org_id"], Actor("key", key["id"]), frozenset(key["capabilities"]),
                         header_subject, key=key), org
    if token.startswith(credentials.SUBJECT_TOKEN_PREFIX):
        claims, token_subject = _token_subject(credentials.read_subject_token(secret, token))
        found, org = await repo.key_by_id(db, claims["org"], claims["kid"])
        key = await _used(db, _key_usable(found))
        subject = combine(token_subject, header_subject)
        return Principal("subject_token", key["org_id"], Actor("subject", key["id"]),
                         frozenset(key["capabilities"]), subject, key=key), org
    if token.startswith(credentials.ADMIN_TOKEN_PREFIX):
        admin, org = await repo.admin_by_token_hash(db, credentials.hash_secret(token))
        if admin is None or admin["expires_at"] <= datetime.now(UTC):
            raise Unauthorized("This administrator token is invalid or has expired; log in again.",
                               code="bad_credential")
        org_id = admin["org_id"]
        if admin["role"] == "operator":
            org_id = path_org_id or org_header
            org = await repo.org(db, org_id) if org_id else None
            if org_id and org is None:
                raise NotFound("No such organisation.", param=ORG_HEADER)
        return Principal("admin", org_id, Actor("admin", admin["id"]), ALL_CAPABILITIES, header_subject,
                         admin=admin), org
    raise Unauthorized("This credential is not known.", code="bad_credential")
