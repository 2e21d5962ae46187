"""The seeded memory records the performance suite's data sets are made of (bench/injection.py, bench/turns.py),
reusable by tests at small sizes (tests/test_bench_baselines.py).

One store's records for N people: owners drawn by Zipf weights (1 / rank ** 1.1: a few people own many records,
most own few), a share of them shared (no owner), a mix of types (TYPES) with open and done commitments due around
now and half-hour episodes, a share embedded with a random unit vector, a random confidence, updated within the
last year. Every draw comes from the caller's `random.Random`, in a fixed order, so a seed and a size define a data
set: the benchmarks keep what they built on disk (1M and 5M records take many minutes) and reuse it while the seed
and size match, and a test at a small size gets the same kind of records the benchmark measures.
"""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

TYPES = [("fact", 0.40), ("preference", 0.20), ("commitment", 0.10), ("behaviour", 0.05), ("lesson", 0.05),
         ("episode", 0.05), ("note", 0.15)]
WORDS = ["likes", "prefers", "works", "lives", "meeting", "invoice", "holiday", "coffee", "tea", "bank", "report",
         "customer", "dog", "cat", "garden", "moving", "office", "salary", "planning", "dutch", "english", "answer",
         "morning", "evening", "travel", "train", "car", "bike", "project", "deadline", "budget", "contract",
         "email", "phone", "call", "lunch", "dinner", "team", "manager", "doctor", "school", "family"]
# The columns POST /memory leaves to the table (metadata, labels, verified, tags, priority, …) get its defaults,
# the same values the route writes for a record that does not set them.
COLUMNS = ("org_id, id, index_id, subject, type, text, norm_hash, confidence, source, commitment, episode, "
           "created_at, updated_at, embedding")


@dataclass(frozen=True)
class Mix:
    """What one store's generated records are made of."""

    people: list[str]
    shared: float  # share of records with no owner
    embedded: float  # share of records with a vector
    dims: int
    # `h{n}` (the row's number) instead of the product's norm_hash(text): bench/injection.py's data sets were built
    # so and are reused from disk, so its rows must stay as they were.
    numbered_hashes: bool = False


def text(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 18)))


def vector(rng: random.Random, dims: int) -> str:
    """A random unit vector in pgvector's text form."""
    values = [rng.gauss(0, 1) for _ in range(dims)]
    norm = sum(v * v for v in values) ** 0.5
    return "[" + ",".join(f"{v / norm:.5f}" for v in values) + "]"


def people(count: int) -> list[str]:
    return [f"person{n:05d}" for n in range(count)]


def zipf_weights(count: int) -> list[float]:
    """The weight of the person at each rank: the first few own most records."""
    return [1 / rank ** 1.1 for rank in range(1, count + 1)]


def copy_text(value: str) -> str:
    """A value escaped for COPY's text format."""
    return value.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")


def _commitment(rng: random.Random, now: datetime) -> str:
    due = (now + timedelta(days=rng.uniform(-10, 60))).isoformat()
    return json.dumps({"status": "open" if rng.random() < 0.7 else "done", "due_at": due,
                       "promised_to": rng.choice(WORDS)})


def _episode(updated: datetime) -> str:
    return json.dumps({"from": updated.isoformat(), "to": (updated + timedelta(minutes=30)).isoformat(),
                       "thread_id": "thr_bench", "first_item_id": "itm_bench"})


def records(rng: random.Random, mix: Mix, org_id: str, index_id: str, count: int,
            now: datetime | None = None) -> Iterator[list[str | None]]:
    """The rows, in COLUMNS' order (None for NULL). The order of the draws is part of the data set's definition:
    changing it changes the rows, and the data sets kept on disk would no longer be what their seed says."""
    from backend.domains.memory.rules import norm_hash
    from backend.ids import new_id

    now = now or datetime.now(UTC).replace(microsecond=0)
    kinds, kind_weights = zip(*TYPES, strict=True)
    owners = rng.choices(mix.people, weights=zipf_weights(len(mix.people)), k=count)
    for n, owner in enumerate(owners):
        subject = None if rng.random() < mix.shared else owner
        kind = rng.choices(kinds, weights=kind_weights)[0]
        updated = now - timedelta(days=rng.random() * 365)
        commitment = _commitment(rng, now) if kind == "commitment" else None
        episode = _episode(updated) if kind == "episode" else None
        embedding = vector(rng, mix.dims) if rng.random() < mix.embedded else None
        words = text(rng)
        digest = f"h{n}" if mix.numbered_hashes else norm_hash(words)
        yield [org_id, new_id("mem"), index_id, subject, kind, words, digest, f"{rng.uniform(0.3, 1.0):.3f}", "api",
               commitment, episode, updated.isoformat(), updated.isoformat(), embedding]


def write_records(conn: Any, rng: random.Random, mix: Mix, org_id: str, index_id: str, count: int, *,
                  chunk: int = 100_000, progress: bool = False) -> None:
    """`count` records into one store with COPY, `chunk` rows per statement (psycopg connection, autocommit)."""
    rows = records(rng, mix, org_id, index_id, count)
    for start in range(0, count, chunk):
        lines = ["\t".join("\\N" if f is None else copy_text(f) for f in row) + "\n"
                 for row in itertools.islice(rows, chunk)]
        with conn.cursor() as cur, cur.copy(f"COPY memory_records ({COLUMNS}) FROM STDIN") as copy:
            copy.write("".join(lines))
        if progress:
            print(f"  records: {min(start + chunk, count):,}", flush=True)
