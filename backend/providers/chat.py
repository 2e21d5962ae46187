"""Chat models behind one call (EXT-1): `openai_compatible` servers through the `openai` SDK, and `replay`.

Messages are in the chat-completions shape every OpenAI-compatible server speaks (vLLM, llama.cpp, Ollama,
OpenAI): `{"role", "content", "tool_calls"?, "tool_call_id"?}`. Turns, compaction and extraction all call
`complete()`; none of them knows which provider answers.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from backend.providers import replay

PROVIDERS = ("openai_compatible", "replay")
# The SDK wants some key even for keyless local servers (vLLM, llama.cpp, Ollama).
_KEYLESS = "not-needed"


@dataclass(frozen=True)
class ModelSpec:
    """An offered model: `id` is what requests name, `model` what the server is sent."""

    id: str
    provider: str
    model: str
    base_url: str | None = None
    api_key_env: str | None = None
    org_id: str = ""  # '' = offered to every organisation

    @property
    def label(self) -> str:
        if self.provider == "replay":
            return "recorded answers (replay), not a live model"
        return f"OpenAI-compatible server at {self.base_url}"


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # JSON text, as the model wrote it (it may not parse)


@dataclass
class ChatAnswer:
    content: str | None
    tool_calls: list[ToolCall] = field(default_factory=list)
    input_tokens: int = 0
    output_tokens: int = 0
    model_ms: float = 0.0
    finish_reason: str | None = None
    hidden_content: str | None = None  # the words as the model wrote them, before placeholders were restored


class ModelError(Exception):
    """The model could not answer. `code`: model_timeout | model_unavailable | model_error | rate_limited |
    invalid_model_output. Tokens a failed call still spent are in `input_tokens`/`output_tokens`."""

    def __init__(self, code: str, message: str, *, input_tokens: int = 0, output_tokens: int = 0) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.input_tokens = input_tokens
        self.output_tokens = output_tokens


@dataclass(frozen=True)
class CallOptions:
    timeout_seconds: float = 60.0
    max_retries: int = 2  # the SDK retries 408/409/429/5xx and connection errors with backoff, honouring Retry-After
    response_format: Mapping[str, Any] | None = None
    temperature: float | None = None
    top_p: float | None = None
    max_output_tokens: int | None = None  # sent as `max_tokens`, which OpenAI-compatible servers all take


# Per event loop: an SDK client's connection pool belongs to the loop that opened it.
_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[Any, ...], Any]] = weakref.WeakKeyDictionary()


def _client(spec: ModelSpec, options: CallOptions) -> Any:
    """One SDK client (and its connection pool) per server, key and retry policy, for the life of the loop."""
    from openai import AsyncOpenAI

    key = (os.environ.get(spec.api_key_env) if spec.api_key_env else None) or _KEYLESS
    cache_key = (spec.base_url, key, options.timeout_seconds, options.max_retries)
    clients = _clients.setdefault(asyncio.get_running_loop(), {})
    client = clients.get(cache_key)
    if client is None:
        try:
            client = AsyncOpenAI(base_url=spec.base_url, api_key=key, timeout=options.timeout_seconds,
                                 max_retries=options.max_retries)
        except Exception as exc:  # the constructor sends nothing: what fails is the stored URL (its HTTP client's
            # InvalidURL, of whichever httpx the SDK ships with)
            why = str(exc).rstrip(".")
            raise ModelError("model_unavailable", f"The model {spec.id!r} cannot be called: its base_url "
                             f"{spec.base_url!r} is not a usable URL ({why}). An administrator offers it again "
                             "with POST /admin/models.") from exc
        clients[cache_key] = client
    return client


async def complete(spec: ModelSpec, messages: Sequence[Mapping[str, Any]], *,
                   tools: Sequence[Mapping[str, Any]] = (), options: CallOptions | None = None) -> ChatAnswer:
    """One chat completion; raises ModelError, never the SDK's exceptions."""
    options = options or CallOptions()
    started = time.perf_counter()
    if spec.provider == "replay":
        answer = replay.answer(spec.model, messages, tools)
        result = ChatAnswer(answer.content, [ToolCall(c.id, c.name, c.arguments) for c in answer.tool_calls],
                            answer.input_tokens, answer.output_tokens, finish_reason=answer.finish_reason)
    elif spec.provider == "openai_compatible":
        result = await _openai_compatible(spec, messages, tools, options)
    else:
        raise ModelError("model_unavailable", f"The model {spec.id!r} names an unknown provider {spec.provider!r}.")
    result.model_ms = (time.perf_counter() - started) * 1000
    return result


async def _openai_compatible(spec: ModelSpec, messages: Sequence[Mapping[str, Any]],
                             tools: Sequence[Mapping[str, Any]], options: CallOptions) -> ChatAnswer:
    import openai

    request: dict[str, Any] = {"model": spec.model, "messages": list(messages)}
    if tools:
        request["tools"] = list(tools)
    if options.response_format is not None:
        request["response_format"] = dict(options.response_format)
    if options.temperature is not None:
        request["temperature"] = options.temperature
    if options.top_p is not None:
        request["top_p"] = options.top_p
    if options.max_output_tokens is not None:
        request["max_tokens"] = options.max_output_tokens
    try:
        completion = await _client(spec, options).chat.completions.create(**request)
    except openai.APITimeoutError as exc:
        raise ModelError("model_timeout", f"The model {spec.id!r} did not answer within "
                         f"{options.timeout_seconds:g} s.") from exc
    except openai.APIConnectionError as exc:
        raise ModelError("model_unavailable", f"The model server of {spec.id!r} could not be reached "
                         f"({spec.base_url}).") from exc
    except openai.RateLimitError as exc:
        raise ModelError("rate_limited", f"The model server of {spec.id!r} kept refusing with 429 (rate "
                         "limited) after the retries.") from exc
    except openai.APIStatusError as exc:
        raise ModelError("model_error", f"The model server of {spec.id!r} answered HTTP {exc.status_code}.") from exc
    except (openai.OpenAIError, ValueError, json.JSONDecodeError) as exc:
        raise ModelError("invalid_model_output", f"The model server of {spec.id!r} sent an answer that is not "
                         f"a chat completion ({type(exc).__name__}).") from exc
    return _parse(spec, completion)


