"""How a response reads (TRN-1, TRN-7): the OpenAI Responses shape, with the thread and the trace added."""

from __future__ import annotations

from typing import Any


def output_text(output: list[dict[str, Any]]) -> str:
    """The answer's words, as the OpenAI SDK's `output_text` joins them."""
    texts = [part.get("text", "") for item in output if item.get("type") == "message"
             for part in item.get("content") or [] if part.get("type") == "output_text"]
    return "".join(texts)


def public_item(item: dict[str, Any]) -> dict[str, Any]:
    """An output item as the caller sees it (the stored item's own fields, and its id)."""
    shown = {k: v for k, v in item.items() if v is not None or k in ("content",)}
    if shown.get("type") in ("message", "function_call"):
        shown.setdefault("status", "completed")
    return shown


def document(row: dict[str, Any], *, with_trace: bool = False) -> dict[str, Any]:
    output = [public_item(i) for i in row.get("output") or []]
    usage = row.get("usage") or {}
    doc: dict[str, Any] = {
        "id": row["id"], "object": "response", "status": row["status"], "thread_id": row.get("thread_id"),
        "model": row.get("model"), "agent_id": row.get("agent_id"), "agent_version": row.get("agent_version"),
        "output": output, "output_text": output_text(output),
        "usage": {name: int(usage.get(name, 0)) for name in ("input_tokens", "output_tokens", "total_tokens")},
        "error": row.get("error"), "metadata": row.get("metadata"), "labels": row.get("labels") or {},
        "trace_id": (row.get("trace") or {}).get("id"),
        "incomplete_details": {"reason": "max_output_tokens"} if row["status"] == "incomplete" else None,
        "created_at": row["created_at"], "completed_at": row.get("completed_at"),
    }
    if with_trace:
        doc["trace"] = row.get("trace")
    return doc
