"""Issue 17 item 2, PLT-8: the Python decision and the SQL clause agree on every row of every policy.

Hypothesis writes policy documents (permit and deny rules of every kind, with and without actions, label
matches naming the pseudo-label `subject`, `""` for absent, lists, and all four atoms), a requester (a person
with attributes, or nobody) and rows (personal and shared, labelled with strings, lists, empty lists and empty
strings, and unlabelled). For each example one statement evaluates the clause, literal and bound, on every row;
each must be TRUE or FALSE (never NULL) and equal `decide`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Integer, Text, column, create_engine, select, values
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Engine

from backend.access.policy import KIND_ACTIONS, Requester, decide, parse_policy
from backend.access.policy_sql import visible_clause, who_params
from backend.db.engine import normalise_url

PEOPLE = ["anna", "bob", "a_b", "a%b", "A_B", "\u0430nna", "anna "]
LABELS = ["department", "participants", "audience", "subject", "d%"]
VALUES = ["payroll", "sales", "anna", "bob", "a_b", "%", "", "A_B"]

label_value = st.one_of(st.sampled_from(VALUES), st.lists(st.sampled_from(VALUES), max_size=3))
row_labels = st.dictionaries(st.sampled_from(LABELS), label_value, max_size=3)
rows = st.lists(st.tuples(st.one_of(st.none(), st.sampled_from(PEOPLE)), row_labels), min_size=1, max_size=12)

atom = st.one_of(
    st.just({"atom": "subject_is_owner"}), st.just({"atom": "no_subject"}),
    st.builds(lambda label: {"atom": "label_is_subject", "label": label}, st.sampled_from(LABELS)),
    st.builds(lambda label, attribute: {"atom": "label_among", "label": label, "attribute": attribute},
              st.sampled_from(LABELS), st.sampled_from(["department", "team"])))
match_value = st.one_of(st.sampled_from(VALUES + PEOPLE),
                        st.lists(st.sampled_from(VALUES + PEOPLE), min_size=1, max_size=3))


@st.composite
def rule(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(sorted(KIND_ACTIONS)))
    doc: dict[str, Any] = {"id": "r", "effect": draw(st.sampled_from(["permit", "deny"])), "kind": kind}
    if draw(st.booleans()):
        doc["actions"] = draw(st.lists(st.sampled_from(sorted(KIND_ACTIONS[kind])), min_size=1, unique=True))
    labels = draw(st.dictionaries(st.sampled_from(LABELS), match_value, max_size=2))
    if labels:
        doc["match"] = {"labels": labels}
    when = draw(st.lists(atom, max_size=2))
    if when:
        doc["when"] = when
    return doc


@st.composite
def policy(draw: st.DrawFn) -> dict[str, Any]:
    rules = draw(st.lists(rule(), min_size=1, max_size=5))
    for i, r in enumerate(rules):
        r["id"] = f"r{i}"
    return {"indexes": ["*"], "rules": rules}


requester = st.one_of(
    st.just(Requester(None)),
    st.builds(Requester, st.sampled_from(PEOPLE),
              st.dictionaries(st.sampled_from(["department", "team"]),
                              st.lists(st.sampled_from(VALUES), max_size=3), max_size=2)))

# Rows every example also checks: the shapes where a NULL or an empty list could make SQL and Python part.
CORNERS: list[tuple[str | None, dict[str, Any]]] = [
    (None, {}), ("anna", {}), (None, {"department": []}), ("bob", {"participants": []}),
    (None, {"department": ""}), ("anna", {"participants": ["anna", "bob"]}), (None, {"subject": "anna"}),
    (None, {"department": ["payroll", "payroll"]}),
]


@pytest.fixture(scope="module")
def engine(database_url: str) -> Iterator[Engine]:
    made = create_engine(normalise_url(database_url))
    yield made
    made.dispose()


class Stats:
    examples = 0
    rows = 0
    disagreements = 0


def _check(engine: Engine, document: dict[str, Any], who: Requester, objects: list[tuple[str | None, dict[str, Any]]],
           stats: type[Stats]) -> None:
    rules = parse_policy(document).rules
    objects = objects + CORNERS
    table = values(column("n", Integer), column("owner", Text), column("labels", JSONB), name="objs").data(
        [(i, owner, labels) for i, (owner, labels) in enumerate(objects)])
    stats.examples += 1
    pairs = [(kind, action) for kind, actions in KIND_ACTIONS.items() for action in sorted(actions)]
    columns = []
    for i, (kind, action) in enumerate(pairs):
        columns.append(visible_clause(rules, kind, action, who, table.c.owner, table.c.labels).label(f"l{i}"))
        columns.append(visible_clause(rules, kind, action, who, table.c.owner, table.c.labels,
                                      bound=True).label(f"b{i}"))
    with engine.connect() as conn:
        for row in conn.execute(select(table.c.n, *columns).order_by(table.c.n), who_params(rules, who)):
            owner, labels = objects[row[0]]
            for i, (kind, action) in enumerate(pairs):
                expected = decide(rules, kind, action, who, owner, labels)
                lit, bnd = row[1 + 2 * i], row[2 + 2 * i]
                stats.rows += 1
                if lit is not expected or bnd is not expected:
                    stats.disagreements += 1
                    raise AssertionError(
                        f"{kind}/{action} for {who}: row owner={owner!r} labels={json.dumps(labels)} "
                        f"decide={expected} sql={lit} bound={bnd}\npolicy={json.dumps(document)}")


def _property(engine: Engine, examples: int, report: Any) -> None:
    stats = type("S", (Stats,), {})

    @settings(max_examples=examples, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(policy(), requester, rows)
    def agree(document: dict[str, Any], who: Requester, objects: list[tuple[str | None, dict[str, Any]]]) -> None:
        _check(engine, document, who, objects, stats)

    agree()
    report(examples=stats.examples, rows_decided=stats.rows, disagreements=stats.disagreements)
    assert stats.examples >= examples


def test_plt_8_decide_equals_sql_clause(engine: Engine, report: Any) -> None:
    _property(engine, 150, report)


@pytest.mark.slow
def test_plt_8_decide_equals_sql_clause_long(engine: Engine, report: Any) -> None:
    _property(engine, 2000, report)


def test_plt_8_an_empty_label_list_is_an_absent_label(engine: Engine, report: Any) -> None:
    """Regression: `{"department": []}` holds no value; Python read it as absent, SQL as present, so a rule
    matching `department: ""` (absent) permitted or denied such a row differently in lists and in writes."""
    stats = type("S", (Stats,), {})
    for effect in ("permit", "deny"):
        document = {"rules": [{"id": "all", "effect": "permit", "kind": "memory_record"},
                              {"id": "x", "effect": effect, "kind": "memory_record",
                               "match": {"labels": {"department": ""}}}]}
        _check(engine, document, Requester("anna"), [(None, {"department": []}), ("anna", {"department": []})], stats)
    report(examples=stats.examples, rows_decided=stats.rows, disagreements=stats.disagreements)
