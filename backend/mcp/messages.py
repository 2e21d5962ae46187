"""What `/mcp` checks of a message before the SDK reads it, where the SDK would answer in plain text or not at
all: the media type and size as PLT-14 bodies, and a request whose `id` the SDK would take for a notification's
(it runs nothing and answers 202, so the caller waits for an answer that never comes) as JSON-RPC's -32600."""

from __future__ import annotations

import json
from typing import Any

import pydantic_core
from litestar.datastructures import Headers
from litestar.types import HTTPResponseBodyEvent, HTTPResponseStartEvent, Receive, ReceiveMessage, Send

from backend.errors import ApiError

INVALID_REQUEST = -32600


def refuse_other_media(headers: Headers) -> None:
    media = headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if media != "application/json":
        shown = f"`{media}`" if media else "none"
        raise ApiError(f"An MCP message is JSON: send it with `Content-Type: application/json` (this request sent "
                       f"{shown}).", status=415, code="unsupported_media_type", param="Content-Type")


async def read_body(receive: Receive, limit: int) -> tuple[bytes, Receive]:
    """The whole body, refused with 413 past `limit` bytes, and a `receive` that hands it to the SDK again."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise ApiError("The request body is larger than this server accepts (CORE_MAX_BODY_BYTES).",
                           status=413, code="payload_too_large")
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    body = b"".join(chunks)
    replayed = False

    async def replay() -> ReceiveMessage:
        nonlocal replayed
        if replayed:
            return await receive()
        replayed = True
        return {"type": "http.request", "body": body, "more_body": False}

    return body, replay


def invalid_request(body: bytes) -> str | None:
    """Why a request's `id` is no JSON-RPC id the SDK answers (a string or an integer), or None. A body that is not
    JSON, or not one message, is left to the SDK, which answers it."""
    try:  # the SDK's own reader: it refuses deep nesting with a ValueError, where json.loads recurses until it fails
        message = pydantic_core.from_json(body)
    except ValueError:
        return None
    if not isinstance(message, dict) or "method" not in message or "id" not in message:
        return None
    value = message["id"]
    if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
        return None
    return (f"A request's `id` is a string or an integer; this one is {json.dumps(value)[:40]}. Send one of those, "
            "or leave `id` out to send a notification, which is not answered.")


async def send_json_rpc_error(send: Send, message: str) -> None:
    await send_json(send, 400, {"jsonrpc": "2.0", "id": None, "error": {"code": INVALID_REQUEST, "message": message}})


async def send_json(send: Send, status: int, document: Any) -> None:
    payload = json.dumps(document).encode()
    start: HTTPResponseStartEvent = {
        "type": "http.response.start", "status": status,
        "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]}
    body: HTTPResponseBodyEvent = {"type": "http.response.body", "body": payload, "more_body": False}
    await send(start)
    await send(body)
