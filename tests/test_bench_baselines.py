"""The performance suite's data and baselines at a small size: bench/data.py's seeded records, and the injection
benchmark's hand-written statement, which must fetch exactly the builder's candidates (INJ-13) or its comparison
says nothing."""

from __future__ import annotations

import asyncio
import json
import random
from collections import Counter
from datetime import UTC, datetime
from typing import Any

import pytest

from backend.db.engine import make_engine, make_sessionmaker
from backend.domains.memory.rules import norm_hash
from bench import data, injection

RECORDS = 3_000
PEOPLE = 100
NOW = datetime(2026, 5, 1, 12, tzinfo=UTC)
SECRET = "test-secret-" + "x" * 20
MIX = data.Mix(data.people(PEOPLE), shared=0.2, embedded=0.02, dims=16)


def _rows(seed: int, mix: data.Mix = MIX, count: int = RECORDS) -> list[dict[str, str | None]]:
    """The generated rows by column, without their record ids (minted anew on every run)."""
    columns = data.COLUMNS.split(", ")
    generated = data.records(random.Random(seed), mix, "org_x", "idx_x", count, now=NOW)
    return [{c: value for c, value in zip(columns, row, strict=True) if c != "id"} for row in generated]


def test_bench_records_are_the_same_for_the_same_seed_and_differ_for_another() -> None:
    first = _rows(7)
    assert _rows(7) == first
    assert _rows(8) != first
    assert len({tuple(row.values()) for row in first}) == RECORDS  # and no two rows alike


def test_bench_records_honour_their_mix() -> None:
    rows = _rows(7, count=10_000)
    assert 0.18 < sum(r["subject"] is None for r in rows) / len(rows) < 0.22
    kinds = Counter(r["type"] for r in rows)
    for kind, share in data.TYPES:
        assert share - 0.02 < kinds[kind] / len(rows) < share + 0.02, kind
    owners = Counter(r["subject"] for r in rows if r["subject"])
    assert owners.most_common(1)[0][0] == "person00000"  # the first rank weighs most
    assert owners["person00000"] > 10 * owners["person00099"]
    embedded = [e for r in rows if (e := r["embedding"])]
    assert 0.01 < len(embedded) / len(rows) < 0.03
    assert all(abs(sum(float(v) ** 2 for v in e.strip("[]").split(",")) - 1) < 1e-3 for e in embedded)
    assert {len(e.split(",")) for e in embedded} == {MIX.dims}
    statuses = Counter(json.loads(r["commitment"] or "")["status"] for r in rows if r["type"] == "commitment")
    assert statuses["open"] > statuses["done"] > 0
    assert all(r["episode"] for r in rows if r["type"] == "episode")
    assert all(r["norm_hash"] == norm_hash(r["text"] or "") for r in rows)
    numbered = _rows(7, data.Mix(MIX.people, MIX.shared, MIX.embedded, MIX.dims, numbered_hashes=True), 10)
    assert [row["norm_hash"] for row in numbered] == [f"h{n}" for n in range(10)]


async def _candidates(url: str, meta: dict[str, Any], person: str) -> list[tuple[int, str]]:
    """bench/injection.py's check, as `measure` runs it before measuring."""
    engine = make_engine(url, pool_size=1)
    owner_engine = make_engine(url, pool_size=1, app_role=False)
    try:
        sessions = make_sessionmaker(engine)
        key_row, _ = await injection.injection_key(sessions, meta["org_id"], meta["index_id"], SECRET)
        return await injection.same_candidates(sessions, make_sessionmaker(owner_engine), key_row, meta["index_id"],
                                               person)
    finally:
        await engine.dispose()
        await owner_engine.dispose()


def test_inj_13_hand_written_statement_returns_the_builders_candidates(database_url: str,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    meta = injection.build_store(database_url, RECORDS, PEOPLE)
    assert meta["heaviest"][1] > 100 > meta["median"][1] > 0
    sections = Counter(section for section, _ in asyncio.run(_candidates(database_url, meta, meta["heaviest"][0])))
    # Every section has candidates, and the ranked ones are cut at their bound: the check is not vacuous.
    assert set(sections) == {0, 1, 2, 3} and sections[2] == sections[3] == 70
    assert asyncio.run(_candidates(database_url, meta, meta["median"][0]))

    # The check can fail: one bound off in the hand-written statement is caught.
    right = injection.best_sql
    monkeypatch.setattr(injection, "best_sql", lambda: right(ranked=69))
    with pytest.raises(AssertionError, match="differs from the builder's candidates"):
        asyncio.run(_candidates(database_url, meta, meta["median"][0]))


def test_the_goals_table_reads_every_way_a_report_writes_a_goal() -> None:
    """`make bench` ends with bench/summary.py's table: a goal line in any of the reports' forms is read, with its
    verdict and numbers, and nothing else is (a benchmark whose goals were not read would vanish from the table)."""
    from bench import summary

    report = "\n".join([
        "# A report", "", "| mode | p50 |", "| --- | ---: |", "| PASS-through | 1.0 |",
        "- PASS: builder p50 9.64 ms (goal ≤ 10 ms)",
        "- FAIL: batch 6,093 records/s = 0.39× COPY's 15,805 (goal ≥ 0.5×)",
        "PASS goal 3 recall@10, median person: 0.997 (≥ 0.95)",
        "- plan pass over 100,000 threads: 61 ms — goal <= 1 s: PASS",
        "- platform time per window p50: 31.0 ms — goal <= 30 ms: FAIL",
        "Goals (issue 13): overhead p50 <= 30 ms; plan pass over 100k threads <= 1 s.",
    ])
    assert summary.goals(report) == [
        ("PASS", "builder p50 9.64 ms (goal ≤ 10 ms)"),
        ("FAIL", "batch 6,093 records/s = 0.39× COPY's 15,805 (goal ≥ 0.5×)"),
        ("PASS", "goal 3 recall@10, median person: 0.997 (≥ 0.95)"),
        ("PASS", "plan pass over 100,000 threads: 61 ms — goal <= 1 s"),
        ("FAIL", "platform time per window p50: 31.0 ms — goal <= 30 ms"),
    ]


def test_the_goals_table_dates_a_report_by_the_run_it_names() -> None:
    """A fresh clone stamps every report with its checkout time; the table takes the run's time from the report."""
    from bench import summary

    assert summary.written_at("Machine: 2 cores. Run 2026-12-06T11:28:46+00:00. Product at commit x.") == \
        "2026-12-06 11:28"
    assert summary.written_at("Measured 2026-12-05 13:38 UTC on 2 cores") == "2026-12-05 13:38"
    assert summary.written_at("# A report with no date") is None
