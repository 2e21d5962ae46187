"""HTTP routes: agents and their versions (TRN-5)."""

from __future__ import annotations

from typing import Any

import msgspec
from litestar import Controller, delete, get, patch, post

from backend.access.context import RequestContext
from backend.domains.agents import service
from backend.params import Page
from shared.schemas.agents import (
    AgentCreate,
    AgentOut,
    AgentPage,
    AgentPatch,
    AgentVersionOut,
    AgentVersionPage,
)


def _agent(row: dict[str, Any]) -> AgentOut:
    return msgspec.convert(service.document(row), AgentOut)


def _version(row: dict[str, Any]) -> AgentVersionOut:
    return msgspec.convert(service.version_document(row), AgentVersionOut)


class AgentController(Controller):
    path = "/agents"
    tags = ["agents"]

    @post("", summary="Create an agent (its version 1); administrators and `management` keys")
    async def create_agent(self, data: AgentCreate, ctx: RequestContext) -> AgentOut:
        return _agent(await service.create(ctx, data))

    @get("", summary="The organisation's agents, each as its current version")
    async def list_agents(self, ctx: RequestContext, page: Page) -> AgentPage:
        rows = await service.list_page(ctx, page.after(str), page.fetch())
        rows, next_cursor = page.cut(rows, lambda row: row["agent_id"])
        return AgentPage(data=[_agent(r) for r in rows], next_cursor=next_cursor)

    @get("/{agent_id:str}", summary="One agent as its current version")
    async def get_agent(self, agent_id: str, ctx: RequestContext) -> AgentOut:
        return _agent(await service.get(ctx, agent_id))

    @patch("/{agent_id:str}", summary="Change an agent: the fields sent, as a new version")
    async def patch_agent(self, agent_id: str, data: AgentPatch, ctx: RequestContext) -> AgentOut:
        return _agent(await service.patch(ctx, agent_id, data))

    @delete("/{agent_id:str}", status_code=204, summary="Delete an agent; turns can no longer name it")
    async def delete_agent(self, agent_id: str, ctx: RequestContext) -> None:
        await service.delete(ctx, agent_id)

    @get("/{agent_id:str}/versions", summary="An agent's versions, newest first")
    async def list_versions(self, agent_id: str, ctx: RequestContext, page: Page) -> AgentVersionPage:
        rows = await service.versions_page(ctx, agent_id, page.after(int), page.fetch())
        rows, next_cursor = page.cut(rows, lambda row: row["version"])
        return AgentVersionPage(data=[_version(r) for r in rows], next_cursor=next_cursor)

    @get("/{agent_id:str}/versions/{version:int}", summary="One version of an agent")
    async def get_version(self, agent_id: str, version: int, ctx: RequestContext) -> AgentVersionOut:
        return _version(await service.one_version(ctx, agent_id, version))
