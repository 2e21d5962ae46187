"""Search quality on the labelled development set (MEM-13): `make eval-search`.

Writes the development set (tests/quality/devset.py) into three indexes of a scratch organisation: one that embeds
nothing (full text only), one with `hashing` embeddings and one with `local` embeddings; then asks every query as
its person through `GET /memory/search` and prints recall@5, recall@10 and MRR@10 per query kind, the share of
queries that found nothing, and the leaks (a record of another person in a result; must be 0).

    make eval-search                      # the whole set, the fusion the product uses
    python -m tests.quality.evaluate --tune   # also the fusion variants (RRF and weighted sums), local only

Two tables: the development set's queries (tuned on) and the held-out queries (`devset.heldout()`: new wordings of
the paraphrase, cross-lingual and shared questions over the same records, never used for tuning).

The pytest suite runs a subset of the queries (tests/quality/test_search_quality.py).
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tests.quality.devset import KINDS, DevSet, Query, build, heldout

MODES: dict[str, dict[str, Any] | None] = {
    "full text only": None,
    "hashing": {"provider": "hashing", "model": "feature-hash", "dimensions": 384},
    "local": {"provider": "local", "model": "use-multilingual-v3", "dimensions": 512},
}
LIMIT = 10


@dataclass
class Score:
    recall5: list[float] = field(default_factory=list)
    recall10: list[float] = field(default_factory=list)
    mrr10: list[float] = field(default_factory=list)
    empty: list[float] = field(default_factory=list)

    def add(self, found: Sequence[str], gold: set[str]) -> None:
        self.recall5.append(len(gold & set(found[:5])) / len(gold))
        self.recall10.append(len(gold & set(found[:10])) / len(gold))
        self.mrr10.append(next((1.0 / (n + 1) for n, ref in enumerate(found[:10]) if ref in gold), 0.0))
        self.empty.append(0.0 if found else 1.0)

    def merged(self, other: Score) -> Score:
        return Score(self.recall5 + other.recall5, self.recall10 + other.recall10, self.mrr10 + other.mrr10,
                     self.empty + other.empty)


@dataclass
class Result:
    by_kind: dict[str, Score]
    leaks: int
    seconds: float

    @property
    def overall(self) -> Score:
        total = Score()
        for score in self.by_kind.values():
            total = total.merged(score)
        return total


def _mean(values: list[float]) -> float:
    return statistics.mean(values) if values else 0.0


def load(org: Any, devset: DevSet, embedding: dict[str, Any] | None) -> tuple[str, dict[str, str]]:
    """A new index with the set's records; returns its id and record id -> ref."""
    from tests.helpers import bearer

    client = org.client
    created = client.post("/indexes", json={"name": f"devset-{os.urandom(4).hex()}", "embedding": embedding},
                          headers=org.admin)
    assert created.status_code == 201, created.text
    index_id = str(created.json()["id"])
    refs: dict[str, str] = {}
    owners = sorted({r.subject or "" for r in devset.records})
    for owner in owners:
        records = [r for r in devset.records if (r.subject or "") == owner]
        headers = bearer(org.key, owner) if owner else bearer(org.key)
        body = {"records": [{"index_id": index_id, "type": "fact", "text": r.text} for r in records]}
        answer = client.post("/memory/batch", json=body, headers=headers)
        assert answer.status_code == 201, answer.text
        for record, written in zip(records, answer.json()["data"], strict=True):
            refs[written["id"]] = record.ref
    return index_id, refs


def ask(org: Any, index_id: str, refs: dict[str, str], queries: Sequence[Query]) -> Result:
    from tests.helpers import bearer

    by_kind = {kind: Score() for kind in KINDS}
    leaks = 0
    start = time.perf_counter()
    for query in queries:
        answer = org.client.get("/memory/search", params={"q": query.text, "index_id": index_id, "limit": LIMIT},
                                headers=bearer(org.key, query.subject))
        assert answer.status_code == 200, answer.text
        rows = answer.json()["data"]
        leaks += sum(1 for row in rows if row["subject"] not in (None, query.subject))
        by_kind[query.kind].add([refs.get(row["id"], "?") for row in rows], set(query.gold))
    return Result(by_kind, leaks, time.perf_counter() - start)


