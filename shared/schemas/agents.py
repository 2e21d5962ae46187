"""HTTP contract of agents and their versions (TRN-5)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

import msgspec

from shared.schemas.common import UNSET, JSONObject, Model, UnsetType
from shared.schemas.compaction import CompactionSettings
from shared.schemas.platform import ActorType, InjectionBlock, Name

ModelName = Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
Instructions = Annotated[str, msgspec.Meta(max_length=100_000)]


class AgentCreate(Model):
    name: Name
    model: ModelName
    instructions: Instructions
    memory_injection: InjectionBlock | None = None
    working_state_schema: JSONObject | None = None
    compaction: CompactionSettings | None = None


class AgentPatch(Model):
    """Fields sent replace the current version's (null removes an optional one); anything changed is a new version."""

    name: Name | UnsetType = UNSET
    model: ModelName | UnsetType = UNSET
    instructions: Instructions | UnsetType = UNSET
    memory_injection: InjectionBlock | UnsetType | None = UNSET
    working_state_schema: JSONObject | UnsetType | None = UNSET
    compaction: CompactionSettings | UnsetType | None = UNSET


class AgentActor(Model):
    type: ActorType
    id: str | None


class AgentOut(Model):
    """The agent as its current version describes it."""

    id: str
    version: int
    name: str
    model: str
    instructions: str
    memory_injection: InjectionBlock | None
    working_state_schema: JSONObject | None
    compaction: CompactionSettings | None
    created_at: datetime
    updated_at: datetime  # when the current version was made


class AgentPage(Model):
    data: list[AgentOut]
    next_cursor: str | None


class AgentVersionOut(Model):
    """One immutable version: what the agent was from `created_at` until the next version."""

    agent_id: str
    version: int
    name: str
    model: str
    instructions: str
    memory_injection: InjectionBlock | None
    working_state_schema: JSONObject | None
    compaction: CompactionSettings | None
    created_at: datetime
    created_by: AgentActor


class AgentVersionPage(Model):
    data: list[AgentVersionOut]
    next_cursor: str | None


__all__ = (
    "AgentActor",
    "AgentCreate",
    "AgentOut",
    "AgentPage",
    "AgentPatch",
    "AgentVersionOut",
    "AgentVersionPage",
    "Instructions",
    "ModelName",
)
