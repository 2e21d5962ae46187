"""The HTTP contract of models (EXT-1), turns (TRN-1 … TRN-11) and usage (PLT-18)."""

from __future__ import annotations

from datetime import date, datetime
from typing import Annotated, Literal

import msgspec

from shared.schemas.common import Model

ModelId = Annotated[str, msgspec.Meta(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9][A-Za-z0-9._:/@-]*$")]
Provider = Literal["openai_compatible", "replay"]


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