def table(results: dict[str, Result]) -> str:
    head = "| mode | kind | queries | recall@5 | recall@10 | MRR@10 | found nothing | leaks |"
    lines = [head, "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for mode, result in results.items():
        rows = [*result.by_kind.items(), ("all", result.overall)]
        for kind, score in rows:
            if not score.recall5:
                continue
            leaks = str(result.leaks) if kind == "all" else ""
            lines.append(f"| {mode} | {kind} | {len(score.recall5)} | {_mean(score.recall5):.3f} | "
                         f"{_mean(score.recall10):.3f} | {_mean(score.mrr10):.3f} | {_mean(score.empty):.2f} | "
                         f"{leaks} |")
    return "\n".join(lines)


def evaluate(org: Any, devset: DevSet, analyse: Callable[[], None],
             modes: dict[str, dict[str, Any] | None] = MODES, *more: Sequence[Query]) -> list[dict[str, Result]]:
    """Loads every mode's index first, gives PostgreSQL its statistics (`analyse`), then asks the set's queries
    (and each further list of queries over the same records): one result per mode for each list."""
    loaded = {mode: load(org, devset, embedding) for mode, embedding in modes.items()}
    analyse()
    return [{mode: ask(org, index_id, refs, queries) for mode, (index_id, refs) in loaded.items()}
            for queries in (devset.queries, *more)]


def analyser(database_url: str) -> Callable[[], None]:
    """ANALYZE the records table, as autovacuum would after a large write."""
    import psycopg
    from sqlalchemy.engine import make_url

    plain = make_url(database_url).set(drivername="postgresql").render_as_string(hide_password=False)

    def analyse() -> None:
        with psycopg.connect(plain, autocommit=True) as conn:
            conn.execute("ANALYZE memory_records")

    return analyse


@contextmanager
def scratch_org() -> Iterator[tuple[Any, str]]:
    """A scratch embedded PostgreSQL, a migrated database, the app and one bootstrapped organisation."""
    from litestar.testing import TestClient

    from backend.app import create_app
    from backend.config import Settings
    from backend.db import migrate
    from backend.db.embedded import ensure_database, socket_url, start_server
    from tests.helpers import bootstrap_org

    pgdata = Path(tempfile.mkdtemp(prefix="coremem-eval-pg-"))
    server = start_server(pgdata, cleanup_mode="stop")
    try:
        ensure_database(server, "coremem_eval")
        url = socket_url(pgdata, "coremem_eval")
        migrate.upgrade(url)
        settings = Settings(database_url=url, data_dir=pgdata / "data", secret="eval-secret-" + "x" * 20)
        with TestClient(create_app(settings, url)) as client:
            yield bootstrap_org(client, settings, url, "Eval", "admin@eval.test"), url
    finally:
        server.cleanup()
        shutil.rmtree(pgdata, ignore_errors=True)


def tune(org: Any, devset: DevSet, analyse: Callable[[], None], held: Sequence[Query],
         methods: Sequence[str] = ()) -> str:
    """Local embeddings under each fusion variant (the product's search reads `repository.FUSION`)."""
    from backend.domains.memory import search_repository as repository

    index_id, refs = load(org, devset, MODES["local"])
    analyse()
    chosen = repository.FUSION
    variants = [replace(chosen, method="rrf", rrf_k=k, floors={"local": m}) for k in (10, 60)
                for m in (0.0, 0.1, 0.2, 0.25)]
    variants += [replace(chosen, method="rrf_share", rrf_k=k, floors={"local": 0.0}) for k in (10, 60)]
    variants += [replace(chosen, method="weighted", text_weight=w, floors={"local": m}) for w in (0.2, 0.3, 0.5, 0.7)
                 for m in (0.0, 0.1, 0.25)]
    variants = [v for v in variants if not methods or v.method in methods]
    lines = ["| fusion | k / text weight | min similarity | recall@5 | " + " | ".join(f"{k} r@5" for k in KINDS)
             + " | MRR@10 | found nothing | held-out r@5 |",
             "| --- | ---: | ---: | ---: | " + " | ".join("---:" for _ in KINDS) + " | ---: | ---: | ---: |"]
    try:
        for variant in variants:
            repository.FUSION = variant
            result = ask(org, index_id, refs, devset.queries)
            unseen = ask(org, index_id, refs, held)
            knob = variant.text_weight if variant.method == "weighted" else variant.rrf_k
            kinds = " | ".join(f"{_mean(result.by_kind[k].recall5):.3f}" for k in KINDS)
            lines.append(f"| {variant.method} | {knob} | {variant.floors['local']} | "
                         f"{_mean(result.overall.recall5):.3f} | {kinds} | {_mean(result.overall.mrr10):.3f} | "
                         f"{_mean(result.overall.empty):.2f} | {_mean(unseen.overall.recall5):.3f} |")
    finally:
        repository.FUSION = chosen
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--tune", action="store_true", help="also measure the fusion variants (local only)")
    parser.add_argument("--method", action="append", default=[], help="with --tune: only these fusion methods")
    args = parser.parse_args()
    logging.getLogger("httpx").setLevel(logging.WARNING)
    logging.getLogger("pgserver").setLevel(logging.WARNING)
    devset, held = build(), heldout().queries
    with scratch_org() as (org, url):
        results, unseen = evaluate(org, devset, analyser(url), MODES, held)
        for title, queries, found in (("Development set", devset.queries, results),
                                      ("Held-out questions", held, unseen)):
            print(f"{title}: {len(devset.records)} records, {len(queries)} queries "
                  f"({', '.join(f'{k} {sum(q.kind == k for q in queries)}' for k in KINDS)}).\n")
            print(table(found))
            print("\nSeconds for all queries: " + ", ".join(f"{m} {r.seconds:.1f}" for m, r in found.items()) + "\n")
        if args.tune:
            print(tune(org, devset, analyser(url), held, args.method))
        leaks = sum(r.leaks for found in (results, unseen) for r in found.values())
        if leaks:
            raise SystemExit(f"{leaks} leaks: a person was shown another person's record")


if __name__ == "__main__":
    main()
