"""House rule 12 for the injection builder (INJ-13): the candidates statement is built once per shape, and every
value that changes per turn (person, store, filters' values, instant, input, bounds) travels as a parameter."""

from __future__ import annotations

from datetime import UTC, datetime

from backend.access.policy import Requester, default_policy, parse_policy
from backend.access.scope import Scope
from backend.domains.injection import repository as repo

HALF_LIVES = {"fact": 180.0, "preference": 90.0}
SECTIONS = ["commitments", "behaviour", "about_this_person", "organisation", "past_sessions"]


def _scope(person: str | None, attributes: dict[str, list[str]] | None = None) -> Scope:
    policy = parse_policy(default_policy())
    return Scope("org_a", Requester(person, attributes or {}), policy.indexes, policy.rules, unrestricted=False,
                 policy=policy)


def _fresh(scope: Scope, sel: repo.Selection, ranking: repo.Ranking) -> repo.Prepared:
    repo._statements.clear()
    return repo.candidates_statement(scope, HALF_LIVES, sel, SECTIONS, ranking)


def test_inj_13_two_turns_of_one_shape_compile_to_the_same_statement():
    first = (_scope("anna"), repo.Selection("idx_1", "anna", ["fact"], {"team": "a"}, 0.4,
                                            datetime(2026, 1, 1, tzinfo=UTC)),
             repo.Ranking("blend", "coffee or tea", [0.1, 0.2, 0.3], "hashing-v1"))
    second = (_scope("bob", {"team": ["b"]}),
              repo.Selection("idx_2", "bob", ["note", "lesson"], {"x": 1}, 0.9, datetime(2027, 5, 5, tzinfo=UTC)),
              repo.Ranking("blend", "budget", [0.9, 0.8, 0.7], "other-model"))
    a, b = _fresh(*first), _fresh(*second)
    assert a.sql == b.sql
    assert a.constants == b.constants  # no turn's value was frozen into the statement
    for value in ("anna", "bob", "idx_1", "idx_2", "coffee", "budget", "hashing-v1", "2026", "team"):
        assert value not in a.sql
    params = repo.candidates_params(second[0], HALF_LIVES, second[1], dict.fromkeys(SECTIONS, 60), SECTIONS,
                                    second[2])
    assert a.names <= params.keys()
    assert params["inj_person"] == "bob" and params["who_subject"] == "bob" and params["inj_index"] == "idx_2"


def test_inj_13_the_statement_is_reused_for_the_next_turn():
    repo._statements.clear()
    ranking = repo.Ranking("confidence", None, None)
    one = repo.candidates_statement(_scope("anna"), HALF_LIVES, repo.Selection("idx_1", "anna", [], {}, None),
                                    SECTIONS, ranking)
    two = repo.candidates_statement(_scope("carl"), HALF_LIVES, repo.Selection("idx_9", "carl", [], {}, None),
                                    SECTIONS, ranking)
    assert one is two
    nobody = repo.candidates_statement(_scope(None), HALF_LIVES, repo.Selection("idx_1", None, [], {}, None),
                                       ["commitments", "organisation"], ranking)
    assert nobody is not one
