"""POST /messages (TRN-9): the Anthropic Messages request and answer shapes over the same turn.

With a thread (the `X-Core-Thread-Id` header or `thread_id`), `messages` holds what is new since the thread's
last turn, as with `previous_response_id`; without one, the whole conversation starts a new thread.
"""

from __future__ import annotations

import json
from typing import Any

from backend.errors import BadRequest, ValidationFailed
from shared.schemas.turns import FunctionTool, MessagesCreate, ResponseCreate


def _text(blocks: Any) -> str:
    if isinstance(blocks, str):
        return blocks
    return "\n".join(str(b.get("text", "")) for b in blocks or [] if isinstance(b, dict) and b.get("type") == "text")


def _image(block: dict[str, Any], param: str) -> dict[str, Any]:
    source = block.get("source")
    if isinstance(source, dict):
        if source.get("type") == "url" and isinstance(source.get("url"), str):
            return {"type": "input_image", "image_url": source["url"]}
        media_type, data = source.get("media_type"), source.get("data")
        if source.get("type") == "base64" and isinstance(media_type, str) and isinstance(data, str):
            return {"type": "input_image", "image_url": f"data:{media_type};base64,{data}"}
    raise ValidationFailed('An image block\'s `source` is an object: {"type": "base64", "media_type": …, "data": …} '
                           'or {"type": "url", "url": …}.', param=param)


def _items(index: int, message: dict[str, Any]) -> list[dict[str, Any]]:
    for name in message:  # a message is `role` and `content`, as Anthropic's API has it; nothing else is read
        if name not in ("role", "content"):
            raise ValidationFailed(f"Unknown field `{name}` in a message; a message has `role` and `content`.",
                                   param=f"messages[{index}].{name}")
    role = message.get("role")
    if role not in ("user", "assistant"):
        raise ValidationFailed("A message's role is `user` or `assistant`.", param=f"messages[{index}].role")
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "message", "role": role, "content": content}]
    if not isinstance(content, list):
        raise ValidationFailed("A message's content is text or a list of blocks.", param=f"messages[{index}].content")
    items: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    for j, block in enumerate(content):
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text":
            kind = "output_text" if role == "assistant" else "input_text"
            parts.append({"type": kind, "text": block.get("text", "")})
        elif kind == "image" and role == "user":
            parts.append(_image(block, f"messages[{index}].content[{j}]"))
        elif kind == "tool_use" and role == "assistant":
            items.append({"type": "function_call", "call_id": block.get("id"), "name": block.get("name"),
                          "arguments": json.dumps(block.get("input") or {}, ensure_ascii=False)})
        elif kind == "tool_result" and role == "user":
            if not isinstance(block.get("content"), str | list | None):
                raise ValidationFailed("A tool_result block's `content` is text or a list of blocks.",
                                       param=f"messages[{index}].content[{j}]")
            output = _text(block.get("content"))
            items.append({"type": "function_call_output", "call_id": block.get("tool_use_id"),
                          "output": "" if block.get("is_error") else output,
                          **({"error": output or "error"} if block.get("is_error") else {})})
        else:
            raise ValidationFailed(f"Content blocks of type {kind!r} are not taken in a {role} message.",
                                   param=f"messages[{index}].content[{j}]")
    if parts:
        # The assistant's words come before its tool calls. A person's tool results come before her words: each
        # result must follow its call directly, or servers refuse the conversation (Anthropic asks the same order).
        message = {"type": "message", "role": role, "content": parts}
        if role == "assistant":
            items.insert(0, message)
        else:
            items.append(message)
    return items


def _tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    converted = []
    for i, tool in enumerate(tools):
        if tool.get("type") == "tool":  # a platform tool, as in POST /responses
            converted.append({"type": "tool", "name": tool.get("name")})
        elif tool.get("type") in (None, "custom"):
            converted.append({"type": "function", "name": tool.get("name"), "description": tool.get("description"),
                              "parameters": tool.get("input_schema") or {"type": "object", "properties": {}}})
        else:
            raise ValidationFailed(f"Tools of type {tool.get('type')!r} are not offered here.", param=f"tools[{i}]")
    return converted


