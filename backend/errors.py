"""Domain errors and their one mapping to the HTTP error body of PLT-14."""

from __future__ import annotations

import re
from typing import Any

NUL_MESSAGE = "Text may not contain the NUL character (U+0000)."
SURROGATE_MESSAGE = ("Text may not contain a lone surrogate (U+D800–U+DFFF, sent in JSON as `\\ud800` without its "
                     "pair): it is no character and has no UTF-8 form.")


def storable(text: str) -> bool:
    """Whether PostgreSQL can hold `text`: it holds no NUL, and a lone surrogate (what JSON's `\\ud800` decodes to
    without its pair) has no UTF-8 form."""
    return "\x00" not in text and not any("\ud800" <= c <= "\udfff" for c in text)


THREADS_MISSING_MESSAGE = (
    "This key does not hold the `threads` capability, so no response or thread was kept for it to continue "
    "or read back. Send the whole conversation in the request, or use a key that holds `threads`."
)


# msgspec names a value's place as "- at `$.a.b`", and a mapping's key as "- at `key` in `$.a.b`" (the mapping).
_AT_PATH = re.compile(r"- at (?:`key` in )?`\$(?P<path>[^`]*)`")
# msgspec's unknown and missing fields, and `check_instants`' instant outside the calendar (shared/schemas/common.py).
_NAMED_FIELD = re.compile(r"(?:unknown|missing required|instant) field `(?P<name>[^`]+)`")


def msgspec_error_parts(message: str) -> tuple[str, str | None, str | None]:
    """A msgspec validation message taken apart: its words without the location, the path of the container it
    points at (`.records[3]`, '' for the top, None when it names no place) and the field it names as unknown or
    missing (None otherwise). The one reading of these messages, for every 422 that names a `param`."""
    at = _AT_PATH.search(message)
    named = _NAMED_FIELD.search(message)
    return (_AT_PATH.sub("", message).strip(), at.group("path") if at else None,
            named.group("name") if named else None)


class ApiError(Exception):
    """An error a client caused or may see; carries the PLT-14 body."""

    status = 400
    code = "bad_request"

    def __init__(
        self,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        reason_code: str | None = None,
        status: int | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        if code is not None:
            self.code = code
        if status is not None:
            self.status = status
        self.reason_code = reason_code
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        body: dict[str, Any] = {"status": self.status, "code": self.code, "message": self.message, "param": self.param}
        if self.reason_code is not None:
            body["reason_code"] = self.reason_code
        return body


class BadRequest(ApiError):
    status = 400
    code = "bad_request"


class Unauthorized(ApiError):
    status = 401
    code = "unauthorized"


class Forbidden(ApiError):
    status = 403
    code = "forbidden"


class CapabilityMissing(Forbidden):
    code = "capability_missing"

    def __init__(self, capability: str, *, message: str | None = None, param: str | None = None) -> None:
        super().__init__(message or f"This key does not hold the `{capability}` capability.", param=param)
        self.capability = capability


class PolicyDenied(Forbidden):
    """A write the policy refuses; the request's transaction is rolled back and a `denied` event is kept."""

    code = "policy_denied"

    def __init__(self, message: str, *, action: str, object_type: str, object_id: str | None = None,
                 detail: dict[str, Any] | None = None, param: str | None = None, org_id: str | None = None,
                 actor: Any = None, subject_id: str | None = None) -> None:
        super().__init__(message, param=param)
        self.org_id = org_id
        self.actor = actor
        self.subject_id = subject_id
        self.action = action
        self.object_type = object_type
        self.object_id = object_id
        self.detail = detail or {}


class NotFound(ApiError):
    status = 404
    code = "not_found"


class ThreadsCapabilityMissing(NotFound):
    code = "threads_not_kept"

    def __init__(self) -> None:
        super().__init__(THREADS_MISSING_MESSAGE)


class Conflict(ApiError):
    status = 409
    code = "conflict"


class PayloadTooLarge(ApiError):
    status = 413
    code = "payload_too_large"


class RateLimited(ApiError):
    """PLT-14: a key over its request rate; `Retry-After` says in whole seconds when to try again."""

    status = 429
    code = "rate_limited"

    def __init__(self, message: str, *, retry_after: int) -> None:
        super().__init__(message, headers={"Retry-After": str(retry_after)})
        self.retry_after = retry_after


class DatabaseUnavailable(ApiError):
    """PLT-14 (issue 17 item 13): the database connection failed or was cut during the request, which rolled back
    whole; the same request may be sent again after `Retry-After` seconds."""

    status = 503
    code = "database_unavailable"
    RETRY_AFTER = 1

    def __init__(self, message: str = "The database is not reachable right now; nothing was changed. Try again "
                 "shortly.") -> None:
        super().__init__(message, headers={"Retry-After": str(self.RETRY_AFTER)})


class ValidationFailed(ApiError):
    status = 422
    code = "validation_failed"
