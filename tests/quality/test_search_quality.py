"""MEM-13 on the development set: a subset of its queries (every sixth of each kind) against all of its records,
in the three modes. `make eval-search` runs every query and prints the table; here the floors keep the numbers
from sliding back, and no mode may ever show a person another person's record."""

from __future__ import annotations

from typing import Any

from tests.quality.devset import build, subset
from tests.quality.evaluate import _mean, analyser, evaluate, table


def test_mem_13_search_quality_on_the_development_set(org: Any, database_url: str) -> None:
    devset = subset(build(), 6)
    [results] = evaluate(org, devset, analyser(database_url))
    print(table(results))
    assert {mode: result.leaks for mode, result in results.items()} == {"full text only": 0, "hashing": 0, "local": 0}
    text, local = results["full text only"], results["local"]
    # Words find what shares a word (stems, no stop words), and nothing else.
    assert _mean(text.by_kind["lexical"].recall5) == 1.0
    assert _mean(text.by_kind["paraphrase"].recall5) < 0.2 and _mean(text.by_kind["cross-lingual"].recall5) < 0.2
    # The local model finds meaning, across English and Dutch.
    assert _mean(local.by_kind["lexical"].recall5) == 1.0
    # Floors a little under what the subset measured when they were set (paraphrase 0.68, cross-lingual 0.75,
    # all 0.78; the whole set is in docs/decisions.md): the model and the data are fixed, so only a change of
    # the search can move them.
    assert _mean(local.by_kind["paraphrase"].recall5) >= 0.6
    assert _mean(local.by_kind["cross-lingual"].recall5) >= 0.7
    assert _mean(local.overall.recall5) >= 0.75
    assert _mean(local.overall.empty) == 0.0
