"""HTTP routes: administrator login, organisations, vocabulary."""

from __future__ import annotations

from typing import Any

import msgspec
from litestar import Controller, Request, get, patch, post, put
from litestar.datastructures import State
from sqlalchemy.ext.asyncio import AsyncSession

from backend.access.principal import Principal
from backend.domains.orgs import repository as repo
from backend.domains.orgs import service
from backend.errors import Unauthorized
from shared.schemas.common import JSONObject
from shared.schemas.platform import LoginIn, LoginOut, OrgOut, OrgPage, OrgPatch


def _org(row: dict[str, Any]) -> OrgOut:
    return msgspec.convert(service.org_document(row), OrgOut)


class AdminController(Controller):
    path = "/admin"
    tags = ["administrators"]

    @post("/login", status_code=200, summary="Log an administrator in; returns a short-lived bearer token")
    async def login(self, data: LoginIn, db: AsyncSession, state: State) -> LoginOut:
        result = await service.login(db, data.email, data.password, state.settings.admin_token_ttl_seconds)
        return msgspec.convert(result, LoginOut)

    @post("/logout", status_code=204, summary="End the calling administrator's token")
    async def logout(self, request: Request, db: AsyncSession, principal: Principal) -> None:
        if not principal.is_admin:
            raise Unauthorized("Only an administrator token can log out.", code="admin_required")
        token = request.headers.get("authorization", "").partition(" ")[2].strip()
        await service.logout(db, token)


class OrgController(Controller):
    path = "/tenants"
    tags = ["organisations"]

    @get("", summary="Organisations the caller administers")
    async def list_orgs(self, db: AsyncSession, principal: Principal) -> OrgPage:
        principal.require_management()
        if principal.is_operator:
            rows = await repo.list_all(db)
        else:
            row = await repo.get(db, principal.org_id)
            rows = [row] if row else []
        return OrgPage(data=[_org(r) for r in rows], next_cursor=None)

    @get("/{org_id:str}", summary="One organisation")
    async def get_org(self, org_id: str, db: AsyncSession, principal: Principal) -> OrgOut:
        principal.require_management()
        return _org(await service.visible_org(db, principal, org_id))

    @patch("/{org_id:str}", summary="Change an organisation's settings (administrators)")
    async def patch_org(self, org_id: str, data: OrgPatch, db: AsyncSession, principal: Principal,
                        state: State) -> OrgOut:
        return _org(await service.patch_org(db, principal, org_id, data, state.settings.secret))

    @get("/{org_id:str}/vocabulary", summary="The organisation's label vocabulary per kind")
    async def get_vocabulary(self, org_id: str, db: AsyncSession, principal: Principal) -> JSONObject:
        principal.require_management()
        row = await service.visible_org(db, principal, org_id)
        return row["vocabulary"] or {}

    @put("/{org_id:str}/vocabulary", summary="Register the label vocabulary (PLT-11)")
    async def put_vocabulary(self, org_id: str, data: JSONObject, db: AsyncSession, principal: Principal,
                             state: State) -> JSONObject:
        return await service.put_vocabulary(db, principal, org_id, data, state.settings.secret)
