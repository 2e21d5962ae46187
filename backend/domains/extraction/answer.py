"""What the extraction model is sent and must answer (EXT-9): the prompt, the JSON schema given as
`response_format`, and the one msgspec Struct the answer is validated with."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import date, datetime
from typing import Annotated, Any, Literal

import msgspec

from backend.domains.extraction.planning import TOOL_EXCERPT
from backend.errors import storable

Text = Annotated[str, msgspec.Meta(min_length=1, max_length=4000)]


class Memory(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    type: Annotated[str, msgspec.Meta(pattern=r"^[a-z][a-z0-9_]{0,31}$")]
    text: Text
    action: Literal["new", "confirm", "replace"]
    confidence: Annotated[float, msgspec.Meta(ge=0.0, le=1.0)] | None = None
    target_id: Annotated[str, msgspec.Meta(max_length=64)] | None = None
    due_at: datetime | None = None
    promised_to: Annotated[str, msgspec.Meta(min_length=1, max_length=256)] | None = None


class Episode(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    intent: Text | None = None
    text: Text
    result: Literal["succeeded", "failed", "unknown"]
    result_basis: Literal["reaction", "records", "judge"]


class Lesson(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    kind: Literal["workflow", "pitfall"]
    basis: Literal["reaction", "model"]
    text: Text


class Answer(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """The whole answer; anything else fails the window with `invalid_model_output`."""

    memories: Annotated[list[Memory], msgspec.Meta(max_length=100)]
    episode: Episode | None = None
    lessons: Annotated[list[Lesson], msgspec.Meta(max_length=3)] | None = None


def parse(content: object, *, episodes: bool = False, lessons: bool = False) -> Answer:
    """The model's answer as an `Answer`; msgspec.ValidationError or DecodeError when it is anything else, also
    when it holds an `episode` or `lessons` the call did not ask for (its schema left them out), or a text
    PostgreSQL cannot hold (a NUL, which JSON's `\\u0000` decodes to, or a lone surrogate)."""
    if content is not None and not isinstance(content, str):  # a server's answer is not checked before it is here
        raise msgspec.ValidationError(f"the answer is {type(content).__name__}, not JSON text")
    parsed = msgspec.json.decode((content or "").encode(), type=Answer)
    for name, asked in (("episode", episodes), ("lessons", lessons)):
        if getattr(parsed, name) is not None and not asked:
            raise msgspec.ValidationError(f"`{name}` was not asked for in this call")
    where = unstorable(msgspec.to_builtins(parsed), "$")
    if where is not None:  # else an id holding one fails the job's SQL (DataError) and the job retries forever
        raise msgspec.ValidationError(f"`{where}` holds the NUL character (U+0000) or a lone surrogate")
    return parsed


def unstorable(value: Any, path: str) -> str | None:
    """The path of the first text in `value` that PostgreSQL cannot hold, or None."""
    if isinstance(value, str):
        return None if storable(value) else path
    if isinstance(value, dict):
        items: Any = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    else:
        return None
    for key, item in items:
        found = unstorable(item, f"{path}.{key}" if isinstance(key, str) else f"{path}[{key}]")
        if found is not None:
            return found
    return None


def schema(types: Sequence[str], *, episodes: bool, lessons: bool) -> dict[str, Any]:
    """The `response_format` of the call: a JSON schema of exactly the answer the switch asks for."""
    memory = {"type": "object", "additionalProperties": False,
              "required": ["type", "text", "action"],
              "properties": {"type": {"type": "string", "enum": list(types)}, "text": {"type": "string"},
                             "confidence": {"type": "number", "minimum": 0, "maximum": 1},
                             "action": {"type": "string", "enum": ["new", "confirm", "replace"]},
                             "target_id": {"type": "string"}, "due_at": {"type": "string", "format": "date-time"},
                             "promised_to": {"type": "string"}}}
    properties: dict[str, Any] = {"memories": {"type": "array", "items": memory}}
    if episodes:
        properties["episode"] = {
            "type": "object", "additionalProperties": False, "required": ["text", "result", "result_basis"],
            "properties": {"intent": {"type": "string"}, "text": {"type": "string"},
                           "result": {"enum": ["succeeded", "failed", "unknown"]},
                           "result_basis": {"enum": ["reaction", "records", "judge"]}}}
    if lessons:
        properties["lessons"] = {"type": "array", "maxItems": 3, "items": {
            "type": "object", "additionalProperties": False, "required": ["kind", "basis", "text"],
            "properties": {"kind": {"enum": ["workflow", "pitfall"]}, "basis": {"enum": ["reaction", "model"]},
                           "text": {"type": "string"}}}}
    return {"type": "json_schema", "json_schema": {"name": "extraction", "schema": {
        "type": "object", "additionalProperties": False, "required": ["memories"], "properties": properties}}}


SYSTEM = """You read one stretch of a conversation and note what is worth remembering about the person in it, \
as short records that stand on their own. Answer with JSON only, in the given schema.
For each record: `type` is one of the allowed types; `action` is "new" for something not yet known, "confirm" \
when it repeats a current record (name it in `target_id`), or "replace" when it corrects one (name the corrected \
record in `target_id` and give the corrected text). Give commitments a `due_at` (RFC 3339) and `promised_to` \
when the conversation says them. Write nothing for small talk. Placeholders such as <PERSON_1> stand for \
personal data: keep them exactly as written."""


def line(item: Mapping[str, Any]) -> str | None:
    """One item as the model reads it: messages in full, tool calls and results as short excerpts, nothing of
    reasoning items (EXT-8)."""
    body = item["body"]
    kind = item["type"]
    if kind == "message":
        content = body.get("content")
        if isinstance(content, str):
            words = content
        else:
            words = "\n".join(str(part.get("text") or part.get("refusal") or f"[{part.get('type')}]")
                              for part in content or [] if isinstance(part, dict))
        return f"{item['role'] or 'user'}: {words}"
    if kind == "refusal":
        return f"assistant (refusal): {body.get('refusal', '')}"
    if kind == "function_call":
        return f"tool call {body.get('name')}: {excerpt(body.get('arguments'))}"
    if kind == "function_call_output":
        return f"tool result: {excerpt(body.get('output'))}"
    return None


def excerpt(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= TOOL_EXCERPT else text[:TOOL_EXCERPT - 1] + "…"


def messages(*, instructions: str, types: Sequence[str], today: date, lines: Sequence[str],
             records: Sequence[Mapping[str, Any]], episodes: bool, lessons: bool) -> list[dict[str, Any]]:
    system = SYSTEM
    if episodes:
        system += "\nAlso give `episode`: what the person wanted, what was done and how it came out."
    if lessons:
        system += "\nAlso give up to three `lessons` the session teaches, if any."
    if instructions.strip():
        system += "\n\nThe organisation's instructions:\n" + instructions.strip()
    current = "\n".join(f"[{r['id']}] {r['type']}: {r['text']}" for r in records) or "(none)"
    user = (f"Today is {today.isoformat()}. Allowed types: {', '.join(types)}.\n\n"
            f"Current records of this person:\n{current}\n\nConversation:\n" + "\n".join(lines))
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]
