"""Base types of the HTTP contract."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

import msgspec
from msgspec import UNSET, UnsetType

__all__ = ("UNSET", "ErrorBody", "Instant", "JSONObject", "Model", "Pair", "UnsetType")


# An input instant must carry its offset (PLT-15); msgspec refuses naive ones with a validation error.
Instant = Annotated[datetime, msgspec.Meta(tz=True)]
JSONObject = dict[str, Any]


class Model(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """Every request and response body; unknown fields are refused (ARCHITECTURE rule 4)."""


# A repeatable `name:value` query filter (`metadata=team:red`); the value may itself hold colons.
Pair = Annotated[str, msgspec.Meta(min_length=2, max_length=1100, description="`name:value`")]


class ErrorBody(Model):
    status: int
    code: str
    message: str
    param: str | None = None
    reason_code: str | None = None
    error_id: str | None = None
