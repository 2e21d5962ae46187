"""DSH-9: the proposals page lists what the maintenance pass proposed with the records it rests on, applies one
(the shared record shows, with the store's promotion labels) and dismisses another; an empty page says what to do."""

from __future__ import annotations

from tests.dashboard.conftest import log_in, no_exception
from tests.extraction.maintenance_util import improvements_on, maintain, store_settings, write
from tests.extraction.util import new_store
from tests.helpers import bearer

OFFICE = "The office closes at six."
PARKING = "Visitors park behind the building."


def _open(app, org):
    log_in(app, org.admin_email, org.admin_password)
    app.switch_page("app_pages/proposals.py").run()
    no_exception(app)
    assert [t.value for t in app.title] == ["Proposals"]
    return app


def test_dsh_9_apply_writes_the_shared_record_and_dismiss_ends_a_proposal(app, org, client, scripted, run_jobs,
                                                                          database_url):
    improvements_on(org, helper=False)
    index_id = new_store(org)
    store_settings(org, index_id, promotion={"enabled": True, "labels": {"audience": "everyone"}})
    for person in ("anna", "bob"):
        write(org, index_id, person, OFFICE)
        write(org, index_id, person, PARKING)
    maintain(database_url, run_jobs)
    at = _open(app, org)
    table = at.dataframe(key="proposals_table").value
    assert sorted(table["text"].to_list()) == sorted([OFFICE, PARKING])
    assert set(table["people"].to_list()) == {2}
    shown = at.subheader[0].value
    evidence = at.dataframe[1].value  # the table, then the evidence
    assert sorted(evidence["person"].to_list()) == ["anna", "bob"] and set(evidence["text"]) == {shown}
    assert any("labelled audience=everyone" in c.value for c in at.caption)

    at.button(key="proposals_apply").click().run()
    no_exception(at)
    assert any(s.value.startswith("Applied: shared record `mem_") for s in at.success)
    record_id = next(s.value for s in at.success if s.value.startswith("Applied")).split("`")[1]
    shared = client.get(f"/memory/{record_id}", headers=org.full).json()
    assert (shared["subject"], shared["text"], shared["labels"]) == (None, shown, {"audience": "everyone"})
    # The Records page then shows it among the shared records.
    at.switch_page("app_pages/records.py").run()
    at.selectbox(key="records_owner").select("shared only")
    at.button(key="records_apply").click().run()
    no_exception(at)
    listed = [d.value for d in at.dataframe if "effective" in d.value.columns]
    assert len(listed) == 1 and list(listed[0]["id"]) == [record_id]
    at.switch_page("app_pages/proposals.py").run()
    no_exception(at)
    other = at.subheader[0].value
    assert other != shown and len(at.dataframe(key="proposals_table").value) == 1

    at.button(key="proposals_dismiss").click().run()
    no_exception(at)
    assert any(s.value.startswith("Dismissed") for s in at.success)
    assert any(i.value.startswith("No open proposals") for i in at.info)
    at.radio(key="proposals_status").set_value("all").run()
    no_exception(at)
    decided = dict(zip(*(at.dataframe(key="proposals_table").value[c].to_list() for c in ("text", "status")),
                       strict=True))
    assert decided == {shown: "applied", other: "dismissed"}
    # Her own record stays hers.
    mine = client.get("/memory", params={"index_id": index_id}, headers=bearer(org.key, "anna")).json()["data"]
    assert {r["text"] for r in mine if r["subject"] == "anna"} == {OFFICE, PARKING}


def test_dsh_9_no_proposals_says_how_they_come_and_opens_store_settings(app, org):
    new_store(org)
    at = _open(app, org)
    assert any(i.value.startswith("No open proposals for any store") for i in at.info)
    at.button(key="proposals_go_stores").click().run()
    no_exception(at)
    assert [t.value for t in at.title] == ["Stores"]
