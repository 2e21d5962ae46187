"""Issue 17 item 10, PLT-14/PLT-14a: resource limits, over real HTTP under uvicorn.

A 10 MB body, arrays of 100,000 elements, `limit=1000000`, JSON nested 10,000 deep, bursts of 500 requests per
key against a configured rate limit, and slow clients. Pass: each refusal is 413, 422 or 429 (or the documented
capped 200) within a second, no 5xx, a 429 carries `Retry-After` and the PLT-14 body, other keys and the
default (no limit) are unaffected, and the process grows by less than 50 MB.
"""

from __future__ import annotations

import gc
import json
import socket
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
import uvicorn

from backend.access.ratelimit import RateLimiter
from backend.app import create_app
from tests.conftest import _free_port
from tests.helpers import ALL_CAPS, Org, bearer, bootstrap_org

RATE, BURST = 20.0, 40


def _rss_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


class Server:
    def __init__(self, settings: Any, database_url: str) -> None:
        self.port = _free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.server = uvicorn.Server(uvicorn.Config(create_app(settings, database_url), host="127.0.0.1",
                                                    port=self.port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> Server:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started and time.monotonic() < deadline:
            time.sleep(0.05)
        return self

    def __exit__(self, *_: Any) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


@pytest.fixture(scope="module")
def limited(settings: Any, database_url: str) -> Iterator[Server]:
    with Server(settings.with_overrides(rate_limit_per_second=RATE, rate_limit_burst=BURST), database_url) as server:
        yield server


@pytest.fixture(scope="module")
def org(limited: Server, settings: Any, database_url: str) -> Org:
    return bootstrap_org(httpx.Client(base_url=limited.base, timeout=30), settings, database_url, "Limits",
                         "admin@limits.test")


class Timed:
    def __init__(self) -> None:
        self.statuses: Counter[int] = Counter()
        self.slowest = 0.0
        self.problems: list[str] = []

    def expect(self, what: str, send: Any, allowed: set[int]) -> httpx.Response:
        started = time.monotonic()
        response = send()
        took = time.monotonic() - started
        self.statuses[response.status_code] += 1
        self.slowest = max(self.slowest, took)
        if response.status_code not in allowed:
            self.problems.append(f"{what}: {response.status_code} {response.text[:200]}")
        elif response.status_code >= 400 and set(response.json()) < {"status", "code", "message", "param"}:
            self.problems.append(f"{what}: not a PLT-14 body: {response.text[:200]}")
        if took > 1.0:
            self.problems.append(f"{what}: took {took:.2f} s")
        return response


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def _abuse(base: str, org: Org, timed: Timed) -> None:
    key = org.make_key(ALL_CAPS, name="abuse")["secret"]
    headers = {**bearer(key), "content-type": "application/json"}
    index = httpx.post(f"{base}/indexes", json={"name": f"limits-{time.monotonic_ns()}"}, headers=org.admin).json()
    thread = httpx.post(f"{base}/threads", json={}, headers=bearer(key)).json()["id"]
    with httpx.Client(base_url=base, timeout=30, headers=headers) as http:
        timed.expect("10 MB body", lambda: http.post("/memory", content=json.dumps(
            {"index_id": index["id"], "type": "fact", "text": "x" * (10 * 1024 * 1024)})), {413})
        timed.expect("10 MB batch", lambda: http.post("/memory/batch", content=json.dumps(
            {"records": [{"index_id": index["id"], "type": "fact", "text": "y" * 100}] * 60_000})), {413})
        arrays: list[tuple[str, str, Any]] = [
            ("/memory/batch", "post", {"records": [1] * 100_000}),
            ("/memory", "post", {"index_id": index["id"], "type": "fact", "text": "t", "tags": ["a"] * 100_000}),
            ("/threads", "post", {"items": [{"type": "message", "role": "user", "content": "x"}] * 10_000}),
            (f"/threads/{thread}/items", "post", {"items": [0] * 100_000}),
            (f"/threads/{thread}/state", "put", {"state": {"a": [0] * 100_000}}),
        ]
        for path, method, body in arrays:
            timed.expect(f"100k array {method} {path}", lambda p=path, m=method, b=body: http.request(
                m.upper(), p, content=json.dumps(b)), {413, 422})
        for route in ("/memory", "/threads", "/thread-items", "/indexes", "/memory/search"):
            params = {"limit": 10**6, "q": "x"} if route in ("/thread-items", "/memory/search") else {"limit": 10**6}
            response = timed.expect(f"limit=10^6 {route}", lambda r=route, p=params: http.get(r, params=p), {200})
            if response.status_code == 200 and len(response.json()["data"]) > 200:
                timed.problems.append(f"{route}: more than 200 rows")
        deep = _nested(10_000)
        for path, method, template in (
                ("/memory", "POST", '{"index_id": "IDX", "type": "fact", "text": "t", "metadata": {"a": DEEP}}'
                 .replace("IDX", index["id"])),
                (f"/threads/{thread}/state", "PUT", '{"state": {"a": DEEP}}'),
                ("/threads", "POST", '{"metadata": DEEP}'),
                ("/responses", "POST", '{"model": "m", "input": DEEP}'),
                ("/agents", "POST", '{"name": "a", "model": "m", "instructions": "i", "working_state_schema": '
                                    '{"a": DEEP}}')):
            timed.expect(f"10k deep {method} {path}", lambda p=path, m=method, b=template: http.request(
                m, p, content=b.replace("DEEP", deep)), {400, 422})


def test_plt_14_big_deep_and_wide_requests_are_refused_quickly(limited: Server, org: Org, report: Any) -> None:
    gc.collect()
    start = _rss_mb()
    timed = Timed()
    _abuse(limited.base, org, timed)  # the first round also warms what any first request builds (caches, pools)
    gc.collect()
    first = _rss_mb() - start
    for _ in range(3):
        _abuse(limited.base, org, timed)
    gc.collect()
    grown = _rss_mb() - start - first
    report(requests=sum(timed.statuses.values()), statuses=dict(sorted(timed.statuses.items())),
           slowest_s=round(timed.slowest, 3), rss_first_round_mb=round(first, 1),
           rss_growth_over_three_more_rounds_mb=round(grown, 1))
    assert timed.problems == [], timed.problems
    assert first < 50 and grown < 50


def _burst(base: str, headers: dict[str, str], count: int) -> list[httpx.Response]:
    with httpx.Client(base_url=base, timeout=30, headers=headers) as http, ThreadPoolExecutor(8) as pool:
        return list(pool.map(lambda _: http.get("/key"), range(count)))


def test_plt_14_a_burst_of_500_requests_per_key_meets_429_with_retry_after(limited: Server, org: Org,
                                                                          report: Any) -> None:
    noisy = org.make_key(ALL_CAPS, name="noisy")["secret"]
    quiet = org.make_key(ALL_CAPS, name="quiet")["secret"]
    token = org.subject_token(noisy, "anna")  # the key's subject tokens share its bucket
    started = time.monotonic()
    answers = _burst(limited.base, bearer(noisy), 500)
    took = time.monotonic() - started
    statuses = Counter(r.status_code for r in answers)
    refused = [r for r in answers if r.status_code == 429]
    assert set(statuses) == {200, 429}, statuses
    # the bucket holds BURST and refills at RATE per second while the burst lasts
    assert BURST <= statuses[200] <= BURST + RATE * took + 2, (statuses, took)
    for response in refused:
        body = response.json()
        assert body["status"] == 429 and body["code"] == "rate_limited" and body["param"] is None
        assert 1 <= int(response.headers["retry-after"]) <= 2
        assert response.elapsed.total_seconds() < 1
    # the key and its subject token drain one bucket: together they get no more than one key would
    time.sleep(BURST / RATE)  # full again
    started = time.monotonic()
    both = _burst(limited.base, bearer(noisy), BURST) + _burst(limited.base, bearer(token), BURST)
    shared = Counter(r.status_code for r in both)
    assert shared[200] <= BURST + RATE * (time.monotonic() - started) + 2, shared
    assert httpx.get(f"{limited.base}/key", headers=bearer(quiet)).status_code == 200  # another key's bucket
    for _ in range(BURST + 5):  # administrators are not limited
        assert httpx.get(f"{limited.base}/indexes", headers=org.admin).status_code == 200
    time.sleep(int(refused[-1].headers["retry-after"]))
    assert httpx.get(f"{limited.base}/key", headers=bearer(noisy)).status_code == 200  # after Retry-After
    report(requests=len(answers), statuses=dict(sorted(statuses.items())), burst_s=round(took, 2))


def test_plt_14_without_a_configured_rate_nothing_is_limited(client: Any, settings: Any, database_url: str,
                                                             report: Any) -> None:
    assert settings.rate_limit_per_second == 0
    org = bootstrap_org(client, settings, database_url, "Unlimited", "admin@unlimited.test")
    statuses = Counter(client.get("/key", headers=org.full).status_code for _ in range(300))
    report(requests=300, statuses=dict(statuses))
    assert statuses == {200: 300}


def test_plt_14_the_token_bucket_refills_at_its_rate() -> None:
    now = [0.0]
    limiter = RateLimiter(2.0, 3, clock=lambda: now[0])
    from backend.access.actor import Actor
    from backend.access.principal import Principal

    key = Principal("key", "org_x", Actor("key", "key_a"), frozenset(), None, key={"id": "key_a"})
    admin = Principal("admin", "org_x", Actor("admin", "adm_a"), frozenset(), None, admin={"role": "admin"})
    for _ in range(3):
        limiter.take(key)
    with pytest.raises(Exception) as refused:
        limiter.take(key)
    assert getattr(refused.value, "headers", {}) == {"Retry-After": "1"}
    now[0] = 0.5  # one token back
    limiter.take(key)
    for _ in range(10):
        limiter.take(admin)
    assert not RateLimiter(0).enabled


def _slow_client(port: int, body_size: int, seconds: float) -> bytes:
    """Sends the headers of a POST, then its body a byte at a time over `seconds`, and reads the answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(f"POST /memory HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     f"Content-Length: {body_size}\r\nAuthorization: Bearer ck_none\r\n\r\n".encode())
        deadline = time.monotonic() + seconds
        sent = 0
        while time.monotonic() < deadline and sent < body_size - 1:
            sock.sendall(b" ")
            sent += 1
            time.sleep(seconds / 20)
        sock.sendall(b" " * (body_size - sent - 1) + b"{")
        return sock.recv(4096)


def test_plt_14_slow_clients_do_not_hold_up_others(limited: Server, org: Org, report: Any) -> None:
    key = org.make_key(ALL_CAPS, name="patient")["secret"]
    with ThreadPoolExecutor(20) as pool:
        slow = [pool.submit(_slow_client, limited.port, 40, 2.0) for _ in range(20)]
        timed = Timed()
        time.sleep(0.3)
        for _ in range(10):
            timed.expect("while slow clients send", lambda: httpx.get(f"{limited.base}/key", headers=bearer(key)),
                         {200})
        # a declared 10 MB body is refused from its header, before any of it arrives
        with socket.create_connection(("127.0.0.1", limited.port), timeout=5) as sock:
            started = time.monotonic()
            sock.sendall(b"POST /memory HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         b"Content-Length: 10485760\r\n\r\n")
            head = sock.recv(4096)
            refused_in = time.monotonic() - started
        answers = [f.result() for f in slow]
    assert head.startswith(b"HTTP/1.1 413"), head[:100]
    assert refused_in < 1
    assert all(a.startswith(b"HTTP/1.1 4") for a in answers), {a[:20] for a in answers}
    report(slow_clients=len(slow), others_served=sum(timed.statuses.values()), slowest_other_s=round(timed.slowest, 3),
           declared_10mb_refused_s=round(refused_in, 3))
    assert timed.problems == [], timed.problems
