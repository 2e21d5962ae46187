"""Row-level security's cost per statement (issue 17 item 11), robust to a busy machine: the same statements on
the `make bench-http` data set, alternately as the owner (no policies apply) and as `coremem_app` with the
organisation set, in one process, interleaved sample by sample, medians compared.

    (owner)  BEGIN; <statement>; COMMIT
    (app)    BEGIN; SELECT set_config('core.org_id', …, true); <statement>; COMMIT   -- as the API does it

Statements: the baseline's GET /memory page (`MEMORY_SQL`), the message search (`SEARCH_SQL`) and the key
lookup (`KEY_SQL`, on the control plane: no policy, so only the set_config round trip differs).

    python -m bench.rls [--samples N]      # needs the data set of `make bench-http` (.coremem/bench-http-pg)

Results are printed and written to bench/results/rls.md. Not part of `make test`.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg

from backend.db.tenant import APP_ROLE
from bench.http import DATABASE, PERSON, PGDATA, open_database, plain
from bench.http_baseline import HEADLINE_OPTIONS, KEY_SQL, MEMORY_SQL, SEARCH_PAGE, SEARCH_SQL

RESULTS = Path(__file__).parent / "results" / "rls.md"


def _driver(sql: str) -> str:
    """`:name` binds (SQLAlchemy text) to psycopg's `%(name)s`."""
    import re

    return re.sub(r"(?<!:):([a-z_]+)", r"%(\1)s", sql)


def _time(conn: psycopg.Connection[Any], sql: str, params: dict[str, Any], org_id: str | None) -> float:
    started = time.perf_counter()
    with conn.transaction():
        if org_id is not None:
            conn.execute("SELECT set_config('core.org_id', %s, true)", (org_id,))
        conn.execute(sql, params).fetchall()  # type: ignore[arg-type]
    return (time.perf_counter() - started) * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=2000)
    args = parser.parse_args()
    url, _server = open_database(PGDATA)
    dsn = plain(url)
    with psycopg.connect(dsn, autocommit=True) as owner:
        meta = owner.execute("SELECT value FROM bench_meta WHERE key = 'http'").fetchone()[0]
    params = {"h": hashlib.sha256(meta["key"].encode()).hexdigest(), "person": PERSON, "idx": meta["index_id"],
              "n": 13, "q": meta["word"], "hl": HEADLINE_OPTIONS}
    load_before = os.getloadavg()
    rows = []
    with psycopg.connect(dsn) as owner, psycopg.connect(dsn, options=f"-c role={APP_ROLE}") as app:
        for name, sql, n in (("key lookup (control plane)", KEY_SQL, 13), ("GET /memory page", MEMORY_SQL, 13),
                             ("message search", SEARCH_SQL, SEARCH_PAGE + 1)):
            statement = _driver(sql)
            params["n"] = n
            try:
                same = (owner.execute(statement, params).fetchall() ==  # type: ignore[arg-type]
                        _rows_as_app(app, statement, params, meta["org_id"]))
                owner.rollback()
            except psycopg.Error as exc:
                owner.rollback()
                app.rollback()
                print(f"{name}: skipped ({exc})")
                continue
            a: list[float] = []
            b: list[float] = []
            for _ in range(50):  # warm both connections' plans and caches
                _time(owner, statement, params, None)
                _time(app, statement, params, meta["org_id"])
            for _ in range(args.samples):
                a.append(_time(owner, statement, params, None))
                b.append(_time(app, statement, params, meta["org_id"]))
            ma, mb = statistics.median(a), statistics.median(b)
            rows.append((name, ma, mb, mb - ma, mb / ma, same))
            print(f"{name}: owner {ma:.3f} ms, app role {mb:.3f} ms, +{mb - ma:.3f} ms ({mb / ma:.2f}×), "
                  f"same rows: {same}", flush=True)
    lines = ["# Row-level security: cost per statement", "",
             f"Data: the `make bench-http` data set ({DATABASE}: 50,030 records, 1,847 messages). "
             f"Run {datetime.now(UTC).isoformat(timespec='seconds')}; load average "
             f"{', '.join(f'{x:.2f}' for x in load_before)} before, "
             f"{', '.join(f'{x:.2f}' for x in os.getloadavg())} after (2 cores shared with other work).",
             f"Method: `python -m bench.rls --samples {args.samples}`: one process, two connections to the embedded "
             "server, samples interleaved (owner, app role, owner, …) after 50 warm-up pairs; each sample is one "
             "transaction; the app role's includes the `set_config` statement the API runs per request. Medians.",
             "", "| statement | owner, no policies (ms) | `coremem_app` + set_config (ms) | difference | ratio | "
             "same rows |", "| --- | ---: | ---: | ---: | ---: | --- |"]
    lines += [f"| {n} | {a:.3f} | {b:.3f} | +{d:.3f} | {r:.2f}× | {'yes' if s else 'NO'} |"
              for n, a, b, d, r, s in rows]
    RESULTS.write_text("\n".join(lines) + "\n")
    print(f"saved to {RESULTS}")


def _rows_as_app(app: psycopg.Connection[Any], statement: str, params: dict[str, Any], org_id: str) -> list[Any]:
    with app.transaction():
        app.execute("SELECT set_config('core.org_id', %s, true)", (org_id,))
        return app.execute(statement, params).fetchall()  # type: ignore[arg-type]


if __name__ == "__main__":
    main()
