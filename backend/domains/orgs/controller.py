"""HTTP routes: administrator login, organisations, vocabulary."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec
from litestar import Controller, Request, get, patch, post, put
from litestar.datastructures import State
from sqlalchemy.ext.asyncio import AsyncSession

from backend.access.context import RequestContext
from backend.domains.orgs import repository as repo
from backend.domains.orgs import service
from shared.schemas.common import JSONObject
from shared.schemas.platform import LoginIn, LoginOut, OrgOut, OrgPage, OrgPatch


def _org(row: Mapping[str, Any]) -> OrgOut:
    return msgspec.convert(service.org_document(row), OrgOut)


class AdminController(Controller):
    path = "/admin"
    tags = ["administrators"]

    @post("/login", status_code=200, summary="Log an administrator in; returns a short-lived bearer token")
    async def login(self, data: LoginIn, db: AsyncSession, state: State) -> LoginOut:
        result = await service.login(db, data.email, data.password, state.settings.admin_token_ttl_seconds)
        return msgspec.convert(result, LoginOut)

    @post("/logout", status_code=204, summary="End the calling administrator's token")
    async def logout(self, request: Request, ctx: RequestContext) -> None:
        ctx.require_admin()
        token = request.headers.get("authorization", "").partition(" ")[2].strip()
        await service.logout(ctx.db, token)


class OrgController(Controller):
    path = "/tenants"
    tags = ["organisations"]

    @get("", summary="Organisations the caller administers")
    async def list_orgs(self, ctx: RequestContext) -> OrgPage:
        ctx.require_management()
        rows = await repo.list_all(ctx.db) if ctx.principal.is_operator else [ctx.org]
        return OrgPage(data=[_org(r) for r in rows], next_cursor=None)

    @get("/{org_id:str}", summary="One organisation")
    async def get_org(self, org_id: str, ctx: RequestContext) -> OrgOut:
        ctx.require_management()
        return _org(service.visible_org(ctx, org_id))

    @patch("/{org_id:str}", summary="Change an organisation's settings (administrators)")
    async def patch_org(self, org_id: str, data: OrgPatch, ctx: RequestContext) -> OrgOut:
        return _org(await service.patch_org(ctx, org_id, data))

    @get("/{org_id:str}/vocabulary", summary="The organisation's label vocabulary per kind")
    async def get_vocabulary(self, org_id: str, ctx: RequestContext) -> JSONObject:
        ctx.require_management()
        return dict(service.visible_org(ctx, org_id)["vocabulary"] or {})

    @put("/{org_id:str}/vocabulary", summary="Register the label vocabulary (PLT-11)")
    async def put_vocabulary(self, org_id: str, data: JSONObject, ctx: RequestContext) -> JSONObject:
        return await service.put_vocabulary(ctx, org_id, data)
