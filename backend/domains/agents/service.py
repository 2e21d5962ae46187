"""Agents and their versions (TRN-5): every change is a new immutable version; turns resolve an agent by id.

Administrators and keys holding `management` create, change and delete agents; any key of the organisation reads
them (turns name them). A subject token reads none: an end user's app has no business with their instructions.
A deleted agent is gone from every route and from turns; its rows stay, so what named it still points somewhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import msgspec

from backend.access.context import RequestContext
from backend.access.principal import Principal
from backend.domains.agents import repository as repo
from backend.domains.agents.rules import check_working_state_schema
from backend.domains.extraction.switch import refuse_agent_deletion
from backend.domains.injection.config import check_saved_block
from backend.domains.models import service as models
from backend.errors import Conflict, NotFound
from backend.ids import new_id
from shared.schemas.agents import AgentCreate, AgentPatch
from shared.schemas.compaction import CompactionSettings
from shared.schemas.platform import InjectionBlock

FIELDS = ("name", "model", "instructions", "memory_injection", "working_state_schema", "compaction")


@dataclass(frozen=True)
class AgentVersion:
    """One version of an agent as a turn uses it. `memory_injection` goes to `injection.config.choose_block` as
    `agent_block` (None: the key's block applies); `compaction` replaces the key's settings when set."""

    id: str
    version: int
    name: str
    model: str
    instructions: str
    memory_injection: InjectionBlock | None
    working_state_schema: dict[str, Any] | None
    compaction: CompactionSettings | None
    created_at: datetime  # when this version was made
    deleted: bool = False  # only with resolve(..., include_deleted=True)


def _version(row: dict[str, Any]) -> AgentVersion:
    block, compaction = row["memory_injection"], row["compaction"]
    return AgentVersion(
        id=row["agent_id"], version=row["version"], name=row["name"], model=row["model"],
        instructions=row["instructions"],
        memory_injection=None if block is None else msgspec.convert(block, InjectionBlock),
        working_state_schema=row["working_state_schema"],
        compaction=None if compaction is None else msgspec.convert(compaction, CompactionSettings),
        created_at=row["created_at"], deleted=row["deleted_at"] is not None)


async def resolve(ctx: RequestContext, agent_id: str, version: int | None = None, *, param: str = "agent_id",
                  include_deleted: bool = False) -> AgentVersion:
    """The agent's current version (or the one named) for a turn: 404 `agent_not_found` on `param` when it is not
    an agent of the request's organisation or was deleted, `agent_version_not_found` for a version it never had.
    Any credential of the organisation may resolve (a subject token's turn names agents too)."""
    row = await repo.resolve(ctx.db, ctx.org_id, agent_id, version)
    if row is None and version is not None:
        agent = await repo.resolve(ctx.db, ctx.org_id, agent_id, None)
        if agent is not None and (agent["deleted_at"] is None or include_deleted):
            raise NotFound(f"Agent {agent_id} has no version {version}.", param=param,
                           code="agent_version_not_found")
    if row is None or (row["deleted_at"] is not None and not include_deleted):
        raise NotFound(f"No agent {agent_id!r} in this organisation.", param=param, code="agent_not_found")
    return _version(row)


def choose_compaction(principal: Principal, agent: AgentVersion | None) -> CompactionSettings | None:
    """TRN-6: the agent's settings replace the key's whole; None when the key does not hold `compaction`."""
    if "compaction" not in principal.capabilities:
        return None
    if agent is not None and agent.compaction is not None:
        return agent.compaction
    raw = ((principal.key or {}).get("memory") or {}).get("compaction")
    return CompactionSettings() if raw is None else msgspec.convert(raw, CompactionSettings)


# ---------------------------------------------------------------- documents

def document(row: dict[str, Any]) -> dict[str, Any]:
    return {"id": row["agent_id"], "version": row["version"], **{f: row[f] for f in FIELDS},
            "created_at": row["agent_created_at"], "updated_at": row["created_at"]}


def version_document(row: dict[str, Any]) -> dict[str, Any]:
    return {"agent_id": row["agent_id"], "version": row["version"], **{f: row[f] for f in FIELDS},
            "created_at": row["created_at"],
            "created_by": {"type": row["created_by_type"], "id": row["created_by_id"]}}


# ---------------------------------------------------------------- reading

def _require_reader(ctx: RequestContext) -> None:
    ctx.principal.refuse_subject_token("read agents")


async def _live(ctx: RequestContext, agent_id: str, *, lock: bool = False) -> dict[str, Any]:
    row = await repo.current(ctx.db, ctx.org_id, agent_id, lock=lock)
    if row is None:
        raise NotFound(f"No agent {agent_id!r} in this organisation.", param="agent_id", code="agent_not_found")
    return row


async def get(ctx: RequestContext, agent_id: str) -> dict[str, Any]:
    _require_reader(ctx)
    return await _live(ctx, agent_id)


async def list_page(ctx: RequestContext, after_id: str | None, limit: int) -> list[dict[str, Any]]:
    _require_reader(ctx)
    return await repo.list_page(ctx.db, ctx.org_id, after_id, limit)


async def versions_page(ctx: RequestContext, agent_id: str, before: int | None, limit: int) -> list[dict[str, Any]]:
    _require_reader(ctx)
    await _live(ctx, agent_id)
    return await repo.versions_page(ctx.db, ctx.org_id, agent_id, before, limit)


async def one_version(ctx: RequestContext, agent_id: str, version: int) -> dict[str, Any]:
    _require_reader(ctx)
    await _live(ctx, agent_id)
    row = await repo.resolve(ctx.db, ctx.org_id, agent_id, version)
    if row is None:
        raise NotFound(f"Agent {agent_id} has no version {version}.", param="version",
                       code="agent_version_not_found")
    return row


# ---------------------------------------------------------------- changing

async def _checked(ctx: RequestContext, values: dict[str, Any], sent: set[str]) -> dict[str, Any]:
    """The version's fields as stored (defaults filled in), each field that was sent checked (INJ-2, TRN-5)."""
    stored = dict(values)
    for name in ("memory_injection", "compaction"):
        value = stored[name]
        stored[name] = None if value is None else msgspec.to_builtins(value)
    if "model" in sent:  # EXT-1: a model the organisation is offered
        await models.offered_spec(ctx.db, ctx.org_id, stored["model"])
    if "memory_injection" in sent and stored["memory_injection"] is not None:
        await check_saved_block(ctx.db, ctx.management_scope, stored["memory_injection"], "memory_injection")
    if "working_state_schema" in sent and stored["working_state_schema"] is not None:
        check_working_state_schema(stored["working_state_schema"])
    return stored


def _name_taken(name: str) -> Conflict:
    return Conflict(f"An agent named {name!r} exists already.", param="name", code="name_taken")


async def create(ctx: RequestContext, body: AgentCreate) -> dict[str, Any]:
    ctx.require_management()
    fields = await _checked(ctx, {f: getattr(body, f) for f in FIELDS}, set(FIELDS))
    agent_id = new_id("agt")
    if not await repo.insert_agent(ctx.db, {"org_id": ctx.org_id, "id": agent_id, "name": body.name, "version": 1},
                                   _version_values(ctx, agent_id, 1, fields)):
        raise _name_taken(body.name)
    await ctx.audit("agent.created", object_type="agent", object_id=agent_id,
                    detail={"name": body.name, "version": 1, "model": body.model})
    return await _live(ctx, agent_id)


def _version_values(ctx: RequestContext, agent_id: str, version: int, fields: dict[str, Any]) -> dict[str, Any]:
    return {"org_id": ctx.org_id, "agent_id": agent_id, "version": version, **fields,
            "created_by_type": ctx.actor.type, "created_by_id": ctx.actor.id}


async def patch(ctx: RequestContext, agent_id: str, body: AgentPatch) -> dict[str, Any]:
    """A change is a new version holding every field; a PATCH that changes nothing makes none."""
    ctx.require_management()
    current = await _live(ctx, agent_id, lock=True)
    sent = {f for f in FIELDS if getattr(body, f) is not msgspec.UNSET}
    fields = await _checked(ctx, {f: getattr(body, f) if f in sent else current[f] for f in FIELDS}, sent)
    changed = [f for f in FIELDS if fields[f] != current[f]]
    if not changed:
        return current
    version = current["version"] + 1
    if not await repo.add_version(ctx.db, _version_values(ctx, agent_id, version, fields)):
        raise _name_taken(fields["name"])
    await ctx.audit("agent.changed", object_type="agent", object_id=agent_id,
                    detail={"name": fields["name"], "version": version, "changed": changed})
    return await _live(ctx, agent_id)


async def delete(ctx: RequestContext, agent_id: str) -> None:
    ctx.require_management()
    current = await _live(ctx, agent_id, lock=True)
    await refuse_agent_deletion(ctx, agent_id)  # TRN-5/EXT-2: a switch's filters name it
    await repo.mark_deleted(ctx.db, ctx.org_id, agent_id)
    await ctx.audit("agent.deleted", object_type="agent", object_id=agent_id,
                    detail={"name": current["name"], "version": current["version"]})
