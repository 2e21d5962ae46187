"""A scripted OpenAI-compatible model server on loopback (06-turns.md: tests exercise the real HTTP client path).

Each test scripts what the next chat completions answer (text, tool calls, an HTTP error, a 429 with
Retry-After, a stall, malformed JSON) and afterwards reads what the platform sent: the messages in order, the
tool definitions, the response format. Embeddings are answered deterministically (feature hashing).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from backend.providers.embeddings import HashingEmbeddings


@dataclass
class Step:
    content: str | None = None
    tool_calls: list[tuple[str, dict[str, Any] | str]] = field(default_factory=list)
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    raw: bytes | None = None  # sent as is (malformed answers)
    delay: float = 0.0
    usage: tuple[int, int] = (11, 7)
    before: Any = None  # called (in a worker thread) when the request arrives, before answering
    finish_reason: str | None = None  # default: `tool_calls` with calls, else `stop`


class ScriptedModel:
    """The ASGI app. Steps are consumed one per chat request; with none left it answers `DEFAULT`."""

    DEFAULT = "(scripted default answer)"

    def __init__(self) -> None:
        self.steps: deque[Step] = deque()
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.embedding_requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._calls = 0
        self.url = ""
        # With no step scripted: `respond(request) -> content` answers (deterministic answers per request), else
        # DEFAULT; `respond_delay` seconds before each such answer.
        self.respond: Any = None
        self.respond_delay = 0.0
        # Cleared: embedding requests wait until it is set again (what a request waits for while a provider is slow).
        self.embeddings_open = threading.Event()
        self.embeddings_open.set()

    # ------------------------------------------------------------ scripting

    def reset(self) -> None:
        with self._lock:
            self.steps.clear()
            self.requests.clear()
            self.headers.clear()
            self.embedding_requests.clear()
            self.respond = None
            self.respond_delay = 0.0
            self.embeddings_open.set()

    def reply(self, content: str | None = None, *, tool_calls: list[tuple[str, dict[str, Any] | str]] | None = None,
              usage: tuple[int, int] = (11, 7), delay: float = 0.0, before: Any = None,
              finish_reason: str | None = None) -> ScriptedModel:
        self.steps.append(Step(content=content, tool_calls=tool_calls or [], usage=usage, delay=delay,
                               before=before, finish_reason=finish_reason))
        return self

    def fail(self, status: int, *, headers: dict[str, str] | None = None, body: dict[str, Any] | None = None
             ) -> ScriptedModel:
        raw = json.dumps(body or {"error": {"message": f"scripted {status}", "type": "server_error"}}).encode()
        self.steps.append(Step(status=status, headers=headers or {}, raw=raw))
        return self

    def malformed(self) -> ScriptedModel:
        self.steps.append(Step(raw=b'{"id": "x", "choices": [ {"message": '))
        return self

    def stall(self, seconds: float) -> ScriptedModel:
        self.steps.append(Step(content="too late", delay=seconds))
        return self

    # ------------------------------------------------------------ what was sent

    @property
    def last(self) -> dict[str, Any]:
        return self.requests[-1]

    def messages(self, index: int = -1) -> list[dict[str, Any]]:
        return list(self.requests[index]["messages"])

    # ------------------------------------------------------------ ASGI

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        path = scope["path"]
        payload = json.loads(body or b"{}")
        if path.endswith("/embeddings"):
            await self._embeddings(payload, send)
        elif path.endswith("/chat/completions"):
            headers = {k.decode(): v.decode() for k, v in scope["headers"]}
            with self._lock:
                self.requests.append(payload)
                self.headers.append(headers)
                step = self.steps.popleft() if self.steps else None
            if step is None:
                step = (Step(content=self.respond(payload), delay=self.respond_delay) if self.respond is not None
                        else Step(content=self.DEFAULT))
            await self._chat(payload, step, send)
        else:
            await _send(send, 404, b'{"error": {"message": "no such route"}}')

    async def _chat(self, payload: dict[str, Any], step: Step, send: Any) -> None:
        if step.before is not None:
            await asyncio.to_thread(step.before)
        if step.delay:
            await asyncio.sleep(step.delay)
        if step.raw is not None:
            await _send(send, step.status, step.raw, step.headers)
            return
        self._calls += 1
        calls = [{"id": f"call_{self._calls}_{i}", "type": "function",
                  "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)}}
                 for i, (name, args) in enumerate(step.tool_calls)]
        message: dict[str, Any] = {"role": "assistant", "content": step.content}
        if calls:
            message["tool_calls"] = calls
        finish = step.finish_reason or ("tool_calls" if calls else "stop")
        answer = {"id": f"chatcmpl-{self._calls}", "object": "chat.completion", "created": int(time.time()),
                  "model": payload.get("model", "scripted"),
                  "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                  "usage": {"prompt_tokens": step.usage[0], "completion_tokens": step.usage[1],
                            "total_tokens": sum(step.usage)}}
        await _send(send, 200, json.dumps(answer).encode(), step.headers)

    async def _embeddings(self, payload: dict[str, Any], send: Any) -> None:
        self.embedding_requests.append(payload)
        await asyncio.to_thread(self.embeddings_open.wait, 30)
        inputs = payload["input"] if isinstance(payload["input"], list) else [payload["input"]]
        embedder = HashingEmbeddings(int(payload.get("dimensions") or 64))
        data = [{"object": "embedding", "index": i, "embedding": embedder.embed_one(str(text))}
                for i, text in enumerate(inputs)]
        answer = {"object": "list", "data": data, "model": payload.get("model"),
                  "usage": {"prompt_tokens": len(inputs), "total_tokens": len(inputs)}}
        await _send(send, 200, json.dumps(answer).encode())


async def _send(send: Any, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
    raw_headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    raw_headers += [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw_headers})
    await send({"type": "http.response.body", "body": body})
