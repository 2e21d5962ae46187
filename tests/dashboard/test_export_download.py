"""DSH-10, DSH-11: the records page exports the current filter through the API's export route."""

from __future__ import annotations

import json

from dashboard.data import records
from shared.client import CoreClient
from shared.schemas.memory import MemoryQuery
from tests.dashboard.conftest import log_in
from tests.helpers import bearer


def _records(client, org):
    index_id = client.post("/indexes", headers=org.full, json={"name": "support"}).json()["id"]
    for subject, text in (("anna", "Anna likes tea"), (None, "Office opens at nine"), ("bob", "Bob cycles")):
        headers = bearer(org.key, subject=subject) if subject else org.full
        assert client.post("/memory", headers=headers, json={"index_id": index_id, "type": "fact",
                                                            "text": text}).status_code == 201
    return index_id


def test_dsh_10_export_file_holds_exactly_the_filtered_records(live_api, org, client):
    index_id = _records(client, org)
    with CoreClient(live_api) as api:
        api.login(org.admin_email, org.admin_password)
        everyone = records.export_file(api, MemoryQuery(index_id=index_id), "ndjson")
        anna = records.export_file(api, MemoryQuery(index_id=index_id, subject="anna"), "ndjson")
        shared = records.export_file(api, MemoryQuery(index_id=index_id, shared=True), "ndjson")
    texts = lambda blob: sorted(json.loads(line)["text"] for line in blob.decode().splitlines() if line)  # noqa: E731
    assert texts(everyone) == ["Anna likes tea", "Bob cycles", "Office opens at nine"]
    assert texts(anna) == ["Anna likes tea"]
    assert texts(shared) == ["Office opens at nine"]
    events = client.get("/audit?action=memory.export", headers=org.admin).json()["data"]
    assert len(events) == 3


def test_dsh_10_records_page_prepares_a_download(app, org, client):
    _records(client, org)
    log_in(app, org.admin_email, org.admin_password)
    app.switch_page("app_pages/records.py").run()
    assert not app.exception
    app.radio(key="records_export_format").set_value("csv").run()
    app.button(key="records_export_prepare").click().run()
    assert not app.exception, [e.value for e in app.exception]
    assert [e.value for e in app.error] == []
    fmt, blob = app.session_state["records_export"]
    assert fmt == "csv" and b"Office opens at nine" in blob and b"Anna likes tea" in blob
