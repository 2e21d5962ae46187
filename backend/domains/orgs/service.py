"""Organisations, administrators, logins and `coremem bootstrap` (PLT-1 … PLT-3, PLT-11)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import msgspec
from sqlalchemy.ext.asyncio import AsyncSession

from backend.access import credentials
from backend.access.actor import BOOTSTRAP_ACTOR
from backend.access.context import RequestContext
from backend.access.labels import check_label_name
from backend.access.policy import parse_policy, refuse_too_many_rules, writer_policy
from backend.db.tenant import use_org
from backend.domains.keys import service as keys
from backend.domains.orgs import repository as repo
from backend.errors import Conflict, NotFound, Unauthorized, ValidationFailed
from backend.ids import new_id
from shared.schemas.platform import KeyCreate, OrgPatch

VOCABULARY_KINDS = frozenset({"memory_record", "thread"})


def check_timezone(name: str, param: str = "timezone") -> str:
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):  # OSError: a name too long for a file name
        raise ValidationFailed(f"{name!r} is not an IANA time zone such as `Europe/Amsterdam`.", param=param) from None
    return name


async def check_database_timezone(db: AsyncSession, name: str) -> str:
    """An organisation's zone also cuts days in SQL (usage, activity, extraction health, message search), so
    PostgreSQL must know it too: Python also loads the system's `posix/…` and `localtime` files and zones newer
    than the database's own data, which every such statement then failed on."""
    if not await repo.zone_known(db, name):
        raise ValidationFailed(f"{name!r} is not a time zone this server's database knows; send an IANA zone such as "
                               "`Europe/Amsterdam`.", param="timezone")
    return name


def org_document(row: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "id": row["id"], "name": row["name"], "timezone": row["timezone"], "capabilities": row["capabilities"],
        "improvements": row["improvements"], "memory": {"decay": row["memory_decay"]},
        "helper_model": row["helper_model"], "policy": row["policy"], "vocabulary": row["vocabulary"],
        "limits": row.get("limits") or {"monthly_model_tokens": None},
        "created_at": row["created_at"], "updated_at": row["updated_at"],
    }


async def login(db: AsyncSession, email: str, password: str, ttl_seconds: int) -> dict[str, Any]:
    admin = await repo.admin_by_email(db, email)
    # An unknown address is checked too (against a stand-in hash), so both refusals take as long.
    matches = await credentials.check_password(admin["password_hash"] if admin else None, password)
    if admin is None or not matches:
        raise Unauthorized("Wrong e-mail address or password.", code="bad_login")
    token = credentials.new_admin_token()
    expires_at = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=ttl_seconds)
    await repo.insert_token(db, credentials.hash_secret(token), admin["id"], expires_at)
    return {"token": token, "expires_at": expires_at,
            "admin": {"id": admin["id"], "email": admin["email"], "role": admin["role"], "org_id": admin["org_id"]}}


async def logout(db: AsyncSession, token: str) -> None:
    await repo.delete_token(db, credentials.hash_secret(token))


def visible_org(ctx: RequestContext, org_id: str) -> Mapping[str, Any]:
    """The organisation, if the caller belongs to it; any other is 404, as if it did not exist."""
    if ctx.principal.chosen_org_id != org_id or not ctx.org:
        raise NotFound("No such organisation.", param="org_id")
    return ctx.org


async def patch_org(ctx: RequestContext, org_id: str, body: OrgPatch) -> dict[str, Any]:
    ctx.require_admin()
    before = visible_org(ctx, org_id)
    values: dict[str, Any] = {}
    if body.name is not msgspec.UNSET:
        values["name"] = body.name
    if body.timezone is not msgspec.UNSET:
        values["timezone"] = await check_database_timezone(ctx.db, check_timezone(body.timezone))
    if body.capabilities is not msgspec.UNSET:
        values["capabilities"] = sorted(set(body.capabilities))
    if body.improvements is not msgspec.UNSET:
        values["improvements"] = msgspec.to_builtins(body.improvements)
    if body.memory is not msgspec.UNSET:
        values["memory_decay"] = msgspec.to_builtins(body.memory)["decay"]
    if body.helper_model is not msgspec.UNSET:
        values["helper_model"] = msgspec.to_builtins(body.helper_model)
    if body.limits is not msgspec.UNSET:
        values["limits"] = msgspec.to_builtins(body.limits)
    if body.policy is not msgspec.UNSET:
        refuse_too_many_rules(body.policy, "policy")
        parse_policy(body.policy, "policy", org_level=True)
        values["policy"] = body.policy
    if values:
        if not await repo.update_org(ctx.db, org_id, values):
            raise Conflict(f"An organisation named {body.name!r} exists already; choose another name.", param="name",
                           code="name_taken")
        changed = {k: {"before": before[k], "after": v} for k, v in values.items() if k != "name"}
        if "policy" in changed:  # its label values name people: the trail keeps its outline and digest (PLT-12)
            changed["policy"] = {when: keys.audited_policy(policy, secret=ctx.settings.secret, org_id=org_id)
                                 for when, policy in changed["policy"].items()}
        await ctx.audit("org.updated", object_type="org", object_id=org_id, detail={"changed": changed})
    row = await repo.get(ctx.db, org_id)
    assert row is not None
    return row


