"""HTTP contract of the platform: administrators, organisations, keys, subject tokens, indexes, audit."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

import msgspec

from shared.schemas.common import UNSET, Instant, JSONObject, Model, UnsetType
from shared.schemas.compaction import CompactionSettings

Capability = Literal["knowledge", "memory", "threads", "tooling", "compaction", "management", "trust_envelope"]
Name = Annotated[str, msgspec.Meta(min_length=1, max_length=200)]


class LoginIn(Model):
    email: Annotated[str, msgspec.Meta(min_length=3, max_length=320)]
    password: Annotated[str, msgspec.Meta(min_length=1, max_length=1024)]


class AdminOut(Model):
    id: str
    email: str
    role: Literal["admin", "operator"]
    org_id: str | None


class LoginOut(Model):
    token: str
    expires_at: datetime
    admin: AdminOut


class HalfLife(Model):
    half_life_days: Annotated[float, msgspec.Meta(gt=0)]


class InjectionBlock(Model):
    """What a key (or an agent) injects into a turn (INJ-1)."""

    index_id: Annotated[str, msgspec.Meta(pattern="^idx_")] | None = None  # needed unless `enabled` is false
    enabled: bool = True
    types: list[Annotated[str, msgspec.Meta(pattern="^[a-z][a-z0-9_]{0,31}$")]] = []
    metadata: dict[str, str | int | float | bool] = {}
    min_confidence: Annotated[float, msgspec.Meta(ge=0, le=1)] | None = None
    limit: Annotated[int, msgspec.Meta(ge=0, le=200)] = 20
    budget_tokens: Annotated[int, msgspec.Meta(ge=0, le=1_000_000)] = 1500


class KeyMemoryConfig(Model):
    retrieval_tool: bool = True
    write_tool: bool = False
    injection: InjectionBlock | None = None
    decay: dict[str, HalfLife] = {}
    compaction: CompactionSettings | None = None  # TRN-6; an agent's own settings replace these for its turns


class KeyPrivacy(Model):
    """A key's privacy settings (TRN-10, EXT-11); unknown fields are refused, so a misspelling is not ignored."""

    pseudonymize: bool = False  # hide personal data from the key's models


class KeyCreate(Model):
    name: Name
    capabilities: list[Capability]
    memory: KeyMemoryConfig | None = None
    policy: JSONObject | None = None
    expires_at: Instant | None = None
    privacy: KeyPrivacy | None = None


class KeyPatch(Model):
    name: Name | UnsetType = UNSET
    capabilities: list[Capability] | UnsetType = UNSET
    memory: KeyMemoryConfig | UnsetType = UNSET
    policy: JSONObject | UnsetType = UNSET
    expires_at: Instant | UnsetType | None = UNSET
    privacy: KeyPrivacy | UnsetType | None = UNSET


class KeyOut(Model):
    id: str
    org_id: str
    name: str
    capabilities: list[str]
    memory: JSONObject
    policy: JSONObject
    privacy: JSONObject | None
    expires_at: datetime | None
    revoked_at: datetime | None
    status: Literal["active", "revoked", "expired"]
    created_at: datetime
    updated_at: datetime
    last_used_at: datetime | None  # to the minute; null: never used


class KeyCreated(KeyOut):
    secret: str


class KeyPage(Model):
    data: list[KeyOut]
    next_cursor: str | None


class KeyAuditEntry(Model):
    id: str
    key_id: str
    at: datetime
    action: str
    actor: JSONObject
    snapshot: JSONObject


class KeyAuditPage(Model):
    data: list[KeyAuditEntry]
    next_cursor: str | None


class PolicyIn(Model):
    indexes: list[str] | UnsetType = UNSET
    rules: list[JSONObject] | UnsetType = UNSET
    settings: JSONObject | UnsetType = UNSET


class SubjectIn(Model):
    id: Annotated[str, msgspec.Meta(min_length=1, max_length=256)]
    attributes: dict[str, list[str]] = {}


class SubjectTokenIn(Model):
    subject: SubjectIn
    ttl_seconds: Annotated[int, msgspec.Meta(ge=1)] = 3600


class SubjectTokenOut(Model):
    token: str
    expires_at: datetime


class OrgMemory(Model):
    decay: dict[str, HalfLife] = {}


class Improvements(Model):
    enabled: bool = False


class HelperModel(Model):
    provider: Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
    model: Annotated[str, msgspec.Meta(min_length=1, max_length=200)]


