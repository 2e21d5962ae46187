"""Activity on the pages (against the live API): the overview's trends (DSH-2), the audit log's record changes
(DSH-8), and the records page telling "nothing yet" from "nothing matches" (DSH-3)."""

from __future__ import annotations

import json
from typing import Any

import polars as pl
from streamlit.testing.v1 import AppTest

from shared.client import CoreClient
from tests.dashboard.conftest import log_in, no_exception
from tests.helpers import Org, bearer


def _write(org: Org, index_id: str, text: str, person: str | None = None) -> str:
    response = org.client.post("/memory", json={"index_id": index_id, "type": "fact", "text": text},
                               headers=bearer(org.key, person) if person else org.full)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def charts(at: AppTest) -> dict[str, dict[str, int]]:
    """Each chart's counts by its colour field's values, keyed by the colour's title."""
    found = {}
    for chart in at.get("vega_lite_chart"):
        spec = json.loads(chart.proto.spec)
        counted = pl.read_ipc_stream(chart.proto.datasets[0].data.data)
        found[spec["encoding"]["color"]["title"]] = dict(zip(counted["name"], counted["count"], strict=True))
    return found


def test_dsh_2_overview_charts_records_written_and_messages_per_day(app: AppTest, org: Org,
                                                                    admin_client: CoreClient) -> None:
    index_id = admin_client.create_index({"name": "handbook"}).id
    record = _write(org, index_id, "Anna drinks tea", "anna")
    _write(org, index_id, "The office opens at eight")
    admin_client.update_memory(record, {"priority": "high"})
    body = {"items": [{"type": "message", "role": "user", "content": "Hallo"},
                      {"type": "message", "role": "assistant", "content": "Dag"}]}
    assert org.client.post("/threads", json=body, headers=bearer(org.key, "anna")).status_code == 201
    log_in(app, org.admin_email, org.admin_password)
    no_exception(app)
    shown = charts(app)
    assert shown["write"] == {"created": 2, "updated": 1}
    assert shown["role"] == {"user": 1, "assistant": 1}
    assert "audit.read" not in shown["action"] and shown["action"]["index.created"] == 1


def test_dsh_8_record_changes_say_who_changed_which_record(app: AppTest, org: Org,
                                                           admin_client: CoreClient) -> None:
    index_id = admin_client.create_index({"name": "handbook"}).id
    anna = _write(org, index_id, "Anna drinks tea", "anna")
    shared = _write(org, index_id, "The office opens at eight")
    admin_client.verify_memory(shared)
    admin_id = admin_client.login(org.admin_email, org.admin_password).admin.id
    log_in(app, org.admin_email, org.admin_password)
    app.switch_page("app_pages/audit_log.py").run()
    app.session_state["audit_view"] = "Record changes"
    app.run()
    no_exception(app)
    [changes] = [d.value for d in app.dataframe if "record" in d.value.columns]
    assert [(r["record"], r["action"], r["by"], r["owner"]) for r in changes.to_dict("records")] == [
        (shared, "verified", f"admin {admin_id}", "shared"), (shared, "created", f"key {org.key_id}", "shared"),
        (anna, "created", f"key {org.key_id}", "anna")]
    app.text_input(key="audit_changes_person").input("anna")
    app.button(key="audit_changes_apply").click().run()
    no_exception(app)
    [changes] = [d.value for d in app.dataframe if "record" in d.value.columns]
    assert list(changes["record"]) == [anna]
    app.multiselect(key="audit_changes_actions").select("verified")
    app.button(key="audit_changes_apply").click().run()
    assert not [d for d in app.dataframe if "record" in d.value.columns]
    assert "No record changes match these filters — clear a filter." in [i.value for i in app.info]


def test_dsh_3_records_page_tells_nothing_yet_from_nothing_matches(app: AppTest, org: Org,
                                                                  admin_client: CoreClient) -> None:
    log_in(app, org.admin_email, org.admin_password)
    app.switch_page("app_pages/records.py").run()
    no_exception(app)
    assert any(i.value.startswith("No records yet: records live in an index") for i in app.info)
    assert app.button(key="records_go_indexes").label == "Create an index"
    index_id = admin_client.create_index({"name": "handbook"}).id
    app.sidebar.button(key="refresh").click().run()
    assert any(i.value.startswith("No records yet. Applications write them with a key") for i in app.info)
    assert app.button(key="records_go_keys").label == "Create a key"
    _write(org, index_id, "The office opens at eight")
    app.sidebar.button(key="refresh").click().run()
    app.text_input(key="records_q").input("submarine")
    app.button(key="records_apply").click().run()
    no_exception(app)
    assert "No records match these filters — pick another store or clear a filter." in [i.value for i in app.info]


def test_dsh_3_records_table_shows_flags_and_expiry(app: AppTest, org: Org, admin_client: CoreClient) -> None:
    index_id = admin_client.create_index({"name": "handbook"}).id
    record = _write(org, index_id, "The office opens at eight")
    admin_client.verify_memory(record)
    admin_client.update_memory(record, {"expires_at": "2031-05-01T12:00:00+00:00"})
    log_in(app, org.admin_email, org.admin_password)
    app.switch_page("app_pages/records.py").run()
    no_exception(app)
    [table] = [d.value for d in app.dataframe if "effective" in d.value.columns]
    row: dict[str, Any] = table.to_dict("records")[0]
    assert list(row["flags"]) == ["verified"] and row["expires"] == "2031-05-01"
    # The record's detail: no change shown from stored when it has not decayed.
    app.text_input(key="records_open_id").input(record).run()
    [effective] = [m for m in app.metric if m.label == "Effective confidence"]
    assert effective.proto.delta == ""
