"""HTTP contract of memory records (MEM-1 … MEM-19) and the memory tools (MEM-20 … MEM-22)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

import msgspec

from shared.schemas.common import MAX_FILTERS, UNSET, Instant, JSONObject, Model, Pair, UnsetType

MAX_TEXT = 8000
MAX_TAGS = 20
MAX_TAG_CHARS = 64
MAX_METADATA_BYTES = 8 * 1024
MAX_BATCH = 1000

MemoryType = Annotated[str, msgspec.Meta(pattern=r"^[a-z][a-z0-9_]{0,31}$",
                                         description="Lowercase type name such as `fact` or `preference`")]
MemoryText = Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_TEXT)]
Tag = Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_TAG_CHARS)]
Tags = Annotated[list[Tag], msgspec.Meta(max_length=MAX_TAGS)]
Confidence = Annotated[float, msgspec.Meta(ge=0.0, le=1.0)]
Priority = Literal["low", "normal", "high", "critical"]
RecordKey = Annotated[str, msgspec.Meta(min_length=1, max_length=256)]
LabelValue = str | list[str]
Source = Literal["api", "model", "extraction", "maintenance", "admin"]


class MemoryQuery(Model):
    """The filters of `GET /memory`: the same query, field for field, on every route that lists, counts, searches,
    recalls or exports records (one contract for routes, repository and client)."""

    index_id: str | None = None
    type: list[MemoryType] = []
    subject: Annotated[str, msgspec.Meta(description="One person's records; for requests naming nobody and "
                                                     "administrators")] | None = None
    shared: Annotated[bool, msgspec.Meta(description="Only shared records (nobody's)")] = False
    metadata: Annotated[list[Pair], msgspec.Meta(max_length=MAX_FILTERS,
                                                 description="`name:value`, repeatable; all must match")] = []
    label: Annotated[list[Pair], msgspec.Meta(max_length=MAX_FILTERS,
                                              description="`name:value`, repeatable; all must match")] = []
    tag: Annotated[list[Tag], msgspec.Meta(max_length=MAX_FILTERS,
                                           description="Repeatable, case-insensitive; all must match")] = []
    min_confidence: Annotated[Confidence, msgspec.Meta(description="Compared with the effective value")] | None = None
    after: Annotated[Instant, msgspec.Meta(description="Created at or after")] | None = None
    before: Annotated[Instant, msgspec.Meta(description="Created before")] | None = None
    include_expired: bool = False
    include_replaced: bool = False
    q: Annotated[str, msgspec.Meta(min_length=1, max_length=1000,
                                   description='Web-search syntax: words, "a phrase", `or`, `-word`')] | None = None


class Commitment(Model):
    """A commitment's part (MEM-14). Unsent fields are UNSET: a new commitment takes `open`, no due time and nobody
    for them; a PATCH or key upsert keeps the stored values (an explicit null clears `due_at` or `promised_to`)."""

    status: Literal["open", "done", "cancelled"] | UnsetType = UNSET
    due_at: Instant | UnsetType | None = UNSET
    promised_to: Annotated[str, msgspec.Meta(min_length=1, max_length=256)] | UnsetType | None = UNSET


class MemoryFields(Model):
    """The fields a write may set and a PATCH may change; unsent ones are UNSET."""

    metadata: JSONObject | UnsetType = UNSET
    labels: dict[str, LabelValue] | UnsetType = UNSET
    confidence: Confidence | UnsetType = UNSET
    tags: Tags | UnsetType = UNSET
    priority: Priority | UnsetType = UNSET
    expires_at: Instant | UnsetType | None = UNSET
    commitment: Commitment | UnsetType | None = UNSET


class MemoryCreate(MemoryFields, kw_only=True):
    index_id: Annotated[str, msgspec.Meta(min_length=1, max_length=64)]
    type: MemoryType
    text: MemoryText
    key: RecordKey | UnsetType = UNSET


class MemoryBatch(Model):
    records: Annotated[list[MemoryCreate], msgspec.Meta(min_length=1, max_length=MAX_BATCH)]


class MemoryPatch(MemoryFields, kw_only=True):
    text: MemoryText | UnsetType = UNSET


class MemoryOut(Model):
    id: str
    index_id: str
    subject: str | None
    type: str
    text: str
    metadata: JSONObject
    labels: dict[str, Any]
    confidence: float
    effective_confidence: float
    contested: bool
    contested_with: str | None
    recall_count: int
    source: Source
    verified: bool
    key: str | None
    tags: list[str]
    priority: Priority
    expires_at: datetime | None
    status: Literal["active", "replaced"]
    replaces: str | None
    replaced_by: str | None
    confirmations: int
    last_confirmed_at: datetime | None
    provenance: JSONObject | None
    commitment: JSONObject | None
    episode: JSONObject | None
    version: int
    created_at: datetime
    updated_at: datetime


class MemoryPage(Model):
    data: list[MemoryOut]
    next_cursor: str | None


class MemoryCount(Model):
    index_id: str
    type: str
    shared: bool  # records of nobody in particular; False: personal records
    records: int


class MemoryStats(Model):
    """Counts of what `GET /memory` with the same filters would list, over every page."""

    records: int
    shared: int
    people: int  # distinct people with at least one record counted
    groups: list[MemoryCount]  # per index, type and owner kind; groups with no records are left out


class MemoryBatchOut(Model):
    data: list[MemoryOut]
    created: int
    updated: int


class SearchHit(MemoryOut):
    score: float
    confidence_pct: str


class SearchPage(Model):
    data: list[SearchHit]
    next_cursor: str | None


class VersionActor(Model):
    type: Literal["key", "admin", "subject", "system"]
    id: str | None


class MemoryVersionOut(Model):
    version: int
    at: datetime
    action: Literal["created", "updated", "confirmed", "replaced", "verified"]
    actor: VersionActor
    partner_id: str | None
    text: str
    metadata: JSONObject
    labels: dict[str, Any]
    confidence: float
    tags: list[str]
    priority: Priority
    expires_at: datetime | None
    status: Literal["active", "replaced"]
    verified: bool
    commitment: JSONObject | None


class MemoryHistory(Model):
    id: str
    versions: list[MemoryVersionOut]
    replaces: MemoryOut | None
    replaced_by: MemoryOut | None


class ErasureOut(Model):
    counts: dict[str, int]


class ToolOut(Model):
    name: str
    type: Literal["tool"]
    source: Literal["memory"]
    index_id: str
    description: str
    parameters: JSONObject
    offered: bool


class ToolPage(Model):
    data: list[ToolOut]
    next_cursor: str | None


class ToolCall(Model):
    arguments: JSONObject = {}
    timezone: Annotated[str, msgspec.Meta(min_length=1, max_length=64)] | None = None


class ToolResult(Model):
    name: str
    output: str


__all__ = (
    "MAX_BATCH",
    "MAX_METADATA_BYTES",
    "MAX_TAGS",
    "MAX_TAG_CHARS",
    "MAX_TEXT",
    "Commitment",
    "Confidence",
    "ErasureOut",
    "LabelValue",
    "MemoryBatch",
    "MemoryBatchOut",
    "MemoryCount",
    "MemoryCreate",
    "MemoryFields",
    "MemoryHistory",
    "MemoryOut",
    "MemoryPage",
    "MemoryPatch",
    "MemoryQuery",
    "MemoryStats",
    "MemoryText",
    "MemoryType",
    "MemoryVersionOut",
    "Priority",
    "RecordKey",
    "SearchHit",
    "SearchPage",
    "Source",
    "Tag",
    "Tags",
    "ToolCall",
    "ToolOut",
    "ToolPage",
    "ToolResult",
    "VersionActor",
)
