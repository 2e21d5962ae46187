"""The two memory tools of each index (MEM-20 … MEM-22): names, argument schemas, descriptions, and running them."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import date, datetime
from typing import Any

import msgspec
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError as SchemaError

from backend.access.context import RequestContext
from backend.domains.memory import reads, writes
from backend.domains.memory.rules import confidence_pct, store_types
from backend.domains.tools import envelope
from backend.errors import ValidationFailed
from backend.providers.embeddings import made_at_once
from shared.schemas.common import has_utc_time
from shared.schemas.memory import MAX_TEXT, MemoryCreate, MemoryQuery

PREFIX = "memory"
SEARCH = "search"
WRITE = "write"
SEARCH_LIMIT = 10
SEARCH_MAX = 50
QUOTED_CHARS = 80  # how much of a refused argument an error message quotes
TYPE_PATTERN = r"^[a-z][a-z0-9_]{0,31}$"
# A statement of a tool's transaction that its caller may run after answering (`run_write`'s `insert_later`).
LaterStep = Callable[[], Awaitable[object]]
INSTANT = {"type": "string", "format": "date-time",
           "description": "An RFC 3339 instant with an offset, such as 2026-10-01T09:00:00+02:00"}


def tool_name(index_id: str, kind: str) -> str:
    return f"{PREFIX}__{index_id}__{kind}"


def parse_name(name: str) -> tuple[str, str] | None:
    parts = name.split("__")
    if len(parts) != 3 or parts[0] != PREFIX or parts[2] not in (SEARCH, WRITE) or not parts[1]:
        return None
    return parts[1], parts[2]


def search_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["query"],
        "properties": {
            "query": {"type": "string", "minLength": 1, "maxLength": 1000,
                      "description": 'What to look for: words, "a phrase", `or`, and -word to exclude.'},
            "types": {"type": "array", "items": {"type": "string", "pattern": TYPE_PATTERN}, "maxItems": 20,
                      "description": "Only records of these types."},
            "after": {**INSTANT, "description": "Only records created at or after this instant (with an offset)."},
            "before": {**INSTANT, "description": "Only records created before this instant (with an offset)."},
            "limit": {"type": "integer", "minimum": 1, "maximum": SEARCH_MAX, "default": SEARCH_LIMIT},
        },
    }


def write_schema(types: Sequence[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["type", "text"],
        "properties": {
            "type": {"type": "string", "enum": list(types), "description": "The kind of record."},
            "text": {"type": "string", "minLength": 1, "maxLength": MAX_TEXT,
                     "description": "One self-contained statement."},
            "metadata": {"type": "object", "description": "Optional structured details."},
            "confidence": {"type": "number", "minimum": 0, "maximum": 1,
                           "description": "How sure you are, 0 to 1 (default 0.7)."},
            "due_at": {**INSTANT, "description": "For a commitment: when it is due (with an offset)."},
            "promised_to": {"type": "string", "minLength": 1, "maxLength": 256,
                            "description": "For a commitment: to whom it was promised."},
            "replaces": {"type": "string", "pattern": r"^mem_[0-9a-z]{26}$",
                         "description": "The id of a record this one corrects; that record is replaced."},
        },
    }


def search_description(index: Mapping[str, Any]) -> str:
    return (f"Search the memory store {index['name']!r} ({index['id']}) by question. Answers one JSON line per "
            "record with its type, confidence as a whole percentage, text, id and creation time; `contested` marks "
            "a record that contradicts another.")


def write_description(index: Mapping[str, Any], types: Sequence[str], today: date, timezone: str) -> str:
    return (f"Store something worth remembering in the memory store {index['name']!r} ({index['id']}). Allowed "
            f"types: {', '.join(types)}. Today is {today.isoformat()} ({today.strftime('%A')}) in {timezone}; "
            "work out due dates from it. Saying the same thing again confirms the existing record; to correct "
            "a record, pass its id as `replaces`. Answers a JSON object with memory_id and action "
            "(created, confirmed or replaced).")


# ---------------------------------------------------------------- checking arguments

def _param(error: SchemaError) -> str:
    path = "arguments"
    for part in error.absolute_path:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    if error.validator == "required":
        missing = [name for name in error.validator_value if name not in (error.instance or {})]
        if missing:
            path += f".{missing[0]}"
    elif error.validator == "additionalProperties":
        allowed = set((error.schema or {}).get("properties", {}))
        extra = sorted(k for k in (error.instance or {}) if k not in allowed)
        if extra:
            path += f".{extra[0]}"
    return path


_validators: dict[bytes, Draft202012Validator] = {}  # by schema: building a validator costs more than validating


def check_arguments(schema: dict[str, Any], arguments: Mapping[str, Any]) -> None:
    key = msgspec.json.encode(schema)
    validator = _validators.get(key)
    if validator is None:
        if len(_validators) > 256:
            _validators.clear()
        validator = _validators[key] = Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(dict(arguments)), key=lambda e: list(e.absolute_path))
    if errors:
        raise ValidationFailed(f"Tool arguments do not match the tool's schema: {_quoted_short(errors[0])}",
                               param=_param(errors[0]))


def _quoted_short(error: SchemaError) -> str:
    """jsonschema's message quotes the whole value (`'…' is too long`): a 200 KB query made a 200 KB error. A long
    value is quoted by its start and its length; the message keeps what it says of it."""
    message = str(error.message)
    whole = repr(error.instance)
    if len(whole) <= QUOTED_CHARS or whole not in message:
        return message if len(message) <= 4 * QUOTED_CHARS else message[:4 * QUOTED_CHARS] + "…"
    return message.replace(whole, f"{whole[:QUOTED_CHARS]}… ({len(whole):,} characters)")


def _instant(value: Any, param: str) -> datetime | None:
    if value is None:
        return None
    try:
        parsed = datetime.fromisoformat(str(value))
    except ValueError:
        raise ValidationFailed("Expected an RFC 3339 instant such as 2026-10-01T09:00:00+02:00.", param=param) from None
    if parsed.tzinfo is None:
        raise ValidationFailed("An instant needs its offset, such as +02:00 or Z.", param=param)
    if not has_utc_time(parsed):
        raise ValidationFailed("An instant needs a UTC time within years 1–9999.", param=param)
    return parsed


# ---------------------------------------------------------------- running

def search_line(row: Mapping[str, Any]) -> str:
    confidence = confidence_pct(float(row["effective_confidence"]))
    line: dict[str, Any] = {"type": row["type"], "confidence": confidence, "text": row["text"], "id": row["id"],
                            "created_at": row["created_at"].isoformat()}
    if row["contested"]:
        line["contested"] = True
    return json.dumps(line, ensure_ascii=False)


async def run_search(ctx: RequestContext, index: Mapping[str, Any], arguments: Mapping[str, Any], *,
                     route: str) -> str:
    check_arguments(search_schema(), arguments)
    f = MemoryQuery(index_id=index["id"], type=list(arguments.get("types") or []), q=str(arguments["query"]),
                    after=_instant(arguments.get("after"), "arguments.after"),
                    before=_instant(arguments.get("before"), "arguments.before"))
    rows = await reads.search(ctx, f, int(arguments.get("limit", SEARCH_LIMIT)), route=route,
                              q_param="arguments.query")
    await reads.count_recalls(ctx, [row["id"] for row in rows])
    content = "\n".join(search_line(row) for row in rows)
    if "trust_envelope" in ctx.principal.capabilities:
        return envelope.wrap(tool_name(index["id"], SEARCH), content)
    return content


async def run_write(ctx: RequestContext, index: Mapping[str, Any], arguments: Mapping[str, Any], *,
                    provenance: dict[str, Any] | None = None, labels: dict[str, Any] | None = None,
                    embed_later: list[str] | None = None,
                    insert_later: list[LaterStep] | None = None) -> str:
    """The write tool. With `embed_later`, a record of an index whose provider asks a server or runs a model is
    kept without its vector and its id added to the list, for the caller to embed once its transaction has
    committed (backend/domains/memory/embed_later). With `insert_later`, a new record's insert is appended to it
    once everything that may refuse the call has run (only its statement remains, refused only by an erasure
    since the transaction began), for the caller to run in the same transaction after answering."""
    types = store_types(index)
    kind = arguments.get("type")
    if isinstance(kind, str) and kind not in types:
        raise ValidationFailed(f"This store does not take records of type {kind!r}; allowed types: "
                               f"{', '.join(types)}.", param="arguments.type", code="type_not_allowed")
    check_arguments(write_schema(types), arguments)
    body: dict[str, Any] = {"index_id": index["id"], "type": kind, "text": arguments["text"]}
    if labels:
        body["labels"] = labels
    for name in ("metadata", "confidence"):
        if name in arguments:
            body[name] = arguments[name]
    due_at = _instant(arguments.get("due_at"), "arguments.due_at")
    if kind == "commitment":
        body["commitment"] = {"status": "open", "due_at": due_at.isoformat() if due_at else None,
                              "promised_to": arguments.get("promised_to")}
    else:
        for name in ("due_at", "promised_to"):
            if name in arguments:
                raise ValidationFailed(f"`{name}` belongs to commitments only.", param=f"arguments.{name}")
    try:
        create = msgspec.convert(body, MemoryCreate)
    except msgspec.ValidationError as exc:
        raise ValidationFailed(f"Tool arguments are not valid: {exc}", param="arguments") from None
    item = await writes.prepare(ctx, create, source="model", provenance=provenance, prefix="arguments.", lock=True)
    # A vector made at once (`hashing`) goes into the record's own statement: a later task would cost more.
    item.embed_later = (embed_later is not None and bool(index.get("embedding"))
                        and not made_at_once(index.get("embedding")))
    answer: dict[str, Any]
    replaces = arguments.get("replaces")
    if replaces:
        new_id = await writes.replace(ctx, str(replaces), item, param="arguments.replaces")
        answer = {"memory_id": new_id, "action": "replaced", "replaces": replaces}
        confidence = item.values["confidence"]
    else:
        existing = await writes.confirm_same_words(ctx, item)
        if existing is not None:
            answer = {"memory_id": existing["id"], "action": "confirmed"}
            confidence = existing["confidence"]
        else:
            if writes.in_one_statement(item):
                row = await writes.checked_row(ctx, item)
                if insert_later is not None:
                    insert_later.append(lambda: writes.insert_checked(ctx, item, row))
                else:
                    await writes.insert_checked(ctx, item, row)
                memory_id = row["id"]
            else:
                memory_id = (await writes.write(ctx, [item]))[0][0]
            answer = {"memory_id": memory_id, "action": "created"}
            confidence = item.values["confidence"]
    if embed_later is not None and item.embed_later and answer["action"] != "confirmed":
        embed_later.append(answer["memory_id"])
    answer.update({"type": kind, "confidence": confidence})
    return json.dumps(answer, ensure_ascii=False)
