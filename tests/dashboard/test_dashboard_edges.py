"""The dashboard's edges: the store editor's refusals and what it sends (DSH-4), the records page on input
and data the API can hold (DSH-1, DSH-3), odd but valid records and threads, and an operator's organisation switch."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from litestar.testing import TestClient
from streamlit.testing.v1 import AppTest

from backend.app import create_app
from backend.config import Settings
from shared.client import CoreClient
from tests.dashboard.conftest import log_in, no_exception
from tests.extraction.maintenance_util import improvements_on
from tests.helpers import Org, bearer


def errors(at: AppTest) -> list[str]:
    return [e.value for e in at.error]


def exceptions(at: AppTest) -> list[str]:
    return [str(e.value) for e in at.exception]


@pytest.fixture
def store_id(org: Org) -> str:
    response = org.client.post("/indexes", json={"name": "handbook"}, headers=org.admin)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def open_page(at: AppTest, org: Org, page: str) -> AppTest:
    log_in(at, org.admin_email, org.admin_password)
    at.switch_page(page).run()
    no_exception(at)
    return at


def store_settings(org: Org, index_id: str) -> dict[str, Any]:
    response = org.client.get(f"/memory/stores/{index_id}", headers=org.admin)
    assert response.status_code == 200, response.text
    return dict(response.json())


# ---------------------------------------------------------------- DSH-4: the store editor


def test_dsh_4_a_refusal_naming_a_label_inside_promotion_labels_is_shown(app: AppTest, org: Org,
                                                                         store_id: str) -> None:
    """The API refuses a promotion label the vocabulary no longer has with `param` `promotion.labels.<name>`; the
    editor shows only refusals whose param equals `section.field` under a field, and only those not starting with
    `section.` under the form, so this one is shown nowhere: the Save click seems to do nothing."""
    improvements_on(org, helper=False)
    patched = org.client.patch(f"/memory/stores/{store_id}", headers=org.admin,
                               json={"promotion": {"enabled": False, "labels": {"team": "support"}}})
    assert patched.status_code == 200, patched.text
    vocabulary = org.client.put(f"/tenants/{org.org_id}/vocabulary", headers=org.admin,
                                json={"memory_record": {"department": {}}})
    assert vocabulary.status_code == 200, vocabulary.text

    open_page(app, org, "app_pages/stores.py")
    app.checkbox(key="stores_field_promotion_enabled").check()
    app.button(key="stores_review_promotion").click().run()
    app.button(key="stores_save_promotion").click().run()
    no_exception(app)
    assert store_settings(org, store_id)["promotion"]["enabled"] is False  # the API refused it
    shown = errors(app)
    assert any("promotion.labels" in e and "Code `" in e for e in shown), (
        "DSH-4 / decision DSH-4 (422 shown under its field, other refusals under the section's form): the API's "
        f"refusal with param `promotion.labels.team` is not shown at all; errors on the page: {shown}")


def test_dsh_4_a_refusal_of_a_section_budget_value_is_shown(app: AppTest, org: Org, store_id: str) -> None:
    """A section budget typed as a word: the API's 422 names the map entry; the editor must show it somewhere."""
    open_page(app, org, "app_pages/stores.py")
    app.session_state["stores_field_injection_section_budgets"] = {
        "edited_rows": {}, "added_rows": [{"name": "commitments", "value": "many"}], "deleted_rows": []}
    app.run()
    app.button(key="stores_review_injection").click().run()
    no_exception(app)
    app.button(key="stores_save_injection").click().run()
    no_exception(app)
    assert store_settings(org, store_id)["customised"] == []
    shown = errors(app)
    assert any("section_budgets" in e and "Code `validation_failed`" in e for e in shown), (
        "DSH-4: the API refused `injection.section_budgets` (param `injection.section_budgets[...]`: a word as a "
        f"token count) but the page shows no error; errors on the page: {shown}")


