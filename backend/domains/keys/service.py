"""Keys, capabilities, the key's own document and subject tokens (PLT-4 … PLT-7, PLT-9)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import msgspec
from sqlalchemy.ext.asyncio import AsyncSession

from backend.access import credentials
from backend.access.actor import Actor
from backend.access.context import RequestContext
from backend.access.granting import widening
from backend.access.policy import default_policy, parse_policy, refuse_too_many_rules
from backend.access.principal import ALL_CAPABILITIES, Principal
from backend.access.subjects import check_attributes
from backend.domains.audit import service as audit
from backend.domains.indexes import repository as indexes_repo
from backend.domains.injection.config import require_store
from backend.domains.keys import repository as repo
from backend.errors import BadRequest, Conflict, Forbidden, NotFound, ValidationFailed
from backend.ids import new_id
from backend.params import Page
from shared.schemas.platform import KeyCreate, KeyMemoryConfig, KeyPatch, KeyPrivacy, SubjectTokenIn

GRANTABLE = ALL_CAPABILITIES


def key_status(row: dict[str, Any]) -> str:
    if row["revoked_at"] is not None:
        return "revoked"
    if row["expires_at"] is not None and row["expires_at"] <= datetime.now(UTC):
        return "expired"
    return "active"


def key_document(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": row["id"], "org_id": row["org_id"], "name": row["name"], "capabilities": row["capabilities"],
        "memory": row["memory"], "policy": row["policy"], "privacy": row["privacy"], "expires_at": row["expires_at"],
        "revoked_at": row["revoked_at"], "status": key_status(row), "created_at": row["created_at"],
        "updated_at": row["updated_at"], "last_used_at": row.get("last_used_at"),
    }


def _snapshot(row: dict[str, Any]) -> dict[str, Any]:
    doc = key_document(row)
    return msgspec.to_builtins({k: doc[k] for k in ("name", "capabilities", "memory", "policy", "privacy", "expires_at",
                                                    "revoked_at", "status")})


def audited_policy(policy: Mapping[str, Any] | None, *, secret: str, org_id: str) -> dict[str, Any] | None:
    """A policy as the audit trail names it (PLT-12): its indexes, its rules' ids, effects and kinds, the names of its
    settings and a digest of the whole document, which tells two versions apart; label values and writable values,
    which hold person ids, stay out. The digest is keyed like a person's id (the same HMAC), so nobody can confirm
    a guessed id by hashing a policy with it."""
    if policy is None:
        return None
    canonical = json.dumps(policy, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return {"indexes": policy.get("indexes"),
            "rules": [{k: rule.get(k) for k in ("id", "effect", "kind")} for rule in policy.get("rules", [])],
            "settings": sorted(policy.get("settings") or {}),
            "digest": audit.subject_hash(secret, org_id, canonical)}


def _audited(row: dict[str, Any], secret: str) -> dict[str, Any]:
    """The key's snapshot for the organisation's audit trail: its policy as `audited_policy` names it."""
    snapshot = _snapshot(row)
    return {**snapshot, "policy": audited_policy(snapshot["policy"], secret=secret, org_id=row["org_id"])}


def check_capabilities(requested: list[str], granter: Principal | None) -> list[str]:
    caps = sorted(set(requested))
    if "memory" in caps and "knowledge" not in caps:
        raise ValidationFailed("The `memory` capability needs `knowledge` too.", param="capabilities",
                               code="capability_dependency")
    if granter is not None and not granter.is_admin:
        if "management" in caps:
            raise Forbidden("Only an administrator grants `management`.", param="capabilities",
                            code="capability_not_grantable")
        extra = [c for c in caps if c not in granter.capabilities]
        if extra:
            raise Forbidden(f"A key may grant only capabilities it holds itself; it lacks `{extra[0]}`.",
                            param="capabilities", code="capability_not_grantable")
    return caps


async def _check_injection_index(db: AsyncSession, org_id: str, memory: KeyMemoryConfig | None,
                                 granter: Principal | None) -> None:
    """The block's store exists and, for a granting key limited to some indexes, is among them; an index beyond its
    reach is answered as one that does not exist, so the answer tells such a key nothing it may not see (PLT-10)."""
    if memory is None or memory.injection is None:
        return
    require_store(memory.injection, "memory.injection")
    index_id = memory.injection.index_id
    if index_id is None:
        return
    reach = None if granter is None or granter.key is None else parse_policy(granter.key["policy"], "policy").indexes
    if (reach is not None and index_id not in reach) or not await indexes_repo.exists(db, org_id, index_id):
        where = "of this organisation" if reach is None else "this key reaches"
        raise ValidationFailed(f"{index_id!r} is not an index {where}.", param="memory.injection.index_id",
                               code="index_not_found")


def _privacy(privacy: KeyPrivacy | None) -> dict[str, Any] | None:
    """Stored with every field (as `memory` is), so the key's document shows what applies; null stays null."""
    return None if privacy is None else dict(msgspec.to_builtins(privacy))


