"""PLT-8/PLT-9: the policy engine, table-driven; the Python decision and the SQL clause must agree."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import column, create_engine, select, table, text
from sqlalchemy.dialects.postgresql import JSONB

from backend.access.policy import (
    Requester,
    decide,
    default_policy,
    parse_policy,
    permits_every_row,
    reads_own_and_shared_only,
)
from backend.access.policy_sql import visible_clause, who_params
from backend.db.engine import normalise_url
from backend.errors import ValidationFailed

ANNA = Requester("anna")
BOB = Requester("bob")
NOBODY = Requester(None)
PAYROLL_ANNA = Requester("anna", {"department": ["payroll"]})

# Objects: (name, owner, labels)
OBJECTS: list[tuple[str, str | None, dict[str, Any]]] = [
    ("anna-own", "anna", {}),
    ("bob-own", "bob", {}),
    ("shared", None, {}),
    ("shared-payroll", None, {"department": "payroll"}),
    ("shared-sales", None, {"department": ["sales", "support"]}),
    ("bob-with-anna-participant", "bob", {"participants": ["anna", "carl"]}),
    ("anna-labelled-payroll", "anna", {"department": "payroll"}),
]

DEFAULT = default_policy()["rules"]


def rule(effect: str, kind: str = "memory_record", **extra: Any) -> dict[str, Any]:
    return {"id": f"r{abs(hash((effect, kind, repr(extra)))) % 10**8}", "effect": effect, "kind": kind, **extra}


CASES: list[tuple[str, list[dict[str, Any]], str, str, Requester, set[str]]] = [
    # memory-record-own + memory-record-shared: a person sees her own and the shared ones
    ("default: anna sees own and shared", DEFAULT, "memory_record", "see", ANNA,
     {"anna-own", "shared", "shared-payroll", "shared-sales", "anna-labelled-payroll"}),
    ("default: bob sees his own, never anna's", DEFAULT, "memory_record", "see", BOB,
     {"bob-own", "shared", "shared-payroll", "shared-sales", "bob-with-anna-participant"}),
    # memory-record-shared is `see` only: a person writes only her own
    ("default: anna writes only her own", DEFAULT, "memory_record", "write", ANNA,
     {"anna-own", "anna-labelled-payroll"}),
    # memory-record-nobody-named: a request naming nobody reaches every record
    ("default: nobody-named reaches all", DEFAULT, "memory_record", "delete", NOBODY, {o[0] for o in OBJECTS}),
    ("default: thread rules mirror memory", DEFAULT, "thread", "see", ANNA,
     {"anna-own", "shared", "shared-payroll", "shared-sales", "anna-labelled-payroll"}),
    ("default has no memory_write rule", DEFAULT, "memory_write", "write", ANNA, set()),
    ("deny beats permit", [*DEFAULT, rule("deny", match={"labels": {"department": "payroll"}})],
     "memory_record", "see", ANNA, {"anna-own", "shared", "shared-sales"}),
    ("atom subject_is_owner", [rule("permit", when=[{"atom": "subject_is_owner"}])], "memory_record", "see", BOB,
     {"bob-own", "bob-with-anna-participant"}),
    ("atom subject_is_owner never for nobody", [rule("permit", when=[{"atom": "subject_is_owner"}])],
     "memory_record", "see", NOBODY, set()),
    ("atom no_subject", [rule("permit", when=[{"atom": "no_subject"}])], "memory_record", "see", ANNA, set()),
    ("atom label_is_subject", [rule("permit", kind="thread",
                                    when=[{"atom": "label_is_subject", "label": "participants"}])],
     "thread", "write", ANNA, {"bob-with-anna-participant"}),
    ("atom label_among (string label)", [rule("permit", match={"labels": {"subject": ""}},
                                              when=[{"atom": "label_among", "label": "department",
                                                     "attribute": "department"}])],
     "memory_record", "see", PAYROLL_ANNA, {"shared-payroll"}),
    ("atom label_among (list label)", [rule("permit", when=[{"atom": "label_among", "label": "department",
                                                             "attribute": "department"}])],
     "memory_record", "see", Requester("zed", {"department": ["support"]}), {"shared-sales"}),
    ("label_among without the attribute matches nothing",
     [rule("permit", when=[{"atom": "label_among", "label": "department", "attribute": "department"}])],
     "memory_record", "see", ANNA, set()),
    ("match labels: empty string means absent", [rule("permit", match={"labels": {"department": ""}})],
     "memory_record", "see", ANNA, {"anna-own", "bob-own", "shared", "bob-with-anna-participant"}),
    ("match labels: list means any of", [rule("permit", match={"labels": {"department": ["sales", "payroll"]}})],
     "memory_record", "see", ANNA, {"shared-payroll", "shared-sales", "anna-labelled-payroll"}),
    ("match pseudo-label subject names the owner", [rule("permit", match={"labels": {"subject": "bob"}})],
     "memory_record", "see", ANNA, {"bob-own", "bob-with-anna-participant"}),
    ("actions narrow a rule", [rule("permit", actions=["see"])], "memory_record", "delete", NOBODY, set()),
    ("a rule of another kind does not apply", [rule("permit", kind="thread")], "memory_record", "see", NOBODY,
     set()),
    ("a personal label never shares a record", DEFAULT, "memory_record", "see", PAYROLL_ANNA,
     {"anna-own", "shared", "shared-payroll", "shared-sales", "anna-labelled-payroll"}),
    # Deny rules are negated in SQL: a test that is NULL on a shared row (owner NULL) must still read as
    # "does not match", or NOT(...) hides every shared row.
    ("deny naming an owner keeps shared rows (person)", [*DEFAULT, rule("deny", match={"labels": {"subject": "bob"}})],
     "memory_record", "see", ANNA, {"anna-own", "shared", "shared-payroll", "shared-sales", "anna-labelled-payroll"}),
    ("deny naming an owner keeps shared rows (nobody)",
     [*DEFAULT, rule("deny", match={"labels": {"subject": "bob"}})], "memory_record", "see", NOBODY,
     {"anna-own", "shared", "shared-payroll", "shared-sales", "anna-labelled-payroll"}),
    ("deny naming owners or shared", [*DEFAULT, rule("deny", match={"labels": {"subject": ["bob", ""]}})],
     "memory_record", "see", NOBODY, {"anna-own", "anna-labelled-payroll"}),
    ("deny subject_is_owner keeps shared rows", [*DEFAULT, rule("deny", when=[{"atom": "subject_is_owner"}])],
     "memory_record", "see", ANNA, {"shared", "shared-payroll", "shared-sales"}),
    ("deny subject_is_owner never matches for nobody",
     [*DEFAULT, rule("deny", when=[{"atom": "subject_is_owner"}])], "memory_record", "see", NOBODY,
     {o[0] for o in OBJECTS}),
    ("deny on a missing label", [*DEFAULT, rule("deny", match={"labels": {"department": ""}})],
     "memory_record", "see", NOBODY, {"shared-payroll", "shared-sales", "anna-labelled-payroll"}),
    ("deny on a label rows lack", [*DEFAULT, rule("deny", match={"labels": {"department": "payroll"}})],
     "memory_record", "see", NOBODY, {"anna-own", "bob-own", "shared", "shared-sales", "bob-with-anna-participant"}),
    ("deny label_is_subject on rows without the label",
     [*DEFAULT, rule("deny", when=[{"atom": "label_is_subject", "label": "participants"}])],
     "memory_record", "see", ANNA, {"anna-own", "shared", "shared-payroll", "shared-sales", "anna-labelled-payroll"}),
    ("deny label_among on shared and personal rows",
     [*DEFAULT, rule("deny", when=[{"atom": "label_among", "label": "department", "attribute": "department"}])],
     "memory_record", "see", PAYROLL_ANNA, {"anna-own", "shared", "shared-sales"}),
    ("deny an owner and a label together", [*DEFAULT, rule("deny", match={"labels": {"subject": "anna",
                                                                                    "department": "payroll"}})],
     "memory_record", "see", ANNA, {"anna-own", "shared", "shared-payroll", "shared-sales"}),
]


@pytest.fixture(scope="module")
def sql_engine(postgres, template):  # type: ignore[no-untyped-def]
    engine = create_engine(normalise_url(postgres.url_for(template)))
    yield engine
    engine.dispose()


def _sql_visible(engine: Any, rules: Any, kind: str, action: str, who: Requester) -> set[str]:
    objs = table("objs", column("name"), column("owner"), column("labels", JSONB))
    with engine.connect() as conn:
        conn.execute(text("CREATE TEMP TABLE objs (name text, owner text, labels jsonb NOT NULL)"))
        for name, owner, labels in OBJECTS:
            conn.execute(text("INSERT INTO objs VALUES (:n, :o, CAST(:l AS jsonb))"),
                         {"n": name, "o": owner, "l": __import__("json").dumps(labels)})
        clause = visible_clause(rules, kind, action, who, objs.c.owner, objs.c.labels)
        found = {row[0] for row in conn.execute(select(objs.c.name).where(clause))}
        # Two-valued on every row: a NULL would turn into "hidden" under a NOT, whatever Python decides.
        unknown = {row[0] for row in conn.execute(select(objs.c.name).where(clause.is_(None)))}
        assert unknown == set()
        # The same clause with the person's values as parameters (one statement for every person) agrees.
        bound = visible_clause(rules, kind, action, who, objs.c.owner, objs.c.labels, bound=True)
        assert {row[0] for row in conn.execute(select(objs.c.name).where(bound),
                                               who_params(rules, who))} == found
        conn.rollback()
    return found


@pytest.mark.parametrize(("title", "raw_rules", "kind", "action", "who", "expected"), CASES,
                         ids=[c[0] for c in CASES])
def test_plt_8_9_policy_table(sql_engine, title, raw_rules, kind, action, who, expected):  # type: ignore[no-untyped-def]
    rules = parse_policy({"indexes": ["*"], "rules": raw_rules}).rules
    in_python = {name for name, owner, labels in OBJECTS if decide(rules, kind, action, who, owner, labels)}
    assert in_python == expected
    assert _sql_visible(sql_engine, rules, kind, action, who) == expected
    # The shortcut that lets a statement leave the clause out is never wrong: when it says every row is
    # permitted, every object is; it says so for the default policy naming nobody.
    if permits_every_row(rules, kind, action, who):
        assert expected == {o[0] for o in OBJECTS}
    if raw_rules is DEFAULT and who is NOBODY and kind in ("memory_record", "thread"):
        assert permits_every_row(rules, kind, action, who)
    # Nor the one that lets a search take the shared records alone through their own index: when it says a
    # person reaches only her own objects and the shared ones, she does; it says so for the default policy.
    owners = {o[0]: o[1] for o in OBJECTS}
    if reads_own_and_shared_only(rules, kind, action, who):
        assert all(owners[name] in (None, who.subject_id) for name in expected)
    if raw_rules is DEFAULT and who.subject_id is not None:
        assert reads_own_and_shared_only(rules, kind, action, who)


def test_permits_every_row_needs_a_rule_without_conditions_and_no_deny():
    def every(raw_rules: list[dict[str, Any]], who: Requester = NOBODY) -> bool:
        return permits_every_row(parse_policy({"rules": raw_rules}).rules, "thread", "see", who)

    assert every(DEFAULT)
    assert every([rule("permit", kind="thread")], ANNA)  # no condition at all: everyone sees every thread
    assert not every(DEFAULT, ANNA)  # a person sees her own and the shared ones only
    assert not every([*DEFAULT, rule("deny", kind="thread", match={"labels": {"x": "y"}})])
    assert not every([rule("permit", kind="thread", match={"labels": {"subject": ""}})])
    assert not every([rule("permit", kind="thread", actions=["write"])])
    assert not every([])


def test_reads_own_and_shared_only_needs_every_permit_bounded_to_her_or_to_no_owner():
    def bounded(raw_rules: list[dict[str, Any]], who: Requester = ANNA) -> bool:
        return reads_own_and_shared_only(parse_policy({"rules": raw_rules}).rules, "memory_record", "see", who)

    assert bounded(DEFAULT)
    assert not bounded(DEFAULT, NOBODY)  # a request naming nobody is not one person
    assert bounded([*DEFAULT, rule("deny", match={"labels": {"department": "payroll"}})])  # denies only take away
    assert not bounded([*DEFAULT, rule("permit", when=[{"atom": "label_is_subject", "label": "participants"}])])
    assert not bounded([*DEFAULT, rule("permit", match={"labels": {"department": "payroll"}})])
    assert not bounded([*DEFAULT, rule("permit", match={"labels": {"subject": ["", "bob"]}})])
    assert not bounded([rule("permit")])  # no condition: everybody's records


@pytest.mark.parametrize(("document", "param"), [
    ({"rules": [{"id": "a", "effect": "permit", "kind": "memory_record", "when": [{"atom": "zzz"}]}]},
     "policy.rules[0].when[0].atom"),
    ({"rules": [{"id": "a", "effect": "permit", "kind": "memory_thing"}]}, "policy.rules[0].kind"),
    ({"rules": [{"id": "a", "effect": "allow", "kind": "thread"}]}, "policy.rules[0].effect"),
    ({"rules": [{"id": "a", "effect": "permit", "kind": "thread", "actions": ["read"]}]}, "policy.rules[0].actions[0]"),
    ({"rules": [{"id": "a", "effect": "permit", "kind": "thread", "colour": "red"}]}, "policy.rules[0].colour"),
    ({"rules": [{"id": "a", "effect": "permit", "kind": "thread",
                 "when": [{"atom": "label_among", "label": "x"}]}]}, "policy.rules[0].when[0].attribute"),
    ({"rules": [{"id": "a", "effect": "permit", "kind": "thread", "when": [{"atom": "no_subject", "label": "x"}]}]},
     "policy.rules[0].when[0].label"),
    ({"indexes": ["books"]}, "policy.indexes[0]"),
    ({"settings": {"subjects_required": "yes"}}, "policy.settings.subjects_required"),
    ({"settings": {"colour": 1}}, "policy.settings.colour"),
    ({"extra": 1}, "policy.extra"),
])
def test_plt_8_unknown_kinds_atoms_fields_name_the_path(document, param):  # type: ignore[no-untyped-def]
    with pytest.raises(ValidationFailed) as raised:
        parse_policy(document)
    assert raised.value.param == param


def test_plt_9_default_rules_are_the_six_named_ones():
    assert [r["id"] for r in default_policy()["rules"]] == [
        "memory-record-own", "memory-record-shared", "memory-record-nobody-named",
        "thread-own", "thread-shared-see", "thread-nobody-named"]
    assert default_policy()["indexes"] == ["*"]