def test_dsh_4_changing_the_rank_does_not_pin_the_budget_to_todays_ceiling(app: AppTest, org: Org, store_id: str,
                                                                          settings: Settings,
                                                                          database_url: str) -> None:
    """The editor starts `budget_tokens` from the effective value (the ceiling when the store has none) and sends
    the section whole, so saving only `rank` also stores an explicit budget equal to today's ceiling — a change the
    review table does not show. With a higher ceiling later, the store stays capped at the old one (INJ-10: only an
    unset budget falls back to the ceiling)."""
    open_page(app, org, "app_pages/stores.py")
    app.selectbox(key="stores_field_injection_rank").select("relevance")
    app.button(key="stores_review_injection").click().run()
    no_exception(app)
    [diff] = [d.value for d in app.dataframe if "before" in d.value.columns and "after" in d.value.columns]
    assert list(diff["setting"]) == ["Order records by"]  # the review shows one change
    app.button(key="stores_save_injection").click().run()
    no_exception(app)
    assert errors(app) == []
    assert store_settings(org, store_id)["injection"]["rank"] == "relevance"

    raised = dataclasses.replace(settings, injection_max_budget_tokens=settings.injection_max_budget_tokens * 2)
    with TestClient(create_app(raised, database_url)) as later:
        response = later.get(f"/memory/stores/{store_id}", headers=org.admin)
    assert response.status_code == 200, response.text
    budget = response.json()["injection"]["budget_tokens"]
    assert budget == raised.injection_max_budget_tokens, (
        "DSH-4/INJ-10: saving only `injection.rank` in the dashboard also stored `budget_tokens` = "
        f"{settings.injection_max_budget_tokens} (the ceiling of the day), which the review did not show; with the "
        f"ceiling raised to {raised.injection_max_budget_tokens} the store stays at {budget}")


# ---------------------------------------------------------------- DSH-3 / DSH-1: the records page


def write(org: Org, index_id: str, text: str, person: str | None = None, **fields: Any) -> dict[str, Any]:
    headers = bearer(org.key, person) if person else org.full
    response = org.client.post("/memory", json={"index_id": index_id, "type": fields.pop("type", "fact"),
                                                "text": text, **fields}, headers=headers)
    assert response.status_code == 201, response.text
    return dict(response.json())


@pytest.mark.parametrize("field,value", [
    ("type", "Fact"),
    ("tags", "t" * 65),
    ("q", "word " * 201),
], ids=["uppercase-type", "long-tag", "long-text-search"])
def test_dsh_3_a_filter_the_api_would_refuse_is_explained_not_raised(app: AppTest, org: Org, store_id: str,
                                                                      field: str, value: str) -> None:
    write(org, store_id, "The office opens at eight")
    open_page(app, org, "app_pages/records.py")
    if field == "type":
        app.multiselect(key="records_types").set_value([value])
    else:
        app.text_input(key=f"records_{field}").input(value)
    app.button(key="records_apply").click().run()
    assert not app.exception, (
        f"DSH-1/DSH-3: a records filter {field}={value[:20]!r}… (the Types box invites new names) raises instead of "
        f"saying what to fix: {exceptions(app)}")
    assert errors(app), "the page must say in words which filter to fix"


def test_dsh_3_editing_only_the_text_keeps_tags_and_metadata(app: AppTest, org: Org, store_id: str,
                                                             admin_client: CoreClient) -> None:
    """Tags may hold a comma and metadata keys may hold spaces at their ends (the API stores both); the edit form
    splits tags at commas and strips names, so a text-only edit rewrites tags and metadata nobody touched."""
    record = write(org, store_id, "Invoices go out monthly", tags=["billing,eu"],
                   metadata={" region ": "eu", "source": "crm"})
    open_page(app, org, "app_pages/records.py")
    app.text_input(key="records_open_id").input(record["id"]).run()
    no_exception(app)
    app.text_area(key=f"records_edit_text_{record['id']}_1").input("Invoices go out every month")
    app.button(key="records_edit_save").click().run()
    no_exception(app)
    saved = admin_client.memory_record(record["id"])
    assert saved.text == "Invoices go out every month"
    assert (saved.tags, saved.metadata) == (["billing,eu"], {" region ": "eu", "source": "crm"}), (
        "DSH-3: a text-only edit in the dashboard also changed fields the administrator did not touch: tags "
        f"{record['tags']} -> {saved.tags}, metadata {record['metadata']} -> {saved.metadata}")


