"""Base types of the HTTP contract."""

from __future__ import annotations

import inspect
from datetime import UTC, datetime
from typing import Annotated, Any, get_args, get_origin

import msgspec
from msgspec import UNSET, UnsetType

__all__ = ("MAX_FILTERS", "UNSET", "ErrorBody", "Instant", "InstantOutOfRange", "JSONObject", "Model", "Pair",
           "UnsetType", "check_instants", "has_utc_time")


# An input instant must carry its offset (PLT-15); msgspec refuses naive ones with a validation error, and
# `check_instants` (the `__post_init__` of a Model holding one) one whose UTC time falls outside years 1–9999.
Instant = Annotated[datetime, msgspec.Meta(tz=True)]
JSONObject = dict[str, Any]


def _holds_instant(annotation: Any) -> bool:
    """Whether a field's type is `Instant` (through `X | None`, `Annotated`); response fields, plain `datetime`
    read from the database, need no check."""
    if get_origin(annotation) is Annotated:
        args = get_args(annotation)
        if args[0] is datetime and any(isinstance(m, msgspec.Meta) and m.tz for m in args[1:]):
            return True
    return any(_holds_instant(arg) for arg in get_args(annotation))


_INSTANT_FIELDS: dict[type, tuple[tuple[str, str], ...]] = {}


def _instant_fields(cls: type[msgspec.Struct]) -> tuple[tuple[str, str], ...]:
    """(attribute, wire name) of the Struct's `Instant` fields, worked out once per Struct."""
    found = _INSTANT_FIELDS[cls] = tuple((f.name, f.encode_name) for f in msgspec.structs.fields(cls)
                                         if _holds_instant(f.type))
    return found


def has_utc_time(value: datetime) -> bool:
    """Whether the instant has a UTC time within years 1–9999 (the only ones PostgreSQL hands back)."""
    if 1 < value.year < 9999:  # an offset moves an instant by less than a day
        return True
    try:
        value.astimezone(UTC)
    except OverflowError:
        return False
    return True


class InstantOutOfRange(ValueError):
    """An `Instant` field holding an instant with no UTC time in years 1–9999; `field` is its wire name."""

    def __init__(self, field: str, value: datetime) -> None:
        super().__init__(f"The instant field `{field}` has no UTC time within years 1–9999 ({value.isoformat()}); "
                         "send one from 0001-01-01T00:00:00Z to 9999-12-31T23:59:59Z")
        self.field = field


def check_instants(struct: msgspec.Struct) -> None:
    """PLT-14/PLT-15: an instant such as `9999-12-31T23:59:59-23:59` is no instant PostgreSQL can hand back (it
    stores it, then psycopg cannot read it), so it is refused wherever it comes in: a body, a query, a tool's
    arguments. msgspec turns the ValueError into its validation error while decoding or converting, and
    `errors.msgspec_error_parts` reads the field's name in it; a Struct made directly raises it as it is."""
    fields = _INSTANT_FIELDS.get(type(struct))
    for name, wire in _instant_fields(type(struct)) if fields is None else fields:
        value = getattr(struct, name)
        if isinstance(value, datetime) and not has_utc_time(value):
            raise InstantOutOfRange(wire, value)


class Model(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """Every request and response body; unknown fields are refused (ARCHITECTURE rule 4)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # Only a Struct with an `Instant` field gets the check as its `__post_init__` (msgspec reads it once the
        # class is made): a call per Struct made would double the cost of building a page of responses. Its own
        # annotations are still text here (`from __future__ import annotations`). A subclass with a
        # `__post_init__` of its own calls `check_instants`.
        super().__init_subclass__(**kwargs)
        own = inspect.get_annotations(cls)
        if "__post_init__" not in cls.__dict__ and any(
                "Instant" in kind if isinstance(kind, str) else _holds_instant(kind) for kind in own.values()):
            cls.__post_init__ = check_instants  # type: ignore[attr-defined]


# A repeatable `name:value` query filter (`metadata=team:red`); the value may itself hold colons.
Pair = Annotated[str, msgspec.Meta(min_length=2, max_length=1100, description="`name:value`")]
# How often one filter may repeat: each is a clause of the statement, and a thousand made planning take seconds.
MAX_FILTERS = 64


class ErrorBody(Model):
    status: int
    code: str
    message: str
    param: str | None = None
    reason_code: str | None = None
    error_id: str | None = None
