"""Base types of the HTTP contract."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

import msgspec
from msgspec import UNSET, UnsetType

__all__ = ("UNSET", "ErrorBody", "Instant", "JSONObject", "Model", "UnsetType")


# An input instant must carry its offset (PLT-15); msgspec refuses naive ones with a validation error.
Instant = Annotated[datetime, msgspec.Meta(tz=True)]
JSONObject = dict[str, Any]


class Model(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """Every request and response body; unknown fields are refused (ARCHITECTURE rule 4)."""


class ErrorBody(Model):
    status: int
    code: str
    message: str
    param: str | None = None
    reason_code: str | None = None
    error_id: str | None = None