# ---------------------------------------------------------------- odd but valid data


ODD = "Zoë ‮evil‬ \u200b 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 🧑‍🤝‍🧑 `code` *bold* $x$ :red[no] <b>html</b> \\ [link](javascript:x) #"


def test_dsh_3_an_odd_record_opens_without_an_exception(app: AppTest, org: Org, store_id: str) -> None:
    """Long text, odd unicode and Markdown, many metadata keys (nested, empty, dotted), labels, no owner, no expiry,
    a comma in a tag, a contested partner that is deleted."""
    metadata: dict[str, Any] = {f"k{n}.{ODD[:8]}": ODD[n % len(ODD):] for n in range(40)}
    metadata.update({"": "empty name", "nested": {"a": [1, {"b": None}], "": {}}, "null": None, "list": []})
    record = write(org, store_id, (ODD + "\n") * 40, labels={"team": ["support", ODD[:30]]},
                   tags=["a,b", ODD[:20]], metadata=metadata, priority="critical")
    open_page(app, org, "app_pages/records.py")
    no_exception(app)
    app.text_input(key="records_open_id").input(record["id"]).run()
    no_exception(app)
    assert errors(app) == []


def test_dsh_7_an_odd_thread_opens_every_tab_without_an_exception(app: AppTest, org: Org) -> None:
    items = [
        {"type": "message", "role": "user", "content": ODD * 300},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": ODD},
                                                        {"type": "input_image", "image_url": "https://x/y.png"}]},
        {"type": "function_call", "call_id": "c" * 256, "name": ODD[:40], "arguments": "{" * 500,
         "status": "incomplete"},
        {"type": "function_call_output", "call_id": "unknown", "output": ""},
        {"type": "reasoning"},
        {"type": "refusal", "refusal": ODD},
    ]
    person = "zoë-🧑-𝔘"
    thread = org.client.post("/threads", headers=bearer(org.key, person), json={
        "metadata": {f"m{n}{ODD[:10]}": ODD[:100] for n in range(16)}, "labels": {"team": ODD[:30]},
        "items": items})
    assert thread.status_code == 201, thread.text
    thread_id = thread.json()["id"]
    state = org.client.put(f"/threads/{thread_id}/state", headers=bearer(org.key, person),
                           json={"state": {ODD: {"": [], "a.b": {"c[0]": None}}, "deep": [[[{"x": 1}]]]}})
    assert state.status_code == 200, state.text
    open_page(app, org, "app_pages/threads.py")
    app.text_input(key="threads_open_id").input(thread_id).run()
    no_exception(app)
    for tab in ("Items", "Notes", "Working state", "Summaries"):
        app.session_state["threads_detail"] = tab
        app.run()
        assert not app.exception, (tab, exceptions(app))
        assert errors(app) == [], (tab, errors(app))


