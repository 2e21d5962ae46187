"""What the summary model is sent (TRN-6): a part of the conversation as a plain transcript, or the summaries of
consecutive parts to merge one level up."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

ITEM_CHARACTERS = 2000  # a long tool result or pasted document is clipped: the summary needs its gist only

SEGMENT_INSTRUCTIONS = (
    "You condense one part of a conversation so that an assistant can continue the conversation later without "
    "the original messages. Write a short summary in the language of the conversation: what was asked and "
    "answered, facts, names, numbers and dates, decisions taken, tools used and their results, and what is "
    "still open. Plain prose, no heading or preamble, at most 200 words.")
MERGE_INSTRUCTIONS = (
    "You receive summaries of consecutive parts of one conversation, oldest first. Merge them into one shorter "
    "summary in the language of the conversation that keeps the facts, names, numbers, dates and decisions an "
    "assistant would need to continue the conversation, and what is still open. Plain prose, no heading or "
    "preamble, at most 200 words.")


def segment_messages(items: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """A level-1 summary's request: the items of whole turns, one line (or paragraph) each."""
    several = len({row["subject"] for row in items if row["subject"] is not None}) > 1
    lines = [line for row in items if (line := _line(row, several))]
    first, last = items[0]["position"], items[-1]["position"]
    return [{"role": "system", "content": SEGMENT_INSTRUCTIONS},
            {"role": "user", "content": f"Conversation, items {first} to {last}:\n\n" + "\n\n".join(lines)}]


def merge_messages(summaries: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """A higher level's request: the summaries it replaces, oldest first."""
    parts = [f"Part {n} (items {row['from_position']} to {row['to_position']}):\n{row['text']}"
             for n, row in enumerate(summaries, start=1)]
    return [{"role": "system", "content": MERGE_INSTRUCTIONS}, {"role": "user", "content": "\n\n".join(parts)}]


def _clip(text: str) -> str:
    return text if len(text) <= ITEM_CHARACTERS else text[:ITEM_CHARACTERS] + " […]"


def _content(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = []
    for part in content or []:
        kind = part.get("type")
        if kind in ("input_text", "output_text"):
            parts.append(part.get("text", ""))
        elif kind == "refusal":
            parts.append(f"[refused: {part.get('refusal', '')}]")
        elif kind == "input_image":
            parts.append("[an image]")
        elif kind == "input_file":
            parts.append(f"[a file{': ' + part['filename'] if part.get('filename') else ''}]")
    return "\n".join(p for p in parts if p)


def _line(row: Mapping[str, Any], name_writers: bool) -> str | None:
    body, kind = row["body"], row["type"]
    if kind == "message":
        who = row["role"] or "user"
        if name_writers and row["subject"] is not None and who == "user":
            who = f"user {row['subject']}"
        text = _content(body.get("content"))
        return f"{who}: {_clip(text)}" if text else None
    if kind == "function_call":
        return f"assistant called the tool {body.get('name')} with {_clip(str(body.get('arguments', '')))}"
    if kind == "function_call_output":
        name = body.get("name") or body.get("call_id")
        if body.get("error"):
            return f"tool {name} failed: {_clip(str(body['error']))}"
        return f"tool {name} returned: {_clip(str(body.get('output', '')))}"
    if kind == "refusal":
        return f"assistant refused: {_clip(str(body.get('refusal', '')))}"
    if kind == "reasoning":
        return None  # the model's own working, not part of the conversation
    return f"{kind}: {_clip(json.dumps(body, ensure_ascii=False))}"
