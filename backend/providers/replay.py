"""The `replay` provider (EXT-1): answers recorded in a JSON file shipped with the project, for the demo and for
trying coremem without a model server. It is never a live model, and every place that shows it says so.

A recording (`backend/providers/recordings/<name>.json`) is `{"description", "answers": [...], "fallback"}`.
Each answer has `when` (a case-insensitive regular expression), matched against the last user message, or
against every message's text with `"in": "any"`, and gives `content` and/or `tool_calls`
(`[{"name", "arguments": {...}}]`). The first answer that matches is given; tool calls are given only while
the request offers those tools, and only once per conversation (so a tool loop ends). No match: `fallback`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from backend.providers.tokens import utf8_bytes_over_four

RECORDINGS = Path(__file__).parent / "recordings"
_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")


@dataclass(frozen=True)
class ReplayCall:
    id: str
    name: str
    arguments: str


@dataclass
class ReplayAnswer:
    content: str | None
    tool_calls: list[ReplayCall] = field(default_factory=list)
    input_tokens: int = 0
    output_tokens: int = 0
    finish_reason: str = "stop"


def available() -> list[str]:
    return sorted(p.stem for p in RECORDINGS.glob("*.json"))


def exists(name: str) -> bool:
    return bool(_NAME.match(name)) and (RECORDINGS / f"{name}.json").is_file()


@lru_cache(maxsize=16)
def _load(name: str) -> dict[str, Any]:
    if not exists(name):
        raise LookupError(f"no recording {name!r}; shipped: {', '.join(available())}")
    data: dict[str, Any] = json.loads((RECORDINGS / f"{name}.json").read_text(encoding="utf-8"))
    for answer in data.get("answers", []):
        answer["_pattern"] = re.compile(answer["when"], re.IGNORECASE | re.DOTALL)
    return data


def _text(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, Mapping))
    return ""


def answer(name: str, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]) -> ReplayAnswer:
    data = _load(name)
    last_user = next((_text(m) for m in reversed(messages) if m.get("role") == "user"), "")
    everything = "\n".join(_text(m) for m in messages)
    offered = {str((t.get("function") or {}).get("name")) for t in tools}
    already_called = {c["function"]["name"] for m in messages for c in (m.get("tool_calls") or [])}
    chosen: Mapping[str, Any] = data.get("fallback") or {"content": "(no recorded answer)"}
    for candidate in data.get("answers", []):
        haystack = everything if candidate.get("in") == "any" else last_user
        if candidate["_pattern"].search(haystack):
            chosen = candidate
            break
    calls = [ReplayCall(f"call_replay_{i}", c["name"], json.dumps(c.get("arguments", {}), ensure_ascii=False))
             for i, c in enumerate(chosen.get("tool_calls") or [])
             if c["name"] in offered and c["name"] not in already_called]
    content = chosen.get("content")
    if content is None and not calls:
        content = (data.get("fallback") or {}).get("content", "")
    input_tokens = sum(utf8_bytes_over_four(_text(m)) for m in messages)
    output_tokens = utf8_bytes_over_four(content or "") + sum(utf8_bytes_over_four(c.arguments) for c in calls)
    return ReplayAnswer(content, calls, input_tokens, output_tokens, "tool_calls" if calls else "stop")