# Anthropic fields an OpenAI-compatible chat server has no counterpart for (or that the tool loop cannot honour
# round after round): refused by name rather than accepted and dropped.
_NOT_OFFERED = {
    "top_k": "OpenAI-compatible model servers take no `top_k`; use `temperature` or `top_p`.",
    "stop_sequences": "stop sequences are not offered yet; the answer ends where the model ends it.",
}


def _refuse_what_is_not_offered(body: MessagesCreate) -> None:
    if body.working_state_from is not None:
        raise ValidationFailed("POST /messages does not take `working_state_from` yet; start the thread with "
                               "POST /threads or POST /responses.", param="working_state_from")
    for name, why in _NOT_OFFERED.items():
        if getattr(body, name) is not None:
            raise ValidationFailed(f"POST /messages does not take `{name}`: {why}", param=name)
    if body.tool_choice is not None and body.tool_choice != {"type": "auto"}:
        raise ValidationFailed("Only `tool_choice: {\"type\": \"auto\"}` (the default) is offered: the model "
                               "chooses whether to call a tool.", param="tool_choice")


def as_turn(body: MessagesCreate, header_thread: str | None) -> dict[str, Any]:
    """The POST /responses body this request means (validated by the caller as a ResponseCreate)."""
    _refuse_what_is_not_offered(body)
    if header_thread is not None and body.thread_id is not None and header_thread != body.thread_id:
        raise BadRequest("The X-Core-Thread-Id header and `thread_id` name different threads.", param="thread_id",
                         code="conflicting_thread_fields")
    items = [item for i, message in enumerate(body.messages) for item in _items(i, message)]
    turn: dict[str, Any] = {"input": items, "model": body.model, "agent_id": body.agent_id, "store": body.store,
                            "tools": _tools(body.tools),
                            "thread_id": header_thread if header_thread is not None else body.thread_id,
                            "user": body.user, "timezone": body.timezone, "stream": body.stream,
                            "temperature": body.temperature, "top_p": body.top_p, "max_output_tokens": body.max_tokens,
                            "metadata": body.metadata}
    system = _text(body.system) if body.system is not None else None
    if system:
        turn["instructions"] = system
    return {k: v for k, v in turn.items() if v is not None}


def answer(doc: dict[str, Any], functions: set[str]) -> dict[str, Any]:
    """The Anthropic answer: the words, and the client tool calls as `tool_use` blocks."""
    content: list[dict[str, Any]] = []
    for item in doc["output"]:
        if item["type"] == "message":
            text = "".join(p.get("text", "") for p in item.get("content") or [])
            if text:
                content.append({"type": "text", "text": text})
        elif item["type"] == "function_call" and item["name"] in functions:
            content.append({"type": "tool_use", "id": item["call_id"], "name": item["name"],
                            "input": _arguments(item["arguments"])})
    stop = ("tool_use" if any(b["type"] == "tool_use" for b in content)
            else "max_tokens" if doc["status"] == "incomplete" else "end_turn")
    usage = doc["usage"]
    return {"id": doc["id"], "type": "message", "role": "assistant", "model": doc["model"], "content": content,
            "stop_reason": stop, "stop_sequence": None, "thread_id": doc["thread_id"],
            "usage": {"input_tokens": usage["input_tokens"], "output_tokens": usage["output_tokens"]}}


def _arguments(text: str | None) -> Any:
    try:
        parsed = json.loads(text or "{}")
    except (ValueError, RecursionError):  # nested past the parser's depth: not JSON it can read either
        parsed = None
    # A `tool_use` block's input is an object; what the model wrote otherwise still reaches the caller.
    return parsed if isinstance(parsed, dict) else {"_unparsed_arguments": text}


def client_functions(turn: ResponseCreate) -> set[str]:
    return {t.name for t in turn.tools if isinstance(t, FunctionTool)}
