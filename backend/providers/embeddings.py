"""Embedding providers behind one interface (PLT-13): `local`, `openai_compatible` and `hashing`.

`local` runs a multilingual sentence-embedding model in this process (backend/providers/local_embeddings.py,
the optional extra `coremem[local]`): it matches meaning across English and Dutch with nothing to set up.

`hashing` is deterministic feature hashing of word tokens, with no dependency and no network: it is
lexical (it matches the same words, not the same meaning), good for demos, tests and air-gapped setups.
`openai_compatible` calls `/v1/embeddings` of any OpenAI-compatible server through the `openai` SDK.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import os
import re
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

# The SDK wants some key even for keyless local servers (vLLM, llama.cpp, Ollama).
_KEYLESS = "not-needed"
_TOKEN = re.compile(r"\w+", re.UNICODE)
DEFAULT_TIMEOUT_SECONDS = 10.0
BATCH = 256


class EmbeddingError(Exception):
    """The provider could not embed; callers keep the record without a vector (it is still found by words)."""


class EmbeddingProvider(Protocol):
    dimensions: int

    async def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


def _normalise(vector: list[float]) -> list[float]:
    norm = math.sqrt(sum(v * v for v in vector))
    return [v / norm for v in vector] if norm > 0 else vector


class HashingEmbeddings:
    """Signed feature hashing of lowercase word unigrams and bigrams into `dimensions` buckets, L2-normalised."""

    def __init__(self, dimensions: int) -> None:
        self.dimensions = dimensions

    def embed_one(self, text: str) -> list[float]:
        vector = [0.0] * self.dimensions
        words = _TOKEN.findall(text.lower())
        features = words + [f"{a} {b}" for a, b in itertools.pairwise(words)]
        for feature in features:
            digest = hashlib.blake2b(feature.encode(), digest_size=8).digest()
            value = int.from_bytes(digest, "big")
            bucket = value % self.dimensions
            sign = 1.0 if (value >> 63) & 1 else -1.0
            vector[bucket] += sign * (1.0 if " " not in feature else 0.5)
        return _normalise(vector)

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [self.embed_one(t) for t in texts]


def _deployment_key_for(base_url: str | None) -> str | None:
    """The SDK's own convention supplies the deployment's credential: `OPENAI_API_KEY`, for the server at
    `OPENAI_BASE_URL` (OpenAI's when unset). Any key holding `knowledge` chooses an index's `base_url`, so the
    credential goes only to that server: an index at another address is called without it (local servers need
    none), never handing the operator's secret to a server a key chose."""
    home = (os.environ.get("OPENAI_BASE_URL") or _OPENAI_BASE_URL).rstrip("/")
    if base_url is None or base_url.rstrip("/") == home:
        return os.environ.get("OPENAI_API_KEY")
    return None


_OPENAI_BASE_URL = "https://api.openai.com/v1"  # the SDK's default


class OpenAICompatibleEmbeddings:
    """`POST {base_url}/embeddings` through the openai SDK, with a bounded timeout and no retries."""

    def __init__(self, model: str, dimensions: int, base_url: str | None = None, api_key: str | None = None,
                 timeout: float = DEFAULT_TIMEOUT_SECONDS) -> None:
        from openai import AsyncOpenAI

        self.model = model
        self.dimensions = dimensions
        key = api_key or _deployment_key_for(base_url) or _KEYLESS
        self._client: AsyncOpenAI | None = None
        self._unusable = ""
        try:
            self._client = AsyncOpenAI(base_url=base_url, api_key=key, timeout=timeout, max_retries=0)
        except Exception as exc:  # a stored base_url its HTTP client refuses (a port past 65535, say)
            self._unusable = f"the index's base_url {base_url!r} is not a usable URL: {exc}"

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        vectors: list[list[float]] = []
        for start in range(0, len(texts), BATCH):
            chunk = list(texts[start:start + BATCH])
            try:
                vectors += self._checked(await self._ask(chunk), len(chunk))
            except EmbeddingError:
                raise
            except Exception as exc:  # the SDK checks no answer: any shape, or none, reaches here (PLT-13)
                raise EmbeddingError(f"the server's answer cannot be used ({type(exc).__name__}: {exc})") from exc
        return vectors

    async def _ask(self, chunk: list[str]) -> Any:
        if self._client is None:
            raise EmbeddingError(self._unusable)
        return await self._client.embeddings.create(model=self.model, input=chunk, dimensions=self.dimensions,
                                                    encoding_format="float")

    def _checked(self, answer: Any, asked: int) -> list[list[float]]:
        data = sorted(answer.data, key=lambda d: d.index)
        if len(data) != asked:
            raise EmbeddingError(f"asked for {asked} embeddings, got {len(data)}")
        return [checked_vector(item.embedding, self.dimensions) for item in data]


# pgvector keeps single-precision numbers: a larger one is refused, a smaller nonzero one becomes zero.
FLOAT4_MAX = 3.4e38


def checked_vector(values: Any, dimensions: int) -> list[float]:
    """A server's vector as pgvector can keep and compare it, or EmbeddingError: `dimensions` real, finite numbers
    within single precision, not all zero, returned normalised (cosine does not change, and no number underflows to
    zero when stored)."""
    if not isinstance(values, list) or len(values) != dimensions:
        size = len(values) if isinstance(values, list) else type(values).__name__
        raise EmbeddingError(f"the model answered {size} dimensions, the index wants {dimensions}")
    if not all(isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and abs(v) <= FLOAT4_MAX
               for v in values):
        raise EmbeddingError("the model answered a vector holding something other than finite numbers")
    peak = max(abs(float(v)) for v in values)
    if peak == 0:
        raise EmbeddingError("the model answered a vector of zeros, which is like nothing")
    scaled = [float(v) / peak for v in values]  # first to at most 1, so that the squares neither overflow nor vanish
    norm = math.sqrt(sum(v * v for v in scaled))
    return [v / norm for v in scaled]


def fingerprint(config: Mapping[str, Any] | None) -> str | None:
    """What a vector was made with: `provider/model/dimensions`. Vectors of different fingerprints are never
    compared; a record whose fingerprint is not its index's current one is re-embedded (`memory reembed`)."""
    if not config:
        return None
    return f"{config['provider']}/{config['model']}/{int(config['dimensions'])}"


def made_at_once(config: Mapping[str, Any] | None) -> bool:
    """Whether the setting's vectors cost only microseconds of this process (`hashing`): a write then makes its
    vector in its own statement, where a provider that asks a server or runs a model may leave it for later."""
    return config is not None and config.get("provider") == "hashing"


def provider_for(config: Mapping[str, Any] | None) -> EmbeddingProvider | None:
    """The provider an index's `embedding` setting names, or None for an index that does not embed."""
    if not config:
        return None
    dims = int(config["dimensions"])
    if config["provider"] == "local":
        from backend.providers.local_embeddings import LocalEmbeddings

        return LocalEmbeddings(str(config["model"]), dims)
    if config["provider"] == "hashing":
        return HashingEmbeddings(dims)
    if config["provider"] == "openai_compatible":
        return OpenAICompatibleEmbeddings(str(config["model"]), dims, base_url=config.get("base_url"))
    raise ValueError(f"unknown embedding provider {config['provider']!r}")