def _memory_config(memory: KeyMemoryConfig | None) -> dict[str, Any]:
    config: dict[str, Any] = msgspec.to_builtins(memory or KeyMemoryConfig())
    return config


async def _log(db: AsyncSession, row: dict[str, Any], action: str, actor: Actor, *, secret: str,
               retention_days: int, before: dict[str, Any] | None = None) -> None:
    """The key audit trail keeps the whole snapshot (PLT-5); the organisation's trail `_audited` ones (PLT-12)."""
    await repo.append_key_audit(db, {"org_id": row["org_id"], "id": new_id("evt"), "key_id": row["id"],
                                     "action": action, "actor": {"type": actor.type, "id": actor.id},
                                     "snapshot": _snapshot(row)}, retention_days)
    after = _audited(row, secret)
    detail = {"key": after} if before is None else {"before": _audited(before, secret), "after": after}
    await audit.record(db, org_id=row["org_id"], actor=actor, action=f"key.{action}", secret=secret,
                       object_type="key", object_id=row["id"], detail=detail)


def check_grant(policy: dict[str, Any], granter: Principal | None) -> None:
    """A key that holds `management` gives no policy wider than its own (PLT-4); administrators give any."""
    refuse_too_many_rules(policy, "policy")
    parsed = parse_policy(policy, "policy")
    if granter is None or granter.is_admin or granter.key is None:
        return
    wider = widening(parsed, parse_policy(granter.key["policy"], "policy"))
    if wider is not None:
        param, reason = wider
        raise Forbidden(f"{reason} Only an administrator gives a key more than the granting key has.", param=param,
                        code="policy_not_grantable")


def check_limits_kept(granter: Principal | None, *, expires_at: Any = msgspec.UNSET,
                      privacy: Any = msgspec.UNSET) -> None:
    """A key that holds `management` gives no key more time or less privacy than it has itself (PLT-4: no more than
    it has): a key it makes or changes expires by its own expiry and hides personal data when it does. Only the
    fields sent are checked (UNSET: not sent); administrators give any."""
    own = None if granter is None or granter.is_admin else granter.key
    if own is None:
        return
    limit = own.get("expires_at")
    if expires_at is not msgspec.UNSET and limit is not None and (expires_at is None or expires_at > limit):
        raise Forbidden(f"This key expires at {limit.isoformat()}, so a key it makes or changes must expire by then: "
                        "set `expires_at` no later.", param="expires_at", code="expiry_not_grantable")
    hides = bool((own.get("privacy") or {}).get("pseudonymize"))
    if privacy is not msgspec.UNSET and hides and not (privacy is not None and privacy.pseudonymize):
        raise Forbidden("This key hides personal data from its models, so every key it makes or changes must too: "
                        "send `privacy.pseudonymize: true`.", param="privacy.pseudonymize",
                        code="privacy_not_grantable")


def check_not_past(expires_at: datetime | None) -> None:
    """A key is made or changed to expire in the future or never; ending it now is `POST …/revoke`, which the
    audit trail records as a revocation rather than a change."""
    if expires_at is not None and expires_at <= datetime.now(UTC):
        raise ValidationFailed("`expires_at` is in the past: send a future instant, or revoke the key to end it now.",
                               param="expires_at")


def check_may_change(principal: Principal, row: dict[str, Any]) -> None:
    """A management key changes, revokes and deletes only keys that keys made, never an administrator's."""
    if principal.kind == "key" and row["created_by_type"] != "key":
        raise Forbidden("An administrator made this key, so only an administrator may change, revoke or delete it.",
                        param="key_id", code="key_created_by_administrator")


