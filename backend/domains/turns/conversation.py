"""What the model is sent (TRN-2): instructions, summaries, working state, the memory block, the recent turns,
the new input, in that order, as chat-completions messages."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import msgspec

from shared.schemas.threads import ItemIn

SUMMARY_HEADER = "Summary of earlier parts of this conversation:"
STATE_HEADER = ("Working state of this conversation (JSON, kept beside the thread; update it with the tool when "
                "offered):")


def _part(part: Mapping[str, Any]) -> dict[str, Any] | None:
    kind = part.get("type")
    if kind in ("input_text", "output_text"):
        return {"type": "text", "text": part.get("text", "")}
    if kind == "refusal":
        return {"type": "text", "text": part.get("refusal", "")}
    if kind == "input_image" and part.get("image_url"):
        return {"type": "image_url", "image_url": {"url": part["image_url"], "detail": part.get("detail", "auto")}}
    if kind == "input_file":
        name = part.get("filename") or part.get("file_id") or "a file"
        return {"type": "text", "text": f"[the user attached {name}]"}
    return None


def _content(content: Any) -> Any:
    """Plain text stays text; parts become chat parts, collapsed to text when they are all text."""
    if isinstance(content, str):
        return content
    parts = [p for p in (_part(x) for x in content or []) if p is not None]
    if all(p["type"] == "text" for p in parts):
        return "\n".join(p["text"] for p in parts)
    return parts


def item_messages(items: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Stored items (or input items as dicts) → messages. Consecutive function calls form one assistant message;
    reasoning items are not sent."""
    messages: list[dict[str, Any]] = []
    for item in items:
        kind = item.get("type")
        if kind == "message":
            role = "system" if item.get("role") == "developer" else item.get("role", "user")
            messages.append({"role": role, "content": _content(item.get("content"))})
        elif kind == "refusal":
            messages.append({"role": "assistant", "content": item.get("refusal", "")})
        elif kind == "function_call":
            call = {"id": item["call_id"], "type": "function",
                    "function": {"name": item["name"], "arguments": item.get("arguments") or "{}"}}
            last = messages[-1] if messages else None
            if last is not None and last["role"] == "assistant" and "tool_calls" in last:
                last["tool_calls"].append(call)
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "function_call_output":
            output = item.get("output") or ""
            if item.get("error") and not output:
                output = json.dumps({"error": item["error"]}, ensure_ascii=False)
            messages.append({"role": "tool", "tool_call_id": item["call_id"], "content": output})
    return messages


def input_dicts(items: Sequence[ItemIn]) -> list[dict[str, Any]]:
    return [msgspec.to_builtins(i) for i in items]


def build(*, instructions: Sequence[str], summaries: Sequence[str], state: Mapping[str, Any] | None,
          block: str, history: Iterable[Mapping[str, Any]], new_input: Iterable[Mapping[str, Any]]
          ) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": text} for text in instructions if text]
    if summaries:
        messages.append({"role": "system", "content": SUMMARY_HEADER + "\n\n" + "\n\n".join(summaries)})
    if state:
        messages.append({"role": "system", "content": STATE_HEADER + "\n"
                         + json.dumps(state, ensure_ascii=False, sort_keys=True)})
    if block:
        messages.append({"role": "system", "content": block})
    messages += item_messages(_without_orphan_results(history))
    messages += item_messages(new_input)
    return messages


def _without_orphan_results(history: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """History read from its newest end may start after a function call whose result it still holds; a tool
    message without its call is refused by OpenAI-compatible servers, so such a result is left out."""
    items = list(history)
    calls = {item.get("call_id") for item in items if item.get("type") == "function_call"}
    return [item for item in items
            if not (item.get("type") == "function_call_output" and item.get("call_id") not in calls)]
