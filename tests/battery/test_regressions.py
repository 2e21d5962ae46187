"""Regression tests for the defects the battery (issue 17) found, one per defect, each on the route that had it."""

from __future__ import annotations

from typing import Any

import pytest

from tests.helpers import Org, assert_error, bearer, bootstrap_org


@pytest.fixture(scope="module")
def org(client: Any, settings: Any, database_url: str) -> Org:
    return bootstrap_org(client, settings, database_url, "Regressions", "admin@regressions.test")


@pytest.mark.parametrize("value", ["31", "2.00001", "1e9", "yesterday"])
def test_plt_15_a_query_instant_is_rfc_3339_never_unix_time(client: Any, org: Org, value: str) -> None:
    # msgspec read `after=31` as 31 seconds after 1970 and the list answered 200
    for route in ("/memory", "/memory/stats", "/memory/export"):
        assert_error(client.get(route, params={"after": value}, headers=org.full), 422, "validation_failed", "after")
    assert client.get("/memory", params={"after": "2025-01-31T09:00:00+01:00"}, headers=org.full).status_code == 200


def test_plt_14_an_overlong_time_zone_is_422_not_500(client: Any, org: Org) -> None:
    # ZoneInfo raised OSError (file name too long), which no handler mapped: 500
    zone = "Europe/" + "x" * 300
    assert_error(client.get("/tools", params={"source": "memory", "timezone": zone}, headers=org.full), 422,
                 param="timezone")


@pytest.mark.parametrize("params", [{"to": "0001-01-01"}, {"from": "9999-12-31", "to": "9999-12-31"}])
def test_plt_18_usage_days_near_the_calendar_ends_are_422_not_500(client: Any, org: Org,
                                                                   params: dict[str, str]) -> None:
    # `to=0001-01-01` made `to - 29 days` overflow: 500
    assert_error(client.get("/usage", params=params, headers=org.admin), 422, "validation_failed")


def test_plt_16_the_document_lists_export_media_types_and_conflicts(client: Any) -> None:
    paths = client.get("/schema/openapi.json").json()["paths"]
    export = paths["/memory/export"]["get"]["responses"]["200"]["content"]
    assert set(export) == {"application/vnd.apache.parquet", "text/csv; charset=utf-8", "application/x-ndjson"}
    assert "409" in paths["/indexes"]["post"]["responses"]  # an index name taken
    assert "413" in paths["/memory"]["post"]["responses"]
    assert "429" in paths["/memory"]["get"]["responses"]
    assert "409" not in paths["/memory"]["get"]["responses"]


def test_plt_14_a_body_nested_10000_deep_is_422_not_500(client: Any, org: Org) -> None:
    # msgspec's decoder raised RecursionError, which reached the handler of unexpected errors: 500
    deep = "[" * 10_000 + "]" * 10_000
    for method, route, body in (("POST", "/threads", '{"metadata": DEEP}'),
                                ("POST", "/memory", '{"index_id": "idx_x", "type": "fact", "text": DEEP}')):
        response = client.request(method, route, content=body.replace("DEEP", deep),
                                  headers={**org.full, "content-type": "application/json"})
        assert_error(response, 422, "validation_failed")


def test_trn_9_a_message_with_a_field_besides_role_and_content_is_422(client: Any, org: Org) -> None:
    # /messages read `role` and `content` and ran the turn whatever else a message held (`id`, `subject`, …)
    for name in ("id", "subject", "created_at"):
        body = {"max_tokens": 10, "model": "none", "messages": [{"role": "user", "content": "hi", name: "x"}]}
        assert_error(client.post("/messages", json=body, headers=org.full), 422, "validation_failed",
                     f"messages[0].{name}")


def test_plt_12_a_write_refused_for_a_capability_is_one_denied_audit_row(client: Any, org: Org, db: Any) -> None:
    # a 403 `capability_missing` (or `admin_required`) on a write left no trace in the audit trail
    plain = org.make_key(["knowledge"], name="no-threads-no-memory")
    count = "SELECT count(*) FROM audit_events WHERE org_id = %s"
    before = db.execute(count, [org.org_id]).fetchone()[0]
    assert_error(client.post("/memory", headers=bearer(plain["secret"], "anna"),
                             json={"index_id": "idx_x", "type": "fact", "text": "t"}), 403, "capability_missing")
    assert_error(client.get("/memory", headers=bearer(plain["secret"])), 403, "capability_missing")  # a read: none
    rows = db.execute("SELECT action, outcome, actor_type, actor_id, object_type, detail FROM audit_events "
                      "WHERE org_id = %s ORDER BY seq OFFSET %s", [org.org_id, before]).fetchall()
    assert [r[:5] for r in rows] == [("request.denied", "denied", "key", plain["id"], "route")]
    assert rows[0][5] == {"route": "POST /memory", "code": "capability_missing", "capability": "memory"}


def test_plt_14_a_nul_in_a_turn_field_read_by_a_prepared_statement_is_422_not_500(client: Any, org: Org) -> None:
    # `agent_id` reaches a statement run on the driver's own connection, whose psycopg.DataError was not
    # recognised as the database refusing a NUL: 500
    response = client.post("/responses", json={"agent_id": "agt_\x00", "input": "hi"}, headers=org.full)
    assert_error(response, 422, "validation_failed")
