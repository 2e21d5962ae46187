"""Extraction windows and runs written straight into the database, so the health page can be shown (and timed in
bench/dashboard.py) with as many windows as wanted without running a model for each."""

from __future__ import annotations

from typing import Any

import psycopg

ERROR_CODES = ("invalid_model_output", "model_error", "permission_denied")
RUNS = 12


def state_of(n: int) -> str:
    """Window `n`'s state: 80 in 100 ready, 10 failed, 7 queued, 3 parked."""
    rest = n % 100
    return "ready" if rest < 80 else "failed" if rest < 90 else "queued" if rest < 97 else "parked"


def expected(count: int) -> dict[str, Any]:
    """What the page should count for `seed_windows(count=…)`: windows per state and failed ones per error code."""
    states = {"ready": 0, "failed": 0, "queued": 0, "parked": 0}
    codes: dict[str, int] = {}
    for n in range(1, count + 1):
        state = state_of(n)
        states[state] += 1
        if state == "failed":
            codes[ERROR_CODES[n % 3]] = codes.get(ERROR_CODES[n % 3], 0) + 1
    return {"states": states, "codes": codes}


SEED_SQL = """
INSERT INTO extraction_windows (org_id, id, index_id, thread_id, run_id, first_position, last_position, items, state,
                                attempts, error_code, error, written, confirmed, replaced, dropped, created_at,
                                finished_at)
SELECT %(org)s, 'win_seed_' || lpad(g::text, 9, '0'), %(index)s,
       CASE WHEN s.state = 'failed' THEN %(failed_thread)s ELSE 'thr_seed_' || (g %% 5000) END,
       'run_seed_' || lpad((g %% %(runs)s)::text, 3, '0'), g, g + 3, 4, s.state,
       CASE WHEN s.state = 'failed' THEN 1 ELSE 0 END,
       CASE WHEN s.state = 'failed' THEN (ARRAY['invalid_model_output', 'model_error', 'permission_denied'])[g %% 3 + 1]
       END,
       CASE WHEN s.state = 'failed' THEN 'seeded failure' END,
       CASE WHEN s.state = 'ready' THEN g %% 3 ELSE 0 END, CASE WHEN s.state = 'ready' THEN g %% 2 ELSE 0 END,
       CASE WHEN s.state = 'ready' AND g %% 10 = 0 THEN 1 ELSE 0 END, 0,
       now() - interval '3 days',
       CASE WHEN s.state IN ('ready', 'failed') THEN now() - (g %% 47) * interval '1 hour' END
FROM generate_series(1, %(count)s) AS g,
     LATERAL (SELECT CASE WHEN g %% 100 < 80 THEN 'ready' WHEN g %% 100 < 90 THEN 'failed'
                          WHEN g %% 100 < 97 THEN 'queued' ELSE 'parked' END AS state) AS s
"""


def seed_windows(conn: psycopg.Connection[Any], org_id: str, index_id: str, count: int, failed_thread: str) -> None:
    """`count` windows over `RUNS` runs of the store's switch; failed ones belong to `failed_thread`."""
    for n in range(RUNS):
        conn.execute("INSERT INTO extraction_runs (org_id, id, index_id, trigger, started_at, planned_at) "
                     "VALUES (%s, %s, %s, 'schedule', now() - %s * interval '1 hour', now())",
                     (org_id, f"run_seed_{n:03d}", index_id, RUNS - n))
    conn.execute(SEED_SQL, {"org": org_id, "index": index_id, "failed_thread": failed_thread, "runs": RUNS,  # type: ignore[arg-type]
                            "count": count})
    conn.execute("ANALYZE extraction_windows")
