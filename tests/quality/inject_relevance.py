"""INJ-8 relevance ranking on the labelled development set: how the injection block orders a person's records by
the turn's input (backend/domains/injection/repository.py `_relevance`: vector similarity when the record holds a
vector of the index's setting, else the full-text rank of the input's words).

A `local` index holds the set's records; its store ranks by `relevance`. Each query of the set (and of the held-out
questions) is a turn's input: the previewer builds that person's block, and the gold record counts as found when it
is among the first five lines of its section (`[about_this_person]` for her records, `[organisation]` for shared
ones). Also measured: the same while the records have no vector of the index's model (as between a change of model
and the re-embedding job), where only the words can rank.

    .venv/bin/python -m tests.quality.inject_relevance

Not part of `make test`; the numbers it printed are in docs/decisions.md (INJ-8).
"""

from __future__ import annotations

import logging
import statistics
from collections.abc import Sequence
from typing import Any

from tests.quality.devset import KINDS, Query, build, heldout
from tests.quality.evaluate import MODES, analyser, load, scratch_org

TOP = 5


def found_at(org: Any, index_id: str, refs: dict[str, str], queries: Sequence[Query]) -> dict[str, list[float]]:
    by_kind: dict[str, list[float]] = {kind: [] for kind in KINDS}
    for query in queries:
        answer = org.client.post(f"/memory/stores/{index_id}/injection/preview", headers=org.admin,
                                 json={"subject": {"id": query.subject}, "input": query.text, "store_override": True})
        assert answer.status_code == 200, answer.text
        section = "organisation" if query.kind == "shared" else "about_this_person"
        lines = [refs.get(r["id"], "?") for r in answer.json()["records"] if r["section"] == section][:TOP]
        by_kind[query.kind].append(1.0 if set(query.gold) & set(lines) else 0.0)
    return by_kind


def row(label: str, by_kind: dict[str, list[float]]) -> str:
    every = [x for values in by_kind.values() for x in values]
    kinds = " | ".join(f"{statistics.mean(v):.3f}" if v else "-" for v in by_kind.values())
    return f"| {label} | {statistics.mean(every):.3f} | {kinds} |"


def main() -> None:
    logging.getLogger("httpx").setLevel(logging.WARNING)
    devset, held = build(), heldout().queries
    lines = ["| queries | top-5 | " + " | ".join(KINDS) + " |",
             "| --- | ---: | " + " | ".join("---:" for _ in KINDS) + " |"]
    with scratch_org() as (org, url):
        index_id, refs = load(org, devset, MODES["local"])
        analyser(url)()
        changed = org.client.patch(f"/memory/stores/{index_id}", headers=org.admin,
                                   json={"injection": {"rank": "relevance"}})
        assert changed.status_code == 200, changed.text
        lines.append(row("development", found_at(org, index_id, refs, devset.queries)))
        lines.append(row("held-out", found_at(org, index_id, refs, held)))
        # Between a change of model and the re-embedding job: no record has a vector of the index's setting.
        import psycopg
        from sqlalchemy.engine import make_url

        plain = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
        with psycopg.connect(plain, autocommit=True) as conn:
            conn.execute("UPDATE memory_records SET embedding_model = 'old/model/512' WHERE index_id = %s",
                         (index_id,))
        lines.append(row("development, no current vectors", found_at(org, index_id, refs, devset.queries)))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
