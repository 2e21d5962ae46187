"""HTTP contract of store settings (INJ-3) and the injection previewer (INJ-12)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

import msgspec

from shared.schemas.common import UNSET, Instant, Model, UnsetType

SectionName = Literal["commitments", "behaviour", "about_this_person", "organisation", "past_sessions"]
Tokens = Annotated[int, msgspec.Meta(ge=0, le=1_000_000)]


class InjectionSettings(Model):
    budget_tokens: Tokens | None = None
    section_budgets: dict[SectionName, Tokens] = {}
    rank: Literal["confidence", "relevance", "blend"] = "confidence"
    episodes_limit: Annotated[int, msgspec.Meta(ge=0, le=50)] = 0


class CommitmentsSettings(Model):
    inject_limit: Annotated[int, msgspec.Meta(ge=0, le=100)] = 5


class LessonsSettings(Model):
    enabled: bool = False
    min_episodes: Annotated[int, msgspec.Meta(ge=1, le=1000)] = 3


class PromotionSettings(Model):
    enabled: bool = False
    labels: dict[str, str | list[str]] = {}


class MaintenanceSettings(Model):
    enabled: bool = True


class StoreSettingsPatch(Model):
    injection: InjectionSettings | UnsetType = UNSET
    commitments: CommitmentsSettings | UnsetType = UNSET
    lessons: LessonsSettings | UnsetType = UNSET
    promotion: PromotionSettings | UnsetType = UNSET
    maintenance: MaintenanceSettings | UnsetType = UNSET


class StoreSections(Model):
    injection: InjectionSettings
    commitments: CommitmentsSettings
    lessons: LessonsSettings
    promotion: PromotionSettings
    maintenance: MaintenanceSettings


class StoreSettingsOut(Model):
    index_id: str
    injection: InjectionSettings
    commitments: CommitmentsSettings
    lessons: LessonsSettings
    promotion: PromotionSettings
    maintenance: MaintenanceSettings
    defaults: StoreSections
    max_budget_tokens: int
    customised: list[str]
    updated_at: datetime | None
    last_maintenance_run_at: datetime | None


class PreviewSubject(Model):
    id: Annotated[str, msgspec.Meta(min_length=1, max_length=256)]
    attributes: dict[str, list[str]] = {}


class PreviewIn(Model):
    subject: PreviewSubject | None = None
    key_id: str | None = None
    agent_id: str | None = None
    input: Annotated[str, msgspec.Meta(max_length=32_000)] | None = None
    at: Instant | None = None
    # Apply the key's block (or the default one) to this page's store even where a turn would not.
    store_override: bool = False


class PreviewRecord(Model):
    id: str
    section: str
    type: str
    owner: str | None
    line: str
    tokens: int


class LeftOutRecord(Model):
    id: str
    section: str
    type: str | None
    reason: str


class PreviewTrace(Model):
    enabled: bool
    reason: str | None
    index_id: str | None
    budget_tokens: int
    estimated_tokens: int
    dropped_by_count: int
    # True when a section that reached its count held more candidates than the builder fetches, so
    # `dropped_by_count` counts only those fetched.
    dropped_by_count_is_lower_bound: bool
    dropped_by_budget: int
    sections: dict[str, int]
    injected_ids: list[str]
    left_out: list[LeftOutRecord]


class PreviewOut(Model):
    block: str
    trace: PreviewTrace
    records: list[PreviewRecord]
    store_override: bool  # the block was applied to this page's store although a turn would not do so
    note: str | None  # why nothing is injected, or where the block comes from, in words


__all__ = (
    "CommitmentsSettings",
    "InjectionSettings",
    "LeftOutRecord",
    "LessonsSettings",
    "MaintenanceSettings",
    "PreviewIn",
    "PreviewOut",
    "PreviewRecord",
    "PreviewSubject",
    "PreviewTrace",
    "PromotionSettings",
    "SectionName",
    "StoreSections",
    "StoreSettingsOut",
    "StoreSettingsPatch",
    "Tokens",
)
