"""HTTP routes: keys, the calling key's own document, subject tokens."""

from __future__ import annotations

from typing import Any

import msgspec
from litestar import Controller, delete, get, patch, post, put

from backend.access.context import RequestContext
from backend.domains.keys import service
from backend.params import Page
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


class KeyController(Controller):
    path = "/tenants/{org_id:str}/keys"
    tags = ["keys"]

    @post("", summary="Create a key; its secret is shown once")
    async def create_key(self, org_id: str, data: KeyCreate, ctx: RequestContext) -> KeyCreated:
        row, secret = await service.create_key(ctx, org_id, data)
        return msgspec.convert({**service.key_document(row), "secret": secret}, KeyCreated)

    @get("", summary="List the organisation's keys")
    async def list_keys(self, org_id: str, ctx: RequestContext, page: Page) -> KeyPage:
        rows = await service.list_keys(ctx, org_id, page.after(str), page.fetch())
        rows, next_cursor = page.cut(rows, lambda row: row["id"])
        return KeyPage(data=[_key(r) for r in rows], next_cursor=next_cursor)

    @get("/audit", summary="The key audit trail (every create, change, revoke and delete)")
    async def key_audit(self, org_id: str, ctx: RequestContext, page: Page, key_id: str | None = None
                        ) -> KeyAuditPage:
        rows, next_cursor = await service.key_audit(ctx, org_id, key_id, page)
        entries = [{k: r[k] for k in ("id", "key_id", "at", "action", "actor", "snapshot")} for r in rows]
        return msgspec.convert({"data": entries, "next_cursor": next_cursor}, KeyAuditPage)

    @get("/{key_id:str}", summary="One key")
    async def get_key(self, org_id: str, key_id: str, ctx: RequestContext) -> KeyOut:
        return _key(await service.get_key(ctx, org_id, key_id))

    @patch("/{key_id:str}", summary="Change a key")
    async def patch_key(self, org_id: str, key_id: str, data: KeyPatch, ctx: RequestContext) -> KeyOut:
        return _key(await service.patch_key(ctx, org_id, key_id, data))

    @post("/{key_id:str}/revoke", status_code=200, summary="Revoke a key; it stays listed as revoked")
    async def revoke_key(self, org_id: str, key_id: str, ctx: RequestContext) -> KeyOut:
        return _key(await service.revoke_key(ctx, org_id, key_id))

    @delete("/{key_id:str}", status_code=204, summary="Delete a key; only the key audit trail remembers it")
    async def delete_key(self, org_id: str, key_id: str, ctx: RequestContext) -> None:
        await service.delete_key(ctx, org_id, key_id)

    @post("/{key_id:str}/subject-tokens", summary="Administrators: mint a subject token bound to this key (to try a "
                                                  "person's view); audited")
    async def subject_token_for_key(self, org_id: str, key_id: str, data: SubjectTokenIn, ctx: RequestContext
                                    ) -> SubjectTokenOut:
        return msgspec.convert(await service.mint_for_key(ctx, org_id, key_id, data), SubjectTokenOut)


class OwnKeyController(Controller):
    tags = ["keys"]

    @get("/key", summary="The calling key's own document")
    async def own_key(self, ctx: RequestContext) -> KeyOut:
        return _key(service.own_key(ctx))

    @put("/key/policy", summary="Replace the calling key's policy document (needs `management`)")
    async def put_policy(self, data: JSONObject, ctx: RequestContext) -> KeyOut:
        return _key(await service.put_own_policy(ctx, data))

    @post("/subject-tokens", summary="Mint a subject token bound to the calling key")
    async def subject_token(self, data: SubjectTokenIn, ctx: RequestContext) -> SubjectTokenOut:
        return msgspec.convert(service.mint_subject_token(ctx, data), SubjectTokenOut)
