"""Working state (THR-11): merge patch, size and schema checks, versions for If-Match."""

from __future__ import annotations

import json
import re
from typing import Any

from backend.errors import BadRequest, Conflict, ValidationFailed

EMPTY_SIZE = 2  # `{}`
# A version as If-Match carries it: ASCII digits, no more than a bigint holds.
VERSION = re.compile(r"[0-9]{1,18}")


def document(row: dict[str, Any] | None) -> dict[str, Any]:
    if row is None:
        return {"state": {}, "version": 0, "size": EMPTY_SIZE, "updated_at": None}
    return {"state": row["state"], "version": row["version"], "size": row["size"], "updated_at": row["updated_at"]}


def size_of(state: Any) -> int:
    """The size that the limit counts: UTF-8 bytes of the compact JSON text."""
    return len(json.dumps(state, separators=(",", ":"), ensure_ascii=False).encode())


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON Merge Patch: objects merge recursively, null removes, anything else replaces."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def parse_if_match(value: str | None) -> int | None:
    """`If-Match: 3` or the ETag form `"3"`; `*` matches any version."""
    if value is None or value.strip() == "*":
        return None
    raw = value.strip()
    if raw.startswith("W/"):
        raw = raw[2:]
    raw = raw.strip('"')
    if not VERSION.fullmatch(raw):  # str.isdigit() admits "²", and int() refuses more than 4,300 digits
        raise BadRequest("`If-Match` takes the version read from GET /threads/{id}/state, such as `3`.",
                         param="If-Match", code="invalid_if_match")
    return int(raw)


def stale(expected: int, current: int) -> Conflict:
    return Conflict(f"The working state is at version {current}, not {expected}: someone wrote it since you read "
                    "it. Read it again and retry.", param="If-Match", reason_code="stale_version",
                    code="conflict")


def validate_against_schema(state: dict[str, Any], schema: dict[str, Any]) -> None:
    """An agent's `working_state_schema` (JSON Schema): a state that does not conform is 422 at the failing path."""
    from jsonschema.exceptions import best_match
    from referencing.exceptions import Unresolvable

    from backend.domains.agents.state_validator import state_registry, validator_for

    validator_class = validator_for(schema)  # patterns in RE2, uniqueItems in one pass
    registry = state_registry(validator_class, schema)  # the schema alone: a reference outside it is never fetched
    try:
        error = best_match(validator_class(schema, registry=registry).iter_errors(state))
    except RecursionError:  # each level of the state is a few frames deeper; schema chains are bounded where saved
        raise ValidationFailed("The working state nests too deeply to be checked against the agent's "
                               "working_state_schema; flatten it.", param="state", code="working_state_too_deep",
                               ) from None
    except Unresolvable as unresolved:  # refused where schemas are saved now; one saved before may still hold one
        raise ValidationFailed(f"The agent's working_state_schema cannot be applied: its reference "
                               f"{getattr(unresolved, 'ref', '?')!r} points nowhere inside it, so no state can be "
                               "checked. The agent's `working_state_schema` must be corrected (PATCH /agents/{id}).",
                               param="state", code="working_state_invalid") from None
    if error is None:
        return
    path = "state"
    for part in error.absolute_path:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    raise ValidationFailed(f"The working state does not match the agent's working_state_schema: {error.message}",
                           param=path, code="working_state_invalid")


def check_state(state: Any, max_bytes: int, schema: dict[str, Any] | None = None) -> int:
    """An object within the limit (never truncated) that fits the schema when there is one; returns its size."""
    if not isinstance(state, dict):
        raise ValidationFailed("A working state is a JSON object.", param="state")
    size = size_of(state)
    if size > max_bytes:
        raise ValidationFailed(f"The working state would be {size} bytes; the limit is {max_bytes} bytes. It is "
                               "never truncated: write a smaller one.", param="state", code="working_state_too_large")
    if schema is not None:
        validate_against_schema(state, schema)
    return size
