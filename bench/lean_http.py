"""A minimal HTTP/1.1 client on asyncio streams, for timing a server without timing a client library.

httpx's own Python work adds about half a millisecond to every request (GET /key over loopback: 1.6 ms with
httpx.AsyncClient, 1.05 ms with http.client, 1.08 ms with wrk, measured 2026-12-03). A benchmark that reports
the platform's time per request should not count it. One keep-alive connection; bodies must carry a
Content-Length (the product's answers do).
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit


@dataclass
class LeanResponse:
    status_code: int
    headers: dict[str, str]
    content: bytes

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")

    def json(self) -> Any:
        return json.loads(self.content)


class LeanClient:
    def __init__(self, base_url: str, headers: dict[str, str] | None = None) -> None:
        parts = urlsplit(base_url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.headers = {"Host": f"{self.host}:{self.port}", "Connection": "keep-alive", **(headers or {})}
        self._streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    async def _connection(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if self._streams is None:
            self._streams = await asyncio.open_connection(self.host, self.port)
        return self._streams

    async def request(self, method: str, path: str, *, json_body: Any = None,
                      headers: dict[str, str] | None = None) -> LeanResponse:
        body = b"" if json_body is None else json.dumps(json_body).encode()
        sent = {**self.headers, **(headers or {}), "Content-Length": str(len(body))}
        if json_body is not None:
            sent["Content-Type"] = "application/json"
        head = f"{method} {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in sent.items()) + "\r\n"
        reader, writer = await self._connection()
        writer.write(head.encode("latin-1") + body)
        status_line = await reader.readline()
        if not status_line:
            raise ConnectionError(f"the server closed the connection on {method} {path}")
        status = int(status_line.split()[1])
        received: dict[str, str] = {}
        while (line := await reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode("latin-1").partition(":")
            received[name.strip().lower()] = value.strip()
        if "content-length" not in received:
            raise ValueError(f"{method} {path}: an answer without Content-Length ({received})")
        content = await reader.readexactly(int(received["content-length"]))
        if received.get("connection", "").lower() == "close":
            await self.aclose()
        return LeanResponse(status, received, content)

    async def get(self, path: str, headers: dict[str, str] | None = None) -> LeanResponse:
        return await self.request("GET", path, headers=headers)

    async def post(self, path: str, json: Any, headers: dict[str, str] | None = None) -> LeanResponse:
        return await self.request("POST", path, json_body=json, headers=headers)

    async def aclose(self) -> None:
        if self._streams is not None:
            writer = self._streams[1]
            self._streams = None
            writer.close()
            await writer.wait_closed()