def test_dsh_1_operator_switch_on_the_records_page_shows_only_the_chosen_organisation(
        app: AppTest, org: Org, other_org: Org, operator: dict[str, str], store_id: str) -> None:
    acme = write(org, store_id, "Acme secret plan")
    globex_store = other_org.client.post("/indexes", json={"name": "globex"}, headers=other_org.admin).json()["id"]
    globex = write(other_org, globex_store, "Globex fact")
    log_in(app, operator["email"], operator["password"])
    app.sidebar.selectbox(key="org_choice").select(org.org_id).run()
    app.switch_page("app_pages/records.py").run()
    no_exception(app)
    app.text_input(key="records_open_id").input(acme["id"]).run()
    assert f"Record `{acme['id']}`" in [s.value for s in app.subheader]
    app.sidebar.selectbox(key="org_choice").select(other_org.org_id).run()
    no_exception(app)
    page_text = " ".join(str(e.value) for e in [*app.markdown, *app.subheader, *app.caption, *app.text_input])
    tables = [d.value for d in app.dataframe]
    assert "Acme secret plan" not in page_text and acme["id"] not in page_text
    assert all(acme["id"] not in t.to_string() for t in tables)
    assert any(globex["id"] in t.to_string() for t in tables)


def test_dsh_9_applying_the_last_listed_proposal_does_not_crash_the_page(app: AppTest, org: Org, scripted: Any,
                                                                        run_jobs: Any, database_url: str) -> None:
    """The proposals table keeps its row selection when its rows change (Streamlit keys a selectable table by its
    key, not its data); the page indexes the new list with the old row, so applying the proposal on the last row
    leaves a selection past the end of the shorter list."""
    from tests.extraction.maintenance_util import maintain
    from tests.extraction.maintenance_util import store_settings as set_store
    from tests.extraction.maintenance_util import write as write_for
    from tests.extraction.util import new_store

    improvements_on(org, helper=False)
    index_id = new_store(org)
    set_store(org, index_id, promotion={"enabled": True})
    for person in ("anna", "bob"):
        write_for(org, index_id, person, "The office closes at six.")
        write_for(org, index_id, person, "Visitors park behind the building.")
    maintain(database_url, run_jobs)
    open_page(app, org, "app_pages/proposals.py")
    assert len(app.dataframe(key="proposals_table").value) == 2
    app.session_state["proposals_table"] = {"selection": {"rows": [1], "columns": []}}
    app.run()
    no_exception(app)
    app.button(key="proposals_apply").click().run()
    assert not app.exception, (
        "DSH-9: after applying the proposal on the last row, the page raises instead of showing the shorter list: "
        f"{exceptions(app)}")
    assert any(s.value.startswith("Applied: shared record") for s in app.success)


def test_dsh_3_a_new_filter_does_not_open_a_record_nobody_selected(app: AppTest, org: Org, store_id: str,
                                                                  admin_client: CoreClient) -> None:
    """A selectable table keeps its row position when its rows change (Streamlit keys it by `key`, not data); the
    records page opens whatever record is at that position of the new list: a record the administrator never chose
    is shown with its edit and delete buttons, and its read is audited under her name."""
    from shared.schemas.platform import AuditQuery

    older = write(org, store_id, "Anna drinks green tea", tags=["drinks"])
    newest = write(org, store_id, "The office opens at eight")
    open_page(app, org, "app_pages/records.py")
    app.session_state["records_table"] = {"selection": {"rows": [0], "columns": []}}
    app.run()
    no_exception(app)
    assert f"Record `{newest['id']}`" in [s.value for s in app.subheader]  # she selected the newest record
    before = admin_client.audit(limit=1).data[0].seq

    app.text_input(key="records_tags").input("drinks")
    app.button(key="records_apply").click().run()
    no_exception(app)
    opened = [s.value for s in app.subheader if s.value.startswith("Record `")]
    reads = [e for e in admin_client.audit(AuditQuery(action=["memory.read"]), limit=50).data
             if e.seq > before and e.detail.get("route") == "GET /memory/{id}"]
    assert opened == [] and not reads, (
        f"DSH-3/PLT-2: she selected {newest['id']}; after a new filter the page opened {older['id']}, which she "
        f"never selected (shown: {opened}; audited as her reads: {[e.object_id for e in reads]}), with its edit "
        "and delete buttons")


