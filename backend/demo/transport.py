"""The real API in this process: the demo is written through it without a server or a port."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx

IN_PROCESS_URL = "http://coremem.in-process"


class _AppTransport(httpx.BaseTransport):
    """httpx's sync transport over Litestar's test transport, which runs the ASGI app on its own event loop."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response: httpx.Response = self._inner.handle_request(request)
        return response


@contextmanager
def in_process_api(database_url: str) -> Iterator[tuple[str, httpx.BaseTransport]]:
    """`create_app()` with its start-up and shutdown, and a transport that calls it: (base URL, transport).

    Every request runs the app's whole path (routing, credentials, the request's transaction, audit), exactly as
    over HTTP; an unexpected error answers 500 instead of raising, as a server would."""
    import logging

    from litestar.testing import TestClient
    from litestar.testing.transport import TestClientTransport

    from backend.app import create_app

    app = create_app(database_url=database_url)
    logging.getLogger("httpx").setLevel(logging.WARNING)  # a log line per call would bury what the command prints
    with TestClient(app, base_url=IN_PROCESS_URL) as app_client:
        yield IN_PROCESS_URL, _AppTransport(TestClientTransport(app_client, raise_server_exceptions=False))
