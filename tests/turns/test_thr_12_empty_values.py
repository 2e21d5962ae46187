"""THR-12 and TRN-1: an empty string in a turn's optional field is a value to check, never taken for the field
left out: `working_state_from: ""` gets the answers POST /threads gives it, and `timezone: ""` is no time zone."""

from __future__ import annotations

from typing import Any

from tests.helpers import Org, assert_error
from tests.turns.conftest import anna


def _nothing_ran(scripted: Any, db: Any) -> None:
    assert scripted.requests == []
    assert db.execute("SELECT (SELECT count(*) FROM threads), (SELECT count(*) FROM responses)").fetchone() == (0, 0)


def test_thr_12_an_empty_working_state_from_is_refused_as_post_threads_refuses_it(client: Any, org: Org,
                                                                                  scripted: Any, db: Any) -> None:
    turn = {"model": "scripted", "input": "Hi", "working_state_from": ""}
    # a person: no thread of hers has that id (404 at the field), on both routes
    refused = assert_error(client.post("/responses", headers=anna(org), json=turn), 404, "not_found",
                           "working_state_from")
    opened = assert_error(client.post("/threads", headers=anna(org), json={"working_state_from": ""}), 404,
                          "not_found", "working_state_from")
    assert refused["message"] == opened["message"]
    # nobody named: the state belongs to a person, so she must be named (400 at the field), on both routes
    refused = assert_error(client.post("/responses", headers=org.full, json=turn), 400, "subject_required",
                           "working_state_from")
    opened = assert_error(client.post("/threads", headers=org.full, json={"working_state_from": ""}), 400,
                          "subject_required", "working_state_from")
    assert refused["message"] == opened["message"]
    _nothing_ran(scripted, db)


def test_trn_1_an_empty_timezone_is_refused_not_replaced_by_the_organisation_s(client: Any, org: Org,
                                                                               scripted: Any, db: Any) -> None:
    response = client.post("/responses", headers=anna(org), json={"model": "scripted", "input": "Hi", "timezone": ""})
    body = assert_error(response, 422, "validation_failed", "timezone")
    assert "IANA time zone" in body["message"]
    _nothing_ran(scripted, db)
