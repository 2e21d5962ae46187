"""The goals table of a `make bench` run: every PASS and FAIL line of the reports in bench/results/.

Each benchmark writes its own report with its goal lines (`- PASS: …` or `- FAIL: …`, some without the dash);
this gathers them in the order `make bench` runs the benchmarks, prints one table and writes it to
bench/results/summary.md with the time each report's run names (the first date and time in it; the file's
modification time only for a report naming none, since a clone stamps every file with its checkout), so a report
left over from an earlier run shows as such. A benchmark whose report has no goal line is listed as such, never
left out.

    python -m bench.summary [names…]
"""

from __future__ import annotations

import re
import sys
from datetime import UTC, datetime
from pathlib import Path

RESULTS = Path(__file__).parent / "results"
# The order of `make bench`; each name is a report bench/results/<name>.md.
BENCHES = ["injection", "packing", "vector", "search", "writes", "export", "http", "turns", "embed", "dashboard",
           "rls", "extraction", "admin"]
RUN_TIME = re.compile(r"(\d{4}-\d{2}-\d{2})[T ](\d{2}:\d{2})")
GOAL = re.compile(r"^\s*(?:-\s*)?(?:(PASS|FAIL)\b:?\s*(.*)|(.*?)\s*(?:—|-)?\s*goal\b.*:\s*(PASS|FAIL)\s*$)")


def goals(report: str) -> list[tuple[str, str]]:
    """(verdict, what) for every goal line of one report."""
    found = []
    for line in report.splitlines():
        match = GOAL.match(line)
        if not match:
            continue
        if match.group(1):
            found.append((match.group(1), match.group(2).strip()))
        else:
            found.append((match.group(4), line.strip().lstrip("- ").rsplit(":", 1)[0].strip()))
    return found


def written_at(report: str) -> str | None:
    """The run's date and time as the report states it (`YYYY-MM-DD HH:MM`), or None."""
    match = RUN_TIME.search(report)
    return f"{match.group(1)} {match.group(2)}" if match else None


def table(names: list[str]) -> tuple[str, int]:
    """The markdown table of these reports' goals and the number of failing goals."""
    rows = ["| benchmark | run (UTC) | verdict | goal and numbers |", "| --- | --- | --- | --- |"]
    failing = 0
    for name in names:
        path = RESULTS / f"{name}.md"
        if not path.exists():
            rows.append(f"| {name} | – | NO REPORT | |")
            continue
        text = path.read_text()
        written = written_at(text) or datetime.fromtimestamp(path.stat().st_mtime, UTC).strftime("%Y-%m-%d %H:%M")
        found = goals(text)
        if not found:
            rows.append(f"| {name} | {written} | – | no goal: measurements only |")
        for verdict, what in found:
            failing += verdict == "FAIL"
            rows.append(f"| {name} | {written} | {verdict} | {what.replace('|', '/')} |")
    return "\n".join(rows), failing


def main() -> None:
    names = sys.argv[1:] or BENCHES
    text, failing = table(names)
    report = (f"# `make bench`: every goal\n\nGathered {datetime.now(UTC):%Y-%m-%d %H:%M} UTC from bench/results/ "
              f"by `python -m bench.summary`; {failing} goal line(s) FAIL. What each goal means and why a failing "
              f"one fails: docs/performance.md.\n\n{text}\n")
    (RESULTS / "summary.md").write_text(report)
    print(report)


if __name__ == "__main__":
    main()