def check_vocabulary(raw: dict[str, Any]) -> dict[str, Any]:
    for kind, labels in raw.items():
        if kind not in VOCABULARY_KINDS:
            raise ValidationFailed(f"Unknown kind {kind!r}; known: memory_record, thread.", param=kind)
        if not isinstance(labels, dict):
            raise ValidationFailed("Map each label name to its options, such as {\"attribute\": true}.", param=kind)
        for label, options in labels.items():
            check_label_name(label, f"{kind}.{label}")  # a name no record or thread could carry would be useless
            if not isinstance(options, dict) or set(options) - {"attribute"}:
                raise ValidationFailed("Label options are an object with an optional boolean `attribute`.",
                                       param=f"{kind}.{label}")
            if "attribute" in options and not isinstance(options["attribute"], bool):
                raise ValidationFailed("Expected a boolean.", param=f"{kind}.{label}.attribute")
    return raw


async def put_vocabulary(ctx: RequestContext, org_id: str, vocabulary: dict[str, Any]) -> dict[str, Any]:
    ctx.require_management()
    before = visible_org(ctx, org_id)
    await repo.update_org(ctx.db, org_id, {"vocabulary": check_vocabulary(vocabulary)})
    await ctx.audit("org.vocabulary_changed", object_type="org", object_id=org_id,
                    detail={"before": before["vocabulary"], "after": vocabulary})
    return vocabulary


async def bootstrap(db: AsyncSession, *, org_name: str, admin_email: str, secret: str,
                    key_retention_days: int, ttl_seconds: int) -> dict[str, Any]:
    """Create (or reuse) an organisation and its administrator; print-ready credentials (PLT-3).

    Running it again is safe: the organisation and administrator are reused, the administrator gets a fresh
    password (the old one was only ever printed), and a new full-capability key is made. An address that belongs
    to another organisation's administrator or to an operator is refused (409) before anything is written.
    """
    org = await repo.get_by_name(db, org_name)
    admin = await repo.admin_by_email(db, admin_email)
    if admin is not None and (org is None or admin["org_id"] != org["id"]):
        # Reusing her would reset another organisation's administrator (or an operator) and hand out her token.
        whose = "an operator (administrator of every organisation)" if admin["role"] == "operator" else \
            "an administrator of another organisation"
        raise Conflict(f"The e-mail address {admin_email!r} belongs to {whose}; bootstrap {org_name!r} with an "
                       "address of its own.", param="admin", code="admin_of_another_org")
    if org is None:
        org_id = new_id("org")
        await repo.insert_org(db, {"id": org_id, "name": org_name})
    else:
        org_id = org["id"]
    await use_org(db, org_id)  # row-level security: the key's audit trail and the login's event are tenant rows
    password = credentials.new_password()
    if admin is None:
        admin_id = new_id("adm")
        await repo.insert_admin(db, {"id": admin_id, "email": admin_email, "role": "admin", "org_id": org_id,
                                     "password_hash": credentials.hash_password(password)})
    else:
        admin_id = admin["id"]
        await repo.set_admin_password(db, admin_id, credentials.hash_password(password))
    capabilities: list[Any] = sorted(keys.GRANTABLE)
    body = KeyCreate(name="bootstrap", capabilities=capabilities, policy=writer_policy())
    key_row, key_secret = await keys.insert_new_key(db, org_id, body, BOOTSTRAP_ACTOR, secret=secret,
                                                    retention_days=key_retention_days)
    session = await login(db, admin_email, password, ttl_seconds)
    return {"org_id": org_id, "admin_email": admin_email, "admin_password": password,
            "admin_token": session["token"], "key_id": key_row["id"], "key": key_secret}


async def create_operator(db: AsyncSession, email: str) -> tuple[str, str]:
    """An operator (administrator of every organisation); returns (id, password)."""
    password = credentials.new_password()
    existing = await repo.admin_by_email(db, email)
    if existing:
        await repo.set_admin_password(db, existing["id"], credentials.hash_password(password))
        return existing["id"], password
    admin_id = new_id("adm")
    await repo.insert_admin(db, {"id": admin_id, "email": email, "role": "operator", "org_id": None,
                                 "password_hash": credentials.hash_password(password)})
    return admin_id, password
