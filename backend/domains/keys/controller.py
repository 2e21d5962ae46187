"""HTTP routes: keys, the calling key's own document, subject tokens."""

from __future__ import annotations

from typing import Any

import msgspec
from litestar import Controller, delete, get, patch, post, put
from litestar.datastructures import State
from sqlalchemy.ext.asyncio import AsyncSession

from backend.access.principal import Principal
from backend.domains.keys import service
from backend.http import decode_cursor, encode_cursor, page_limit
from shared.schemas.common import JSONObject
from shared.schemas.platform import (
    KeyAuditPage,
    KeyCreate,
    KeyCreated,
    KeyOut,
    KeyPage,
    KeyPatch,
    SubjectTokenIn,
    SubjectTokenOut,
)


def _key(row: dict[str, Any]) -> KeyOut:
    return msgspec.convert(service.key_document(row), KeyOut)


def _kw(state: State) -> dict[str, Any]:
    return {"secret": state.settings.secret, "retention_days": state.settings.key_audit_retention_days}


class KeyController(Controller):
    path = "/tenants/{org_id:str}/keys"
    tags = ["keys"]

    @post("", summary="Create a key; its secret is shown once")
    async def create_key(self, org_id: str, data: KeyCreate, db: AsyncSession, principal: Principal,
                         state: State) -> KeyCreated:
        row, secret = await service.create_key(db, principal, org_id, data, **_kw(state))
        return msgspec.convert({**service.key_document(row), "secret": secret}, KeyCreated)

    @get("", summary="List the organisation's keys")
    async def list_keys(self, org_id: str, db: AsyncSession, principal: Principal, cursor: str | None = None,
                        limit: int | None = None) -> KeyPage:
        size = page_limit(limit)
        rows = await service.list_keys(db, principal, org_id, decode_cursor(cursor), size + 1)
        more = len(rows) > size
        rows = rows[:size]
        return KeyPage(data=[_key(r) for r in rows], next_cursor=encode_cursor(rows[-1]["id"]) if more else None)

    @get("/audit", summary="The key audit trail (every create, change, revoke and delete)")
    async def key_audit(self, org_id: str, db: AsyncSession, principal: Principal, key_id: str | None = None,
                        limit: int | None = None) -> KeyAuditPage:
        rows = await service.key_audit(db, principal, org_id, key_id, page_limit(limit))
        entries = [{k: r[k] for k in ("id", "key_id", "at", "action", "actor", "snapshot")} for r in rows]
        return msgspec.convert({"data": entries, "next_cursor": None}, KeyAuditPage)

    @get("/{key_id:str}", summary="One key")
    async def get_key(self, org_id: str, key_id: str, db: AsyncSession, principal: Principal) -> KeyOut:
        return _key(await service.get_key(db, principal, org_id, key_id))

    @patch("/{key_id:str}", summary="Change a key")
    async def patch_key(self, org_id: str, key_id: str, data: KeyPatch, db: AsyncSession, principal: Principal,
                        state: State) -> KeyOut:
        return _key(await service.patch_key(db, principal, org_id, key_id, data, **_kw(state)))

    @post("/{key_id:str}/revoke", status_code=200, summary="Revoke a key; it stays listed as revoked")
    async def revoke_key(self, org_id: str, key_id: str, db: AsyncSession, principal: Principal,
                         state: State) -> KeyOut:
        return _key(await service.revoke_key(db, principal, org_id, key_id, **_kw(state)))

    @delete("/{key_id:str}", status_code=204, summary="Delete a key; only the key audit trail remembers it")
    async def delete_key(self, org_id: str, key_id: str, db: AsyncSession, principal: Principal,
                         state: State) -> None:
        await service.delete_key(db, principal, org_id, key_id, **_kw(state))


class OwnKeyController(Controller):
    tags = ["keys"]

    @get("/key", summary="The calling key's own document")
    async def own_key(self, principal: Principal) -> KeyOut:
        return _key(service.own_key(principal))

    @put("/key/policy", summary="Replace the calling key's policy document (needs `management`)")
    async def put_policy(self, data: JSONObject, db: AsyncSession, principal: Principal, state: State) -> KeyOut:
        return _key(await service.put_own_policy(db, principal, data, **_kw(state)))

    @post("/subject-tokens", summary="Mint a subject token bound to the calling key")
    async def subject_token(self, data: SubjectTokenIn, principal: Principal, state: State) -> SubjectTokenOut:
        result = service.mint_subject_token(principal, data, secret=state.settings.secret,
                                            max_ttl=state.settings.subject_token_max_ttl_seconds)
        return msgspec.convert(result, SubjectTokenOut)