def test_dsh_4_a_refusal_of_one_store_is_not_shown_on_another(app: AppTest, org: Org, store_id: str) -> None:
    other = org.client.post("/indexes", json={"name": "support"}, headers=org.admin).json()["id"]
    open_page(app, org, "app_pages/stores.py")
    app.selectbox(key="stores_store").select(store_id).run()
    app.number_input(key="stores_field_injection_budget_tokens").set_value(-1)
    app.button(key="stores_review_injection").click().run()
    app.button(key="stores_save_injection").click().run()
    no_exception(app)
    assert errors(app), "the refusal is shown on the store it belongs to"
    app.selectbox(key="stores_store").select(other).run()
    no_exception(app)
    assert errors(app) == [], (
        f"DSH-4: store {other} shows the refusal of a save made on store {store_id}: {errors(app)}")


def test_dsh_7_a_thread_filter_the_api_would_refuse_is_explained_not_raised(app: AppTest, org: Org) -> None:
    open_page(app, org, "app_pages/threads.py")
    app.text_input(key="threads_metadata").input(", ".join(f"k{n}:v" for n in range(65)))
    app.button(key="threads_apply").click().run()
    assert not app.exception, (
        f"DSH-1/DSH-7: 65 metadata filters (the API takes 64) raise instead of saying what to fix: {exceptions(app)}")
    assert errors(app), "the page must say in words which filter to fix"


def test_dsh_7_a_new_filter_does_not_open_a_thread_nobody_selected(app: AppTest, org: Org,
                                                                  admin_client: CoreClient) -> None:
    """The same kept row position on the threads page: a new filter opens (and audits a read of) another thread."""
    from shared.schemas.platform import AuditQuery

    made = {}
    for person in ("anna", "bert"):
        response = org.client.post("/threads", headers=bearer(org.key, person), json={"items": [
            {"type": "message", "role": "user", "content": f"Hello from {person}"}]})
        assert response.status_code == 201, response.text
        made[person] = response.json()["id"]
    open_page(app, org, "app_pages/threads.py")
    app.session_state["threads_table"] = {"selection": {"rows": [0], "columns": []}}
    app.run()
    no_exception(app)
    assert [s.value for s in app.subheader] == [f"Thread `{made['bert']}`"]  # she selected Bert's (the newest)
    before = admin_client.audit(limit=1).data[0].seq

    app.selectbox(key="threads_owner").select("one person")
    app.text_input(key="threads_person").input("anna")
    app.button(key="threads_apply").click().run()
    no_exception(app)
    opened = [s.value for s in app.subheader if s.value.startswith("Thread `")]
    reads = [e for e in admin_client.audit(AuditQuery(action=["thread.read"]), limit=50).data
             if e.seq > before and e.detail.get("route") == "GET /threads/{id}"]
    assert opened == [] and not reads, (
        f"DSH-7/PLT-2: she selected {made['bert']}; after a new filter the page opened {opened}, which she never "
        f"selected, and audited it as her read: {[e.object_id for e in reads]}")


def test_dsh_3_a_record_with_an_empty_metadata_name_can_have_its_text_edited(app: AppTest, org: Org, store_id: str,
                                                                             admin_client: CoreClient) -> None:
    """The API stores a metadata object with an empty name; the edit form refuses every save of such a record
    (even a text-only one) until the administrator deletes that entry."""
    record = write(org, store_id, "Invoices go out monthly", metadata={"": "legacy", "source": "crm"})
    open_page(app, org, "app_pages/records.py")
    app.text_input(key="records_open_id").input(record["id"]).run()
    no_exception(app)
    app.text_area(key=f"records_edit_text_{record['id']}_1").input("Invoices go out every month")
    app.button(key="records_edit_save").click().run()
    no_exception(app)
    saved = admin_client.memory_record(record["id"])
    assert (saved.text, saved.metadata) == ("Invoices go out every month", {"": "legacy", "source": "crm"}), (
        f"DSH-3: a text-only edit of a record whose metadata has an empty name is refused ({errors(app)}) or "
        f"changes the metadata: {saved.metadata}")
