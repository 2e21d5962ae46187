"""Chat messages with personal data hidden (TRN-10), for every caller that sends a thread to a model: turns,
compaction summaries and extraction."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from backend.providers.pii import Pseudonymizer


def _hide_content(pz: Pseudonymizer, content: Any) -> Any:
    if isinstance(content, str):
        return pz.hide(content)
    if isinstance(content, list):
        return [{**part, "text": pz.hide(part["text"])} if part.get("type") == "text" else part for part in content]
    return content


def _hide_arguments(pz: Pseudonymizer, arguments: str) -> str:
    try:
        return json.dumps(pz.hide_json(json.loads(arguments)), ensure_ascii=False)
    except (ValueError, RecursionError):  # not JSON, or nested past the reader's depth: hidden as text
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


async def hide_messages_aside(pz: Pseudonymizer, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`hide_messages` in a worker thread. Hiding is linear in the text, but a long conversation still takes
    seconds (1 MiB: about 2.7 s); on the event loop that stalled every other request for as long. The
    pseudonymizer is this caller's alone, and the caller waits, so nothing else touches it meanwhile."""
    return await asyncio.to_thread(hide_messages, pz, messages)


async def hide_texts_aside(pz: Pseudonymizer, texts: list[str]) -> list[str]:
    """Each text hidden, in a worker thread, as `hide_messages_aside` (a tool's output, a window's lines)."""
    return await asyncio.to_thread(lambda: [pz.hide(text) for text in texts])


def restore_arguments(pz: Pseudonymizer, arguments: str) -> str:
    try:
        return json.dumps(pz.restore_json(json.loads(arguments)), ensure_ascii=False)
    except (ValueError, RecursionError):  # as _hide_arguments
        return pz.restore(arguments)
