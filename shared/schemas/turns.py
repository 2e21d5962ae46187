"""The HTTP contract of models (EXT-1), turns (TRN-1 … TRN-11) and usage (PLT-18)."""

from __future__ import annotations

from datetime import date, datetime
from typing import Annotated, Literal

import msgspec

from shared.schemas.common import JSONObject, Model

ModelId = Annotated[str, msgspec.Meta(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9][A-Za-z0-9._:/@-]*$")]
Provider = Literal["openai_compatible", "replay"]
# PLT-7: a turn's `user` names a person by id (1–256 characters; printable, checked where the turn starts).
SubjectId = Annotated[str, msgspec.Meta(min_length=1, max_length=256)]


# ---------------------------------------------------------------- models (EXT-1)

class ModelCreate(Model):
    id: ModelId
    provider: Provider
    base_url: Annotated[str, msgspec.Meta(max_length=2000)] | None = None
    api_key_env: Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")] | None = None
    model: Annotated[str, msgspec.Meta(min_length=1, max_length=200)] | None = None
    org_id: str | None = None


class ModelOut(Model):
    id: str
    provider: str
    model: str
    base_url: str | None
    api_key_env: str | None
    org_id: str | None  # null: offered to every organisation
    label: str  # what answers: a live server, or recorded answers (replay)
    created_at: datetime


class ModelPage(Model):
    data: list[ModelOut]
    next_cursor: str | None


# ---------------------------------------------------------------- usage (PLT-18)

class UsageQuery(Model):
    from_: date | None = msgspec.field(default=None, name="from")
    to: date | None = None
    key_id: str | None = None


class UsageDay(Model):
    day: date
    key_id: str | None
    model: str
    input_tokens: int
    output_tokens: int
    calls: int


class UsageTotals(Model):
    input_tokens: int
    output_tokens: int
    calls: int


class UsageReport(Model):
    data: list[UsageDay]
    totals: UsageTotals
    by_key: dict[str, UsageTotals]
    next_cursor: str | None = None



# ---------------------------------------------------------------- turns (TRN-1, TRN-3)

class PlatformTool(Model, tag_field="type", tag="tool"):
    """A tool the platform runs: `memory__<index_id>__search|write` or `builtin__update_working_state`."""

    name: Annotated[str, msgspec.Meta(min_length=1, max_length=256)]


class FunctionTool(Model, tag_field="type", tag="function"):
    """A client function in the OpenAI Responses shape: the caller runs it and sends its output back."""

    name: Annotated[str, msgspec.Meta(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")]
    parameters: JSONObject = msgspec.field(default_factory=lambda: {"type": "object", "properties": {}})
    description: Annotated[str, msgspec.Meta(max_length=4000)] | None = None
    strict: bool | None = None


TurnTool = PlatformTool | FunctionTool


class ResponseCreate(Model):
    """POST /responses. `input` is text or items; items without `type` but with `role` are messages (the
    OpenAI shorthand)."""

    input: str | list[JSONObject]
    model: ModelId | None = None
    agent_id: str | None = None
    instructions: Annotated[str, msgspec.Meta(max_length=100_000)] | None = None
    previous_response_id: str | None = None
    thread_id: str | None = None
    conversation: str | JSONObject | None = None
    store: bool = True
    tools: Annotated[list[TurnTool], msgspec.Meta(max_length=128)] = []
    user: SubjectId | None = None
    timezone: str | None = None
    working_state_from: str | None = None
    metadata: dict[str, str] | None = None
    stream: bool = False
    temperature: Annotated[float, msgspec.Meta(ge=0, le=2)] | None = None
    top_p: Annotated[float, msgspec.Meta(ge=0, le=1)] | None = None
    max_output_tokens: Annotated[int, msgspec.Meta(ge=1)] | None = None


class ResponseError(Model):
    code: str
    message: str


class ResponseUsage(Model):
    input_tokens: int
    output_tokens: int
    total_tokens: int


class ResponseOut(Model, kw_only=True):
    id: str
    object: str = "response"
    status: Literal["in_progress", "completed", "incomplete", "failed"]
    thread_id: str | None
    model: str | None
    agent_id: str | None = None
    agent_version: int | None = None
    output: list[JSONObject]
    output_text: str = ""
    usage: ResponseUsage
    error: ResponseError | None = None
    metadata: dict[str, str] | None = None
    labels: JSONObject = msgspec.field(default_factory=dict)  # THR-5: its thread's labels when it was made
    trace_id: str | None = None
    incomplete_details: JSONObject | None = None  # `{"reason": "max_output_tokens"}` when the answer was cut short
    created_at: datetime
    completed_at: datetime | None = None
    trace: JSONObject | None = None


# ---------------------------------------------------------------- /messages (TRN-9, the Anthropic Messages shape)

class MessagesCreate(Model):
    """POST /messages: the Anthropic request shape, plus coremem's `thread_id`, `agent_id`, `user`, `store`."""

    messages: Annotated[list[JSONObject], msgspec.Meta(min_length=1, max_length=256)]
    max_tokens: Annotated[int, msgspec.Meta(ge=1)]
    model: ModelId | None = None
    agent_id: str | None = None
    system: str | list[JSONObject] | None = None
    tools: Annotated[list[JSONObject], msgspec.Meta(max_length=128)] = []
    tool_choice: JSONObject | None = None
    temperature: Annotated[float, msgspec.Meta(ge=0, le=1)] | None = None
    top_p: Annotated[float, msgspec.Meta(ge=0, le=1)] | None = None
    top_k: int | None = None
    stop_sequences: list[str] | None = None
    metadata: dict[str, str] | None = None  # Anthropic's `{"user_id": …}`: kept on the response, as on /responses
    stream: bool = False
    thread_id: str | None = None
    user: SubjectId | None = None
    timezone: str | None = None
    store: bool = True
    working_state_from: str | None = None


class MessageOut(Model, kw_only=True):
    id: str
    type: str = "message"
    role: str = "assistant"
    model: str | None
    content: list[JSONObject]
    stop_reason: str | None
    stop_sequence: str | None = None
    usage: JSONObject
    thread_id: str | None = None


__all__ = (
    "FunctionTool",
    "MessageOut",
    "MessagesCreate",
    "ModelCreate",
    "ModelId",
    "ModelOut",
    "ModelPage",
    "PlatformTool",
    "Provider",
    "ResponseCreate",
    "ResponseError",
    "ResponseOut",
    "ResponseUsage",
    "SubjectId",
    "TurnTool",
    "UsageDay",
    "UsageQuery",
    "UsageReport",
    "UsageTotals",
)
