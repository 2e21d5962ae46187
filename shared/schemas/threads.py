"""HTTP contract of conversation threads (05-threads.md): threads, items, search, notes, working state, summaries."""

from __future__ import annotations

from datetime import date, datetime
from typing import Annotated, Any, Literal

import msgspec

from shared.schemas.common import MAX_FILTERS, UNSET, Instant, JSONObject, Model, Pair, UnsetType

Role = Literal["user", "assistant", "developer"]
LabelValue = str | list[str]
NoteValue = str | int | float | bool


# ---------------------------------------------------------------- content parts (OpenAI Responses shape)

class InputText(Model, tag_field="type", tag="input_text"):
    text: str


class OutputText(Model, tag_field="type", tag="output_text"):
    text: str
    annotations: list[JSONObject] = []
    logprobs: list[JSONObject] | None = None


class InputImage(Model, tag_field="type", tag="input_image"):
    image_url: str | None = None
    file_id: str | None = None
    detail: Literal["low", "high", "auto"] = "auto"


class InputFile(Model, tag_field="type", tag="input_file"):
    file_id: str | None = None
    file_data: str | None = None
    file_url: str | None = None
    filename: str | None = None


class AudioData(Model):
    data: str
    format: str


class InputAudio(Model, tag_field="type", tag="input_audio"):
    """Accepted by the parser only so that it can be refused clearly (THR-3): only a turn transcribes audio."""

    input_audio: AudioData


class RefusalPart(Model, tag_field="type", tag="refusal"):
    refusal: str


ContentPart = InputText | OutputText | InputImage | InputFile | InputAudio | RefusalPart


class SummaryText(Model, tag_field="type", tag="summary_text"):
    text: str


class ReasoningText(Model, tag_field="type", tag="reasoning_text"):
    text: str


# ---------------------------------------------------------------- items as written by a client (THR-3)

class MessageIn(Model, tag_field="type", tag="message"):
    role: Role
    content: str | list[ContentPart]


class FunctionCallIn(Model, tag_field="type", tag="function_call"):
    call_id: Annotated[str, msgspec.Meta(min_length=1, max_length=256)]
    name: Annotated[str, msgspec.Meta(min_length=1, max_length=256)]
    arguments: str
    namespace: str | None = None
    status: Literal["in_progress", "completed", "incomplete"] = "completed"


class FunctionCallOutputIn(Model, tag_field="type", tag="function_call_output"):
    call_id: Annotated[str, msgspec.Meta(min_length=1, max_length=256)]
    output: str = ""
    name: str | None = None
    error: str | None = None
    artifacts: list[JSONObject] = []
    citations: list[JSONObject] = []


class ReasoningIn(Model, tag_field="type", tag="reasoning"):
    summary: list[SummaryText] = []
    content: list[ReasoningText] | None = None
    encrypted_content: str | None = None


class RefusalIn(Model, tag_field="type", tag="refusal"):
    refusal: str


ItemIn = MessageIn | FunctionCallIn | FunctionCallOutputIn | ReasoningIn | RefusalIn
MAX_ITEMS_PER_REQUEST = 256
Items = Annotated[list[ItemIn], msgspec.Meta(max_length=MAX_ITEMS_PER_REQUEST)]


# ---------------------------------------------------------------- items as stored

class StoredItem(Model):
    """What every stored item has, before its type's own fields (THR-3)."""

    id: str
    position: int
    response_id: str | None
    subject: str | None
    created_at: datetime


class MessageOut(StoredItem, tag_field="type", tag="message"):
    role: Role
    content: str | list[ContentPart]


class FunctionCallOut(StoredItem, tag_field="type", tag="function_call"):
    call_id: str
    name: str
    arguments: str
    namespace: str | None
    status: str


class FunctionCallOutputOut(StoredItem, tag_field="type", tag="function_call_output"):
    call_id: str
    output: str
    name: str | None
    error: str | None
    artifacts: list[JSONObject]
    citations: list[JSONObject]


class ReasoningOut(StoredItem, tag_field="type", tag="reasoning"):
    summary: list[SummaryText]
    content: list[ReasoningText] | None
    encrypted_content: str | None


class RefusalOut(StoredItem, tag_field="type", tag="refusal"):
    refusal: str


ItemOut = MessageOut | FunctionCallOut | FunctionCallOutputOut | ReasoningOut | RefusalOut


class ItemsIn(Model):
    items: Items


class ItemsOut(Model):
    """The shape of seed 002: `items`, not `data` (PLT-14a)."""

    items: list[ItemOut]
    next_cursor: str | None = None


# ---------------------------------------------------------------- threads (THR-1, THR-2, THR-5)

class MessageCounts(Model):
    user: int
    assistant: int
    developer: int


class ThreadCreate(Model):
    metadata: dict[str, str] | None = None
    labels: dict[str, LabelValue] | None = None
    working_state_from: str | None = None
    items: Items | None = None


