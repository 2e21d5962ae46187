"""HTTP routes: agents and their versions (TRN-5)."""

from __future__ import annotations

from typing import Any

import msgspec
from litestar import Controller, delete, get, patch, post

from backend.access.context import RequestContext
from backend.domains.agents import service
from backend.errors import NotFound
from backend.params import Page
from shared.schemas.agents import (
    AgentCreate,
    AgentOut,
    AgentPage,
    AgentPatch,
    AgentVersionOut,
    AgentVersionPage,
)

INT4_MIN, INT4_MAX = -(2**31), 2**31 - 1  # `agent_versions.version` is an integer column


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
        rows = await service.versions_page(ctx, agent_id, page.after(int, int_bits=32), page.fetch())
        rows, next_cursor = page.cut(rows, lambda row: row["version"])
        return AgentVersionPage(data=[_version(r) for r in rows], next_cursor=next_cursor)

    @get("/{agent_id:str}/versions/{version:int}", summary="One version of an agent")
    async def get_version(self, agent_id: str, version: int, ctx: RequestContext) -> AgentVersionOut:
        if not INT4_MIN <= version <= INT4_MAX:
            # No version is numbered past the column's range, and the database would refuse to compare the number.
            await service.versions_page(ctx, agent_id, None, 1)  # the agent's own 403 or 404 come first
            raise NotFound(f"Agent {agent_id} has no version {version}.", param="version",
                           code="agent_version_not_found")
        return _version(await service.one_version(ctx, agent_id, version))
