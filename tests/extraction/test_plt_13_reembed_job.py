"""PLT-13: records of an embedding index written without a vector get it from the periodic job."""

from __future__ import annotations

from backend.db import job_queue
from backend.domains.extraction.queue import REEMBED_TASK
from tests.helpers import in_transaction


def test_plt_13_the_reembed_job_gives_missing_vectors(client, org, db, run_jobs, database_url):
    index = client.post("/indexes", headers=org.full, json={"name": "embedded", "embedding": {
        "provider": "hashing", "model": "words", "dimensions": 64}}).json()
    record = client.post("/memory", headers=org.full, json={"index_id": index["id"], "type": "fact",
                                                            "text": "Tea at four."}).json()
    db.execute("UPDATE memory_records SET embedding = NULL WHERE id = %s", (record["id"],))
    in_transaction(database_url, lambda s: job_queue.defer(s, task=REEMBED_TASK, queue="maintenance",
                                                           args={"timestamp": 0}))
    run_jobs()
    assert db.execute("SELECT embedding IS NOT NULL FROM memory_records WHERE id = %s",
                      (record["id"],)).fetchone() == (True,)
    events = client.get("/audit", params={"action": "memory.embedded"}, headers=org.admin).json()["data"]
    assert events[0]["actor"] == {"type": "system", "id": "reembed"}
