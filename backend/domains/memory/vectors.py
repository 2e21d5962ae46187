"""Embeddings of records and of search questions (PLT-13, MEM-13): one provider call per embedding setting."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from backend.access.scope import Scope
from backend.domains.indexes import service as indexes
from backend.domains.memory.question import Question
from backend.domains.memory.search_repository import QueryVector
from backend.providers.embeddings import EmbeddingError, fingerprint, provider_for

log = logging.getLogger("coremem.memory")


async def embed(index: Mapping[str, Any], texts: Sequence[str]) -> list[list[float] | None]:
    """Vectors for an embedding index; a failing provider leaves records without one (found by words)."""
    provider = provider_for(index.get("embedding"))
    if provider is None or not texts:
        return [None] * len(texts)
    try:
        return list(await provider.embed(list(texts)))
    except EmbeddingError as exc:
        log.warning("embedding failed for index %s: %s", index.get("id"), exc)
        return [None] * len(texts)


def model_of(index: Mapping[str, Any], vector: list[float] | None) -> str | None:
    """The `embedding_model` stored beside a vector: the index's setting it was made with."""
    return fingerprint(index.get("embedding")) if vector is not None else None


async def query_vectors(db: AsyncSession, scope: Scope, index: Mapping[str, Any] | None, question: Question
                        ) -> list[QueryVector]:
    """The query embedded once per embedding setting among the searched indexes: the named index, else every
    index the request reaches (indexes that share a setting share one provider call and one vector scan)."""
    words = question.for_embedding()
    if not words:
        return []
    searched = [index] if index is not None else await indexes.embedding_indexes(db, scope)
    by_setting: dict[str, list[Mapping[str, Any]]] = {}
    for found in searched:
        if found.get("embedding"):
            by_setting.setdefault(json.dumps(found["embedding"], sort_keys=True), []).append(found)
    groups = list(by_setting.values())
    embedded = await asyncio.gather(*[embed(group[0], [words]) for group in groups])
    return [QueryVector(tuple(i["id"] for i in group), vectors[0], str(fingerprint(group[0]["embedding"])))
            for group, vectors in zip(groups, embedded, strict=True) if vectors[0] is not None]