async def insert_new_key(db: AsyncSession, org_id: str, body: KeyCreate, actor: Actor, *, secret: str,
                         retention_days: int, granter: Principal | None = None) -> tuple[dict[str, Any], str]:
    caps = check_capabilities(list(body.capabilities), granter)
    policy = body.policy if body.policy is not None else default_policy()
    check_grant(policy, granter)
    check_limits_kept(granter, expires_at=body.expires_at, privacy=body.privacy)
    await _check_injection_index(db, org_id, body.memory, granter)
    check_not_past(body.expires_at)
    key_secret = credentials.new_key_secret()
    row = await repo.insert_key(db, {
        "id": new_id("key"), "org_id": org_id, "name": body.name, "secret_hash": credentials.hash_secret(key_secret),
        "capabilities": caps, "memory": _memory_config(body.memory), "policy": policy,
        "privacy": _privacy(body.privacy), "expires_at": body.expires_at, "created_by_type": actor.type,
        "created_by_id": actor.id,
    })
    await _log(db, row, "created", actor, secret=secret, retention_days=retention_days)
    return row, key_secret


def _check_org(ctx: RequestContext, org_id: str) -> None:
    ctx.require_management()
    if ctx.principal.chosen_org_id != org_id:
        raise NotFound("No such organisation.", param="org_id")


async def _changed(ctx: RequestContext, row: dict[str, Any], action: str, before: dict[str, Any] | None = None
                   ) -> None:
    await _log(ctx.db, row, action, ctx.actor, secret=ctx.settings.secret,
               retention_days=ctx.settings.key_audit_retention_days, before=before)


async def get_key(ctx: RequestContext, org_id: str, key_id: str) -> dict[str, Any]:
    _check_org(ctx, org_id)
    row = await repo.get(ctx.db, org_id, key_id)
    if row is None:
        raise NotFound("No such key.", param="key_id")
    return row


async def create_key(ctx: RequestContext, org_id: str, body: KeyCreate) -> tuple[dict[str, Any], str]:
    _check_org(ctx, org_id)
    return await insert_new_key(ctx.db, org_id, body, ctx.actor, secret=ctx.settings.secret,
                                retention_days=ctx.settings.key_audit_retention_days, granter=ctx.principal)


async def list_keys(ctx: RequestContext, org_id: str, after: str | None, limit: int) -> list[dict[str, Any]]:
    _check_org(ctx, org_id)
    return await repo.list_page(ctx.db, org_id, after, limit)


async def patch_key(ctx: RequestContext, org_id: str, key_id: str, body: KeyPatch) -> dict[str, Any]:
    before = await get_key(ctx, org_id, key_id)
    check_may_change(ctx.principal, before)
    values: dict[str, Any] = {}
    if body.name is not msgspec.UNSET:
        values["name"] = body.name
    if body.capabilities is not msgspec.UNSET:
        values["capabilities"] = check_capabilities(list(body.capabilities), ctx.principal)
    if body.memory is not msgspec.UNSET:
        await _check_injection_index(ctx.db, org_id, body.memory, ctx.principal)
        values["memory"] = _memory_config(body.memory)
    if body.policy is not msgspec.UNSET:
        check_grant(body.policy, ctx.principal)
        values["policy"] = body.policy
    check_limits_kept(ctx.principal, expires_at=body.expires_at, privacy=body.privacy)
    if body.expires_at is not msgspec.UNSET:
        check_not_past(body.expires_at)
        values["expires_at"] = body.expires_at
    if body.privacy is not msgspec.UNSET:
        values["privacy"] = _privacy(body.privacy)
    if not values:
        return before
    row = await repo.update_key(ctx.db, org_id, key_id, values)
    await _changed(ctx, row, "changed", before)
    return row


async def revoke_key(ctx: RequestContext, org_id: str, key_id: str) -> dict[str, Any]:
    before = await get_key(ctx, org_id, key_id)
    check_may_change(ctx.principal, before)
    if before["revoked_at"] is not None:
        return before
    row = await repo.update_key(ctx.db, org_id, key_id, {"revoked_at": datetime.now(UTC)})
    await _changed(ctx, row, "revoked")
    return row


async def delete_key(ctx: RequestContext, org_id: str, key_id: str) -> None:
    row = await get_key(ctx, org_id, key_id)
    check_may_change(ctx.principal, row)
    await repo.delete_key(ctx.db, org_id, key_id)
    await _changed(ctx, row, "deleted")


