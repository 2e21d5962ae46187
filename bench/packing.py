"""Packing benchmark (INJ-10, issue 16 goal 2): over 10,000 random (person, budget) cases of the injection data
set, the block never exceeds its budget and fills at least 90% of it whenever its candidates overflow it.

The candidates of 200 random people (and of nobody) are fetched once from the 1,000,000-record store of
`make bench-injection` (the same statement a turn runs, with the default count limit of 20); each is then packed
by the builder's walk (`block.build_block`) under 50 random budgets between 50 and 1,500 tokens, so the cases
cost milliseconds each. The candidates do not depend on the budget (only on the count limits), so this is the
block a turn would get for that person and budget.

A case overflows when what the count limits and the shared share (40% of the budget on a turn for a person) let
through would need more than the budget: the sum of those lines' tokens and their section labels. Shared lines
count only up to the shared share, since the walk may never go past it.

    make bench-packing          # needs the data set of bench-injection (built on first use)
"""

from __future__ import annotations

import argparse
import asyncio
import math
import platform
import random
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.injection import build as build_data
from bench.search import start_database

SEED = 20261216
PEOPLE = 199  # and nobody: 200 × 50 = 10,000 cases
BUDGETS = 50
FILL = 0.9
RESULTS = Path(__file__).parent / "results" / "packing.md"


async def fetch(url: str, meta: dict[str, Any], people: list[str | None]) -> dict[str | None, Any]:
    from backend.access.policy import Requester, default_policy, parse_policy
    from backend.access.scope import Scope
    from backend.db.engine import make_engine, make_sessionmaker
    from backend.db.tenant import use_org
    from backend.domains.injection import repository as repo
    from backend.domains.injection.service import _candidate

    policy = parse_policy(default_policy())
    engine = make_engine(url, pool_size=1)
    sessions = make_sessionmaker(engine)
    half_lives = {"fact": 180.0, "preference": 90.0}
    found: dict[str | None, Any] = {}
    try:
        for person in people:
            scope = Scope(meta["org_id"], Requester(person, {}), policy.indexes, policy.rules, unrestricted=False,
                          policy=policy)
            bounds = {"commitments": 5 + repo.SLACK, "behaviour": 10 + repo.SLACK, "about_this_person": 20 + repo.SLACK,
                      "organisation": 20 + repo.SLACK, "past_sessions": 0}
            if person is None:
                bounds["behaviour"] = bounds["about_this_person"] = 0
            async with sessions() as db, db.begin():
                await use_org(db, meta["org_id"])  # row-level security: as every request's transaction
                rows = await repo.candidates(db, scope, half_lives, repo.Selection(meta["index_id"], person, [], {},
                                                                                     None),
                                             bounds, repo.Ranking("confidence", None, None))
            found[person] = {s: [_candidate(r, s) for r in rs] for s, rs in rows.items()}
    finally:
        await engine.dispose()
    return found


def demand(candidates: dict[str, Any], budget: int, for_person: bool) -> int:
    """Tokens the block would need to take every line the count limits and the shared share let through."""
    from backend.domains.injection.block import SHARED_SHARE, Limits, build_block
    from backend.providers.tokens import utf8_bytes_over_four as estimate

    unbounded = build_block(candidates, Limits(budget_tokens=10**9, for_person=False))
    own = shared = 0
    labelled: set[str] = set()
    for line, c in unbounded.lines:
        cost = estimate(line)
        if c.owner is None:
            shared += cost
        else:
            own += cost
        if c.section not in labelled:
            labelled.add(c.section)
            own += estimate(f"[{c.section}]")
    if for_person:
        shared = min(shared, math.floor(budget * SHARED_SHARE))
    return own + shared


def run(found: dict[str | None, Any], rng: random.Random) -> dict[str, Any]:
    from backend.domains.injection.block import Limits, build_block

    cases = over_budget = overflowed = underfilled = 0
    fills: list[float] = []
    worst: list[tuple[float, str | None, int, int]] = []
    for person, candidates in found.items():
        for _ in range(BUDGETS):
            budget = rng.randint(50, 1500)
            block = build_block(candidates, Limits(budget_tokens=budget, for_person=person is not None))
            cases += 1
            if block.estimated_tokens > budget:
                over_budget += 1
            if demand(candidates, budget, person is not None) > budget:
                overflowed += 1
                fill = block.estimated_tokens / budget
                fills.append(fill)
                if fill < FILL:
                    underfilled += 1
                    worst.append((fill, person, budget, block.estimated_tokens))
    largest = max((w[2] for w in worst), default=None)
    worst.sort(key=lambda w: w[0])
    return {"cases": cases, "over_budget": over_budget, "overflowed": overflowed, "underfilled": underfilled,
            "min_fill": min(fills) if fills else None, "mean_fill": sum(fills) / len(fills) if fills else None,
            "worst": worst[:5], "largest_underfilled": largest}


def render(result: dict[str, Any], people: int) -> str:
    ok_budget = result["over_budget"] == 0
    ok_fill = result["underfilled"] == 0
    lines = [
        "# Packing benchmark (INJ-10, issue 16 goal 2)", "",
        f"Cases: {result['cases']:,} = {people} random people of the 1,000,000-record injection data set and nobody, "
        f"each under {BUDGETS} random budgets (50–1,500 tokens), seed {SEED}; the candidates a turn fetches (count "
        "limit 20), packed by the builder's walk. Machine: 2 cores shared with other workers, CPython "
        f"{platform.python_version()}.", "",
        f"- {'PASS' if ok_budget else 'FAIL'}: blocks over their budget: {result['over_budget']} of "
        f"{result['cases']:,} (goal 0)",
        f"- {'PASS' if ok_fill else 'FAIL'}: cases whose candidates overflow the budget: {result['overflowed']:,}; "
        f"filled below {FILL:.0%}: {result['underfilled']} (goal 0); lowest fill "
        f"{(result['min_fill'] or 0):.1%}, mean {(result['mean_fill'] or 0):.1%}; the largest budget among the "
        f"cases filled below {FILL:.0%}: {result['largest_underfilled']} tokens (a line is never cut, so a budget "
        "of a few lines cannot always be filled)", "",
    ]
    if result["worst"]:
        lines += ["Least filled overflowing cases (fill, person, budget, tokens used):", ""]
        lines += [f"- {fill:.1%}, {person}, {budget}, {used}" for fill, person, budget, used in result["worst"]]
        lines.append("")
    lines += [f"Run at {datetime.now(UTC).isoformat(timespec='seconds')}.", ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--people", type=int, default=PEOPLE)
    args = parser.parse_args()
    url, _server = start_database(Path(".coremem/bench-pg"))
    meta = build_data(url, False)
    rng = random.Random(SEED)
    people: list[str | None] = [f"person{n:05d}" for n in rng.sample(range(10_000), args.people)]
    found = asyncio.run(fetch(url, meta, [*people, None]))
    report = render(run(found, rng), args.people)
    print(report)
    RESULTS.write_text(report)


if __name__ == "__main__":
    main()
