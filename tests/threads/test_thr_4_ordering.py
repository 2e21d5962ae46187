"""THR-4: each item takes its place as it arrives; positions stay strictly increasing under concurrent writers."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import httpx

from tests.helpers import bearer
from tests.threads.util import msg


def test_thr_4_concurrent_appenders_over_http_get_unique_gapless_positions(live_api, org):
    # Every writer may write every thread, so many people append to one shared thread at once.
    key = org.make_key(name="writers", policy={"indexes": ["*"], "rules": [
        {"id": "all-threads", "effect": "permit", "kind": "thread"}]})["secret"]
    headers = bearer(key)
    with httpx.Client(base_url=live_api, timeout=30) as http:
        thread = http.post("/threads", json={}, headers=headers).json()
    writers, per_writer = 12, 5

    def writer(n: int) -> list[tuple[int, str]]:
        got = []
        with httpx.Client(base_url=live_api, timeout=30) as http:
            for k in range(per_writer):
                items = [msg("user", f"w{n}-{k}-a"), msg("assistant", f"w{n}-{k}-b")]
                response = http.post(f"/threads/{thread['id']}/items", json={"items": items},
                                     headers=bearer(key, f"writer{n}"))
                assert response.status_code == 201, response.text
                stored = response.json()["items"]
                # One request's items stay together, in the order sent.
                assert stored[1]["position"] == stored[0]["position"] + 1
                got += [(i["position"], i["content"]) for i in stored]
        return got

    with ThreadPoolExecutor(writers) as pool:
        results = [p for batch in pool.map(writer, range(writers)) for p in batch]
    positions = sorted(p for p, _ in results)
    total = writers * per_writer * 2
    assert positions == list(range(1, total + 1))  # no duplicate, none lost, no gap

    with httpx.Client(base_url=live_api, timeout=30) as http:
        page = http.get(f"/threads/{thread['id']}/items?limit=200", headers=headers).json()
    stored = [(i["position"], i["content"]) for i in page["items"]]
    assert stored == sorted(results)
    # Each writer's own items appear in the order that writer sent them.
    for n in range(writers):
        mine = [c for _, c in stored if c.startswith(f"w{n}-")]
        assert mine == [f"w{n}-{k}-{s}" for k in range(per_writer) for s in "ab"]
    subjects = {i["subject"] for i in page["items"]}
    assert subjects == {f"writer{n}" for n in range(writers)}