def own_key(ctx: RequestContext) -> dict[str, Any]:
    """The calling key's document. Its policy may name other people (rules on `subject`, writable values), and
    only administrators and keys read policies (PLT-5/MEM-19), so a subject token is refused like on the tenant key
    routes (PLT-7)."""
    if ctx.principal.key is None:
        raise BadRequest("`/key` describes the calling key; administrators use /tenants/{org_id}/keys.",
                         code="key_required")
    ctx.principal.refuse_subject_token("use `/key`: the key's document and policy are the organisation's; send the "
                                       "request with the key itself")
    return ctx.principal.key


async def put_own_policy(ctx: RequestContext, policy: dict[str, Any]) -> dict[str, Any]:
    key = own_key(ctx)
    ctx.require_management()
    check_grant(policy, ctx.principal)
    row = await repo.update_key(ctx.db, key["org_id"], key["id"], {"policy": policy})
    await _changed(ctx, row, "changed", key)
    return row


def _mint(ctx: RequestContext, key_id: str, body: SubjectTokenIn) -> dict[str, Any]:
    max_ttl = ctx.settings.subject_token_max_ttl_seconds
    if body.ttl_seconds > max_ttl:
        raise ValidationFailed(f"`ttl_seconds` may be at most {max_ttl}.", param="ttl_seconds")
    if not body.subject.id.isprintable():
        raise ValidationFailed("A subject id is 1 to 256 printable characters.", param="subject.id")
    check_attributes(body.subject.attributes, "subject.attributes")
    token, expires_at = credentials.mint_subject_token(
        ctx.settings.secret, org_id=ctx.org_id, key_id=key_id, subject_id=body.subject.id,
        attributes=body.subject.attributes, ttl_seconds=body.ttl_seconds)
    return {"token": token, "expires_at": expires_at}


def mint_subject_token(ctx: RequestContext, body: SubjectTokenIn) -> dict[str, Any]:
    key = ctx.principal.key
    if ctx.principal.kind != "key" or key is None:
        raise Forbidden("Only an API key mints subject tokens.", code="key_required")
    return _mint(ctx, key["id"], body)


async def mint_for_key(ctx: RequestContext, org_id: str, key_id: str, body: SubjectTokenIn) -> dict[str, Any]:
    """An administrator mints a subject token bound to one of the organisation's active keys (to try what that
    key's application would do for a person); the token is exactly the one the key would mint, and is audited."""
    ctx.require_admin()
    row = await get_key(ctx, org_id, key_id)
    if key_status(row) != "active":
        raise Conflict(f"The key is {key_status(row)}; a subject token needs an active key.", param="key_id",
                       code="key_not_active")
    minted = _mint(ctx, key_id, body)
    await ctx.audit("key.subject_token_minted", subject_id=body.subject.id, object_type="key", object_id=key_id,
                    detail={"ttl_seconds": body.ttl_seconds, "attributes": sorted(body.subject.attributes)})
    return minted


def _audit_cursor(page: Page) -> tuple[datetime, str] | None:
    """The last entry of the previous page: `[at, id]` as `cut` wrote it; any other shape is 400."""
    cursor = page.after(list)
    if cursor is None:
        return None
    try:
        at, entry_id = cursor
        instant = datetime.fromisoformat(at)
    except (TypeError, ValueError):
        raise page.invalid() from None
    if instant.tzinfo is None or not isinstance(entry_id, str):
        raise page.invalid()
    return instant, entry_id


async def key_audit(ctx: RequestContext, org_id: str, key_id: str | None, page: Page
                    ) -> tuple[list[dict[str, Any]], str | None]:
    """One page of the key audit trail, newest first; an administrator's read is itself audited (PLT-2)."""
    _check_org(ctx, org_id)
    rows = await repo.key_audit(ctx.db, org_id, key_id, None, page.fetch(), _audit_cursor(page))
    rows, next_cursor = page.cut(rows, lambda r: [r["at"].isoformat(), r["id"]])
    if ctx.is_admin:
        await ctx.audit("audit.read", object_type="audit",
                        detail={"route": "GET /tenants/{org_id}/keys/audit",
                                "filters": {"key_id": key_id} if key_id else {}, "count": len(rows)})
    return rows, next_cursor