class OrgLimits(Model):
    """EXT-8: model tokens per calendar month (the organisation's zone); null: no cap."""

    monthly_model_tokens: Annotated[int, msgspec.Meta(ge=0)] | None = None


class OrgOut(Model):
    id: str
    name: str
    timezone: str
    capabilities: list[str]
    improvements: Improvements
    memory: OrgMemory
    helper_model: HelperModel | None
    policy: JSONObject
    vocabulary: JSONObject | None
    limits: OrgLimits
    created_at: datetime
    updated_at: datetime


class OrgPage(Model):
    data: list[OrgOut]
    next_cursor: str | None


class OrgPatch(Model):
    name: Name | UnsetType = UNSET
    timezone: Annotated[str, msgspec.Meta(min_length=1, max_length=64)] | UnsetType = UNSET
    capabilities: list[Literal["improvements"]] | UnsetType = UNSET
    improvements: Improvements | UnsetType = UNSET
    memory: OrgMemory | UnsetType = UNSET
    helper_model: HelperModel | UnsetType | None = UNSET
    policy: JSONObject | UnsetType = UNSET
    limits: OrgLimits | UnsetType = UNSET


class EmbeddingConfig(Model):
    provider: Literal["local", "openai_compatible", "hashing"]
    model: Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
    dimensions: Annotated[int, msgspec.Meta(ge=1, le=4096)]
    base_url: str | None = None


class IndexCreate(Model):
    name: Name
    embedding: EmbeddingConfig | None = None


class IndexPatch(Model):
    """`PATCH /indexes/{id}`: the fields sent change; `embedding: null` stops embedding new records."""

    name: Name | UnsetType = UNSET
    embedding: EmbeddingConfig | UnsetType | None = UNSET


class IndexOut(Model):
    id: str
    name: str
    embedding: EmbeddingConfig | None
    created_at: datetime


class IndexPage(Model):
    data: list[IndexOut]
    next_cursor: str | None


ActorType = Literal["key", "admin", "subject", "system"]


class AuditQuery(Model):
    """The filters of `GET /audit`; `subject` is a person's id, which the API matches by its keyed hash."""

    from_: Annotated[Instant, msgspec.Meta(description="At or after")] | None = msgspec.field(default=None,
                                                                                               name="from")
    to: Annotated[Instant, msgspec.Meta(description="Before")] | None = None
    actor_type: ActorType | None = None
    actor_id: str | None = None
    action: Annotated[list[str], msgspec.Meta(description="Repeatable: any of these")] = []
    exclude_action: Annotated[list[str], msgspec.Meta(description="Repeatable: none of these")] = []
    object_type: str | None = None
    object_id: str | None = None
    subject: Annotated[str, msgspec.Meta(description="A person's id; matched by its keyed hash")] | None = None
    outcome: Literal["allowed", "denied"] | None = None


class AuditActor(Model):
    type: ActorType
    id: str | None


class AuditEventOut(Model):
    id: str
    seq: int
    at: datetime
    org_id: str
    actor: AuditActor
    subject: str | None
    action: str
    object_type: str | None
    object_id: str | None
    outcome: Literal["allowed", "denied"]
    detail: JSONObject
    hash: str


class AuditPage(Model):
    data: list[AuditEventOut]
    next_cursor: str | None


class ChainStatus(Model):
    org_id: str
    events: int
    intact: bool
    broken_at_seq: int | None
    problem: str | None


class Health(Model):
    status: str


class Ready(Model):
    status: str
    database: bool
    migrations_current: bool
    revision: str | None
    head: str


__all__ = (
    "ActorType",
    "AdminOut",
    "AuditActor",
    "AuditEventOut",
    "AuditPage",
    "AuditQuery",
    "Capability",
    "ChainStatus",
    "EmbeddingConfig",
    "HalfLife",
    "Health",
    "HelperModel",
    "Improvements",
    "IndexCreate",
    "IndexOut",
    "IndexPage",
    "IndexPatch",
    "InjectionBlock",
    "KeyAuditEntry",
    "KeyAuditPage",
    "KeyCreate",
    "KeyCreated",
    "KeyMemoryConfig",
    "KeyOut",
    "KeyPage",
    "KeyPatch",
    "KeyPrivacy",
    "LoginIn",
    "LoginOut",
    "Name",
    "OrgLimits",
    "OrgMemory",
    "OrgOut",
    "OrgPage",
    "OrgPatch",
    "PolicyIn",
    "Ready",
    "SubjectIn",
    "SubjectTokenIn",
    "SubjectTokenOut",
)