class ThreadPatch(Model):
    metadata: dict[str, str] | UnsetType = UNSET
    labels: dict[str, LabelValue] | UnsetType = UNSET


class ThreadOut(Model):
    id: str
    subject: str | None
    metadata: dict[str, str]
    labels: dict[str, LabelValue]
    message_counts: MessageCounts
    created_at: datetime
    updated_at: datetime


class ThreadCreated(ThreadOut):
    items: list[ItemOut] = []


class ThreadPage(Model):
    data: list[ThreadOut]
    next_cursor: str | None


class ThreadStats(Model):
    """Counts of the threads `GET /threads` with the same filters would list, over every page."""

    threads: int
    shared: int  # threads that name nobody
    people: int | None  # distinct people owning them; null for a request that names a person
    messages: MessageCounts  # messages in those threads, per role


# ---------------------------------------------------------------- search (THR-7, THR-8)

class ThreadQuery(Model):
    """The filters of `GET /threads` and `GET /threads/stats`."""

    metadata: Annotated[list[Pair], msgspec.Meta(max_length=MAX_FILTERS,
                                                 description="`key:value`, repeatable; all must match")] = []
    label: Annotated[list[Pair], msgspec.Meta(max_length=MAX_FILTERS,
                                              description="`name:value`, repeatable")] = []
    subject: Annotated[str, msgspec.Meta(description="Owner filter for requests naming nobody; empty for shared "
                                                     "threads")] | None = None


class ItemSearchQuery(Model):
    """The query of `GET /thread-items`: words (THR-7) and/or notes (THR-8), and the filters."""

    q: Annotated[str, msgspec.Meta(max_length=1000, description='Words, "a phrase", `or`, `-word`')] | None = None
    thread_id: str | None = None
    thread_metadata: Annotated[list[Pair], msgspec.Meta(max_length=MAX_FILTERS,
                                                        description="`key:value`, repeatable")] = []
    role: Role | None = None
    from_: Annotated[Instant, msgspec.Meta(description="At or after")] | None = msgspec.field(default=None,
                                                                                               name="from")
    to: Annotated[Instant, msgspec.Meta(description="Before")] | None = None
    metadata: Annotated[list[Pair], msgspec.Meta(max_length=MAX_FILTERS,
                                                 description="Note filter `key:value`, repeatable")] = []
    metadata_by: Annotated[str, msgspec.Meta(description="Whose notes (a person's id)")] | None = None


class Highlight(Model):
    start: int
    end: int


class SearchHit(Model):
    thread_id: str
    item_id: str
    type: Literal["message", "refusal"]
    role: Role | None
    subject: str | None
    created_at: datetime
    snippet: str
    highlights: list[Highlight]
    metadata: dict[str, NoteValue] | None = None
    metadata_by: str | None = None


class SearchPage(Model):
    data: list[SearchHit]
    next_cursor: str | None
    searched_to: date | None


# ---------------------------------------------------------------- notes (THR-8)

class NoteIn(Model):
    metadata: dict[str, NoteValue]


class NoteOut(Model):
    item_id: str
    by: str | None
    metadata: dict[str, NoteValue]
    updated_at: datetime


class NotePage(Model):
    data: list[NoteOut]
    next_cursor: str | None = None


# ---------------------------------------------------------------- working state (THR-11) and summaries (THR-13)

class StatePut(Model):
    state: dict[str, Any]


class StateOut(Model):
    state: dict[str, Any]
    version: int
    size: int
    updated_at: datetime | None


class SummaryOut(Model):
    id: str
    from_position: int
    to_position: int
    level: int
    model: str | None
    text: str
    created_at: datetime


class SummaryPage(Model):
    data: list[SummaryOut]
    next_cursor: str | None = None


__all__ = (
    "MAX_ITEMS_PER_REQUEST",
    "AudioData",
    "ContentPart",
    "FunctionCallIn",
    "FunctionCallOut",
    "FunctionCallOutputIn",
    "FunctionCallOutputOut",
    "Highlight",
    "InputAudio",
    "InputFile",
    "InputImage",
    "InputText",
    "ItemIn",
    "ItemOut",
    "ItemSearchQuery",
    "Items",
    "ItemsIn",
    "ItemsOut",
    "LabelValue",
    "MessageCounts",
    "MessageIn",
    "MessageOut",
    "NoteIn",
    "NoteOut",
    "NotePage",
    "NoteValue",
    "OutputText",
    "ReasoningIn",
    "ReasoningOut",
    "ReasoningText",
    "RefusalIn",
    "RefusalOut",
    "RefusalPart",
    "Role",
    "SearchHit",
    "SearchPage",
    "StateOut",
    "StatePut",
    "StoredItem",
    "SummaryOut",
    "SummaryPage",
    "SummaryText",
    "ThreadCreate",
    "ThreadCreated",
    "ThreadOut",
    "ThreadPage",
    "ThreadPatch",
    "ThreadQuery",
    "ThreadStats",
)
