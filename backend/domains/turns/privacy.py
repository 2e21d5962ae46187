"""Pseudonymisation in a turn (TRN-10): what is sent to the model is hidden, what comes back is restored.

Everything the model is sent goes through `hide_messages`; the answer's words and tool arguments go through
`restore` before the platform runs a tool or keeps an item, so records, items and answers hold real values.
"""

from __future__ import annotations

import json
from typing import Any

from backend.access.context import RequestContext
from backend.providers.pii import Pseudonymizer


def wanted(ctx: RequestContext) -> bool:
    """A key with `privacy.pseudonymize` hides personal data from its models."""
    privacy = (ctx.principal.key or {}).get("privacy") or {}
    return bool(privacy.get("pseudonymize"))


def _hide_content(pz: Pseudonymizer, content: Any) -> Any:
    if isinstance(content, str):
        return pz.hide(content)
    if isinstance(content, list):
        return [{**part, "text": pz.hide(part["text"])} if part.get("type") == "text" else part for part in content]
    return content


def _hide_arguments(pz: Pseudonymizer, arguments: str) -> str:
    try:
        return json.dumps(pz.hide_json(json.loads(arguments)), ensure_ascii=False)
    except ValueError:
        return pz.hide(arguments)


def hide_message(pz: Pseudonymizer, message: dict[str, Any]) -> dict[str, Any]:
    hidden = {**message, "content": _hide_content(pz, message.get("content"))}
    if message.get("tool_calls"):
        hidden["tool_calls"] = [{**call, "function": {**call["function"],
                                                     "arguments": _hide_arguments(pz, call["function"]["arguments"])}}
                                for call in message["tool_calls"]]
    return hidden


def hide_messages(pz: Pseudonymizer, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [hide_message(pz, m) for m in messages]


def restore_arguments(pz: Pseudonymizer, arguments: str) -> str:
    try:
        return json.dumps(pz.restore_json(json.loads(arguments)), ensure_ascii=False)
    except ValueError:
        return pz.restore(arguments)
