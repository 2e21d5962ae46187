"""What the indexes page reads and changes: the organisation's indexes (each one a memory store) with their records
counted, one store's settings, and creating or deleting an index."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl

from dashboard import data
from dashboard.data import overview, stores
from shared.client import CoreClient
from shared.schemas.platform import IndexOut


@dataclass(frozen=True)
class Embedding:
    label: str
    help: str
    model: str  # the model field's starting value ("" = the provider's own default)
    dimensions: int | None
    base_url: bool  # whether the provider takes a server address


# The choices the API takes. `local` runs a small model inside this installation; it is the recommended one where
# the installation offers it (an installation without it answers 422 on `embedding.provider`, shown under the field).
EMBEDDINGS: dict[str, Embedding] = {
    "local": Embedding("Local model (recommended)", "A small embedding model that runs inside this installation: "
                       "meaning-aware search with no outside service. Leave model and dimensions empty for its "
                       "default.", "", None, False),
    "hashing": Embedding("Hashing", "Word hashing: no model and no network, finds the same words rather than the "
                         "same meaning. Good for trying things out.", "hashing", 256, False),
    "openai_compatible": Embedding("OpenAI-compatible server", "Any server that speaks the OpenAI embeddings API "
                                   "(the key comes from the server's OPENAI_API_KEY).", "text-embedding-3-small",
                                   1536, True),
    "none": Embedding("None", "Full-text search only; records are not embedded.", "", None, False),
}
EMBEDDING_FIELDS = ("embedding.provider", "embedding.model", "embedding.dimensions", "embedding.base_url")


def index_body(*, name: str, provider: str, model: str, dimensions: int | None, base_url: str) -> dict[str, Any]:
    """The create form as `POST /indexes`: a mapping, so the API (not this dashboard) judges the embedding choice."""
    body: dict[str, Any] = {"name": name.strip()}
    if provider == "none":
        body["embedding"] = None
        return body
    embedding: dict[str, Any] = {"provider": provider}
    if model.strip():
        embedding["model"] = model.strip()
    if dimensions:
        embedding["dimensions"] = int(dimensions)
    if EMBEDDINGS[provider].base_url and base_url.strip():
        embedding["base_url"] = base_url.strip()
    body["embedding"] = embedding
    return body


def indexes_frame(indexes: pl.DataFrame, counts: pl.DataFrame) -> pl.DataFrame:
    """One row per index with its active records, personal and shared."""
    per_store = (counts.group_by("store").agg(pl.col("records").sum().alias("records"),
                                              pl.col("records").filter(pl.col("owner") == data.SHARED).sum()
                                              .alias("shared"))
                 if not counts.is_empty() else pl.DataFrame(schema={"store": pl.String, "records": pl.UInt32,
                                                                    "shared": pl.UInt32}))
    joined = indexes.join(per_store, left_on="id", right_on="store", how="left", maintain_order="left")
    return joined.with_columns(pl.col("records", "shared").fill_null(0).cast(pl.Int64)).select(
        "name", "id", "embedding", "records", "shared", "created_at")


def forget_indexes() -> None:
    """After a create or delete: every page asks the API again for the indexes and their counts."""
    for fn in (data.indexes, overview.store_counts, stores.store_settings):
        fn.clear()


def create_index(client: CoreClient, body: dict[str, Any]) -> IndexOut:
    try:
        return client.create_index(body)
    finally:
        forget_indexes()


def delete_index(client: CoreClient, index_id: str) -> None:
    try:
        client.delete_index(index_id)
    finally:
        forget_indexes()