# The SDK builds its answer objects without checking them, so a server's 200 of any shape reaches `_parse`.
# What is kept of an answer must fit where it goes: a thread item's words are indexed in a tsvector, which holds at
# most 1 MiB of distinct words, and PostgreSQL's parser can nearly double a text (hyphenated words and links are
# indexed whole and in parts); call ids and names are thread item fields of at most 256 characters; token counts
# are integer columns.
MAX_TEXT_BYTES = (1024 * 1024 - 1) // 2
_MAX_NAME = 256
_MAX_TOKENS = 2**31 - 1


def _malformed(spec: ModelSpec, what: str, spent: Mapping[str, int] | None = None) -> ModelError:
    return ModelError("invalid_model_output", f"The model server of {spec.id!r} sent a chat completion that cannot "
                      f"be used: {what}.", **(spent or {}))


def _tokens(spec: ModelSpec, usage: Any, name: str) -> int:
    count = getattr(usage, name, None)
    if count is None:
        return 0
    if not isinstance(count, int) or isinstance(count, bool) or not 0 <= count <= _MAX_TOKENS:
        raise _malformed(spec, f"`usage.{name}` is not a whole number from 0 to {_MAX_TOKENS}")
    return count


def _text(spec: ModelSpec, value: Any, where: str, spent: Mapping[str, int], *, max_chars: int | None = None,
          max_bytes: int | None = None) -> str:
    """`value` as text PostgreSQL can keep: no NUL, no lone surrogate, within the bounds given."""
    if not isinstance(value, str):
        raise _malformed(spec, f"`{where}` is not text", spent)
    if "\x00" in value:
        raise _malformed(spec, f"`{where}` holds the NUL character (U+0000)", spent)
    try:
        size = len(value.encode())
    except UnicodeEncodeError:
        raise _malformed(spec, f"`{where}` holds a lone surrogate, which is no character", spent) from None
    if max_bytes is not None and size > max_bytes:
        raise _malformed(spec, f"`{where}` is {size} bytes, more than the {max_bytes} a thread item keeps", spent)
    if max_chars is not None and len(value) > max_chars:
        raise _malformed(spec, f"`{where}` is longer than {max_chars} characters", spent)
    return value


def _parse(spec: ModelSpec, completion: Any) -> ChatAnswer:
    from openai import BaseModel

    usage = getattr(completion, "usage", None)
    spent = {"input_tokens": _tokens(spec, usage, "prompt_tokens"),
             "output_tokens": _tokens(spec, usage, "completion_tokens")}
    choices = getattr(completion, "choices", None)
    if not isinstance(choices, list):
        raise _malformed(spec, "`choices` is not a list", spent)
    if not choices:
        raise ModelError("invalid_model_output", f"The model {spec.id!r} answered without a choice.", **spent)
    message = getattr(choices[0], "message", None)
    if not isinstance(message, BaseModel):  # the SDK makes an object of a JSON object only
        raise _malformed(spec, "`choices[0].message` is not a message object", spent)
    content = getattr(message, "content", None)
    if content is not None:
        content = _text(spec, content, "choices[0].message.content", spent, max_bytes=MAX_TEXT_BYTES)
    tool_calls = getattr(message, "tool_calls", None) or []
    if not isinstance(tool_calls, list):
        raise _malformed(spec, "`choices[0].message.tool_calls` is not a list", spent)
    calls: list[ToolCall] = []
    for i, call in enumerate(tool_calls):
        where = f"choices[0].message.tool_calls[{i}]"
        function = getattr(call, "function", None)
        name = getattr(function, "name", None)
        if not name:
            raise ModelError("invalid_model_output", f"The model {spec.id!r} sent a tool call without a name.",
                             **spent)
        name = _text(spec, name, f"{where}.function.name", spent, max_chars=_MAX_NAME)
        call_id = getattr(call, "id", None)
        call_id = _text(spec, call_id, f"{where}.id", spent, max_chars=_MAX_NAME) if call_id else f"call_{i}"
        arguments = getattr(function, "arguments", None)
        arguments = _text(spec, arguments, f"{where}.function.arguments", spent) if arguments else "{}"
        calls.append(ToolCall(call_id, name, arguments))
    if content is None and not calls:
        raise ModelError("invalid_model_output", f"The model {spec.id!r} answered neither text nor a tool call.",
                         **spent)
    finish_reason = getattr(choices[0], "finish_reason", None)
    return ChatAnswer(content, calls, input_tokens=spent["input_tokens"], output_tokens=spent["output_tokens"],
                      finish_reason=finish_reason if isinstance(finish_reason, str) else None)
