"""The dashboard in AppTest against the live API: login (DSH-1), overview (DSH-2), audit log (DSH-8), every page."""

from __future__ import annotations

import json
import re
from datetime import date, timedelta
from typing import Any

import polars as pl
import pytest
from streamlit.testing.v1 import AppTest

from backend.config import Settings
from dashboard import navigation
from shared.client import CoreClient
from shared.schemas.platform import AuditQuery
from tests.dashboard.conftest import log_in, no_exception, record_event
from tests.helpers import Org, bearer


def titles(at: AppTest) -> list[str]:
    return [t.value for t in at.title]


def errors(at: AppTest) -> list[str]:
    return [e.value for e in at.error]


def metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


TABLE_COLUMNS = {"overview_indexes": "embedding", "overview_events": "seq", "audit_table": "seq"}


def tables(at: AppTest, key: str) -> list[Any]:
    """The page's tables of one kind, told apart by a column only they have (pandas frames)."""
    return [d.value for d in at.dataframe if TABLE_COLUMNS[key] in d.value.columns]


def table(at: AppTest, key: str) -> Any:
    [found] = tables(at, key)
    return found


def badges(at: AppTest) -> list[str]:
    return [m.value for m in at.markdown if "-badge[" in m.value]


def open_audit_log(at: AppTest) -> AppTest:
    at.switch_page("app_pages/audit_log.py").run()
    no_exception(at)
    assert titles(at) == ["Audit log"]
    return at


def apply_filters(at: AppTest) -> AppTest:
    at.button(key="audit_apply").click().run()
    no_exception(at)
    return at


# ---------------------------------------------------------------- DSH-1 login


def test_dsh_1_login_with_bootstrapped_admin_opens_the_overview(app: AppTest, org: Org) -> None:
    log_in(app, org.admin_email, org.admin_password)
    no_exception(app)
    assert errors(app) == []
    assert titles(app) == ["Overview"]
    assert [t.value for t in app.sidebar.text] == [org.admin_email]
    assert app.session_state["org_id"] == org.org_id
    assert app.session_state["client"].token.startswith("cat_")


def test_dsh_1_wrong_password_shows_the_error_code(app: AppTest, org: Org) -> None:
    log_in(app, org.admin_email, "not-the-password")
    no_exception(app)
    assert errors(app) == ["Could not log in: Wrong e-mail address or password.\n\nCode `bad_login`"]
    assert titles(app) == ["coremem"]
    assert "client" not in app.session_state


def test_dsh_1_unreachable_api_is_said_in_words(app: AppTest, org: Org) -> None:
    from tests.dashboard.conftest import _free_port_closed

    app.session_state["api_url"] = f"http://127.0.0.1:{_free_port_closed()}"
    log_in(app, org.admin_email, org.admin_password)
    no_exception(app)
    [message] = errors(app)
    assert "cannot be reached" in message and "Code `api_unreachable`" in message


def test_dsh_1_logout_ends_the_token_at_the_api(app: AppTest, org: Org, live_api: str) -> None:
    log_in(app, org.admin_email, org.admin_password)
    token = app.session_state["client"].token
    app.sidebar.button(key="logout").click().run()
    no_exception(app)
    assert titles(app) == ["coremem"]
    assert [i.value for i in app.info] == ["You are logged out."]
    with CoreClient(live_api, token) as stale:
        from shared.client import ApiError

        with pytest.raises(ApiError) as caught:
            stale.audit_verify()
    assert caught.value.code == "bad_credential"


def test_dsh_1_expired_session_returns_to_login_with_the_code(app: AppTest, org: Org, live_api: str) -> None:
    log_in(app, org.admin_email, org.admin_password)
    with CoreClient(live_api, app.session_state["client"].token) as same:
        same.logout()  # the token ends elsewhere (another tab, expiry)
    app.sidebar.button(key="refresh").click().run()
    no_exception(app)
    assert titles(app) == ["coremem"]
    [notice] = [i.value for i in app.info]
    assert notice.startswith("Your session ended:") and "`bad_credential`" in notice


def test_dsh_1_operator_picks_the_organisation(app: AppTest, org: Org, other_org: Org,
                                               operator: dict[str, str]) -> None:
    other_org.make_key(["knowledge"], name="globex reader")
    log_in(app, operator["email"], operator["password"])
    no_exception(app)
    assert titles(app) == ["Choose an organisation"]
    assert [t.value for t in app.sidebar.text] == [operator["email"]]
    picker = app.sidebar.selectbox(key="org_choice")
    assert picker.value is None
    assert picker.options == [f"Acme · {org.org_id}", f"Globex · {other_org.org_id}"]
    picker.select(org.org_id).run()
    no_exception(app)
    assert titles(app) == ["Overview"]
    assert metrics(app)["Active keys"] == "1"
    app.sidebar.selectbox(key="org_choice").select(other_org.org_id).run()
    no_exception(app)
    assert app.session_state["org_id"] == other_org.org_id
    assert metrics(app)["Active keys"] == "2"
    open_audit_log(app)
    shown = table(app, "audit_table")
    assert set(shown["action"]) >= {"key.created"}
    assert "globex reader" in " ".join(shown["detail"])
    assert app.sidebar.selectbox(key="org_choice").value == other_org.org_id


# ---------------------------------------------------------------- DSH-2 overview


def test_dsh_2_overview_counts_indexes_keys_and_charts_events(app: AppTest, org: Org, admin_client: CoreClient
                                                              ) -> None:
    for name in ("handbook", "tickets"):
        assert org.client.post("/indexes", json={"name": name}, headers=org.full).status_code == 201
    spare = org.make_key(["knowledge"], name="spare")
    org.make_key(["knowledge"], name="kept")
    assert org.client.post(f"/tenants/{org.org_id}/keys/{spare['id']}/revoke", headers=org.admin).status_code == 200
    log_in(app, org.admin_email, org.admin_password)
    no_exception(app)
    shown = metrics(app)
    assert (shown["Indexes"], shown["Active keys"], shown["Revoked keys"], shown["Expired keys"]) == ("2", "2", "1",
                                                                                                     "0")
    assert set(table(app, "overview_indexes")["name"]) == {"handbook", "tickets"}
    latest = table(app, "overview_events")
    assert list(latest["action"][:4]) == ["key.revoked", "key.created", "key.created", "index.created"]
    assert badges(app) == [f":green-badge[:material/verified: Hash chain intact over {shown['Audit events']} events.]"]
    # Nothing was written to records or threads yet, so the one chart is the audit events', changes only (the
    # API counts per day; the page leaves the reads out).
    [chart] = app.get("vega_lite_chart")
    spec = json.loads(chart.proto.spec)
    assert spec["mark"]["type"] == "bar" and spec["encoding"]["color"]["field"] == "name"
    [dataset] = chart.proto.datasets
    counted = pl.read_ipc_stream(dataset.data.data)
    assert dict(zip(counted["name"], counted["count"], strict=True)) == {
        "index.created": 2, "key.created": 3, "key.revoked": 1}
    app.toggle(key="overview_changes_only").set_value(False).run()
    no_exception(app)
    counted = pl.read_ipc_stream(app.get("vega_lite_chart")[0].proto.datasets[0].data.data)
    assert "audit.read" in set(counted["name"])


def test_dsh_2_overview_empty_states_say_what_to_do(app: AppTest, org: Org) -> None:
    log_in(app, org.admin_email, org.admin_password)
    no_exception(app)
    shown = [i.value for i in app.info]
    assert "No indexes yet: every memory record lives in an index. Create the first one." in shown
    assert app.button(key="overview_go_indexes").label == "Create an index"
    assert any(s.startswith("No threads yet.") for s in shown)
    assert app.button(key="overview_go_keys_threads").label == "Create a key"
    assert not any("POST /" in s or "GET /" in s for s in shown)


# ---------------------------------------------------------------- DSH-8 audit log


@pytest.fixture
def busy_org(org: Org, settings: Settings, database_url: str) -> dict[str, str]:
    """An organisation with index, key and person events besides the bootstrap key."""
    index = org.client.post("/indexes", json={"name": "handbook"}, headers=org.full).json()
    key = org.make_key(["knowledge"], name="reader")
    record_event(database_url, settings, org.org_id, "memory.read", subject_id="anna", object_type="memory_record",
                 object_id="mem_anna")
    record_event(database_url, settings, org.org_id, "memory.write", subject_id="bert", object_type="memory_record",
                 object_id="mem_bert", outcome="denied")
    return {"index_id": index["id"], "key_id": key["id"]}


def test_dsh_8_filters_narrow_the_table(app: AppTest, org: Org, busy_org: dict[str, str]) -> None:
    log_in(app, org.admin_email, org.admin_password)
    open_audit_log(app)
    changes = table(app, "audit_table")
    assert {"key.created", "index.created", "memory.write"} <= set(changes["action"])
    assert not {"memory.read", "audit.read"} & set(changes["action"])  # *Changes only* is on by default
    app.toggle(key="audit_changes_only").set_value(False).run()
    everything = table(app, "audit_table")
    assert {"key.created", "index.created", "memory.read", "memory.write", "audit.read"} <= set(everything["action"])

    app.multiselect(key="audit_actions").select("index.created")
    apply_filters(app)
    assert list(table(app, "audit_table")["object_id"]) == [busy_org["index_id"]]

    app.multiselect(key="audit_actions").unselect("index.created").select("key.created")
    app.selectbox(key="audit_actor_type").select("admin")
    apply_filters(app)
    assert list(table(app, "audit_table")["object_id"]) == [busy_org["key_id"]]

    app.selectbox(key="audit_actor_type").select("any")
    app.multiselect(key="audit_actions").unselect("key.created")
    app.selectbox(key="audit_outcome").select("denied")
    apply_filters(app)
    assert list(table(app, "audit_table")["object_id"]) == ["mem_bert"]

    app.selectbox(key="audit_outcome").select("any")
    app.text_input(key="audit_object_type").input("index")
    app.text_input(key="audit_object_id").input(busy_org["index_id"])
    apply_filters(app)
    assert list(table(app, "audit_table")["action"]) == ["index.created"]

    app.text_input(key="audit_object_type").input("")
    app.text_input(key="audit_object_id").input("")
    app.date_input(key="audit_to").set_value(date.today() - timedelta(days=2))
    apply_filters(app)
    assert "No events match these filters — widen the period or clear a filter." in [i.value for i in app.info]
    assert tables(app, "audit_table") == []


def test_dsh_8_search_by_person_id(app: AppTest, org: Org, busy_org: dict[str, str]) -> None:
    log_in(app, org.admin_email, org.admin_password)
    open_audit_log(app)
    app.toggle(key="audit_changes_only").set_value(False)
    app.text_input(key="audit_person").input("anna")
    apply_filters(app)
    shown = table(app, "audit_table")
    assert list(shown["object_id"]) == ["mem_anna"]
    # Only the keyed hash is stored and shown, never the id typed in.
    assert shown["subject"][0] and shown["subject"][0] != "anna"
    app.text_input(key="audit_person").input("carla")
    apply_filters(app)
    assert tables(app, "audit_table") == []


def test_dsh_8_cursor_paging_older_and_newer(app: AppTest, org: Org, settings: Settings, database_url: str) -> None:
    for n in range(30):
        record_event(database_url, settings, org.org_id, "memory.read", object_type="memory_record",
                     object_id=f"mem_{n:02d}")
    log_in(app, org.admin_email, org.admin_password)
    open_audit_log(app)
    app.multiselect(key="audit_actions").select("memory.read")
    app.selectbox(key="audit_actor_type").select("system")  # not the overview's own counts at login
    app.selectbox(key="audit_page_size").select(25)
    apply_filters(app)
    first = list(table(app, "audit_table")["object_id"])
    assert first == [f"mem_{n:02d}" for n in range(29, 4, -1)]
    assert app.button(key="audit_newer").disabled
    app.button(key="audit_older").click().run()
    no_exception(app)
    assert list(table(app, "audit_table")["object_id"]) == [f"mem_{n:02d}" for n in range(4, -1, -1)]
    assert app.button(key="audit_older").disabled
    assert any(c.value.startswith("Page 2 · 5 events") for c in app.caption)
    app.button(key="audit_newer").click().run()
    assert list(table(app, "audit_table")["object_id"]) == first


def test_dsh_8_chain_status_badge_turns_red_when_a_row_is_tampered_with(app: AppTest, org: Org, db: Any) -> None:
    log_in(app, org.admin_email, org.admin_password)
    open_audit_log(app)
    [intact] = badges(app)
    assert intact.startswith(":green-badge[:material/verified: Hash chain intact over ")
    # Tamper as the database owner would: past the triggers that refuse UPDATE to the application.
    db.execute("ALTER TABLE audit_events DISABLE TRIGGER USER")
    db.execute("UPDATE audit_events SET action = 'key.forged' WHERE org_id = %s AND seq = 1", (org.org_id,))
    db.execute("ALTER TABLE audit_events ENABLE TRIGGER USER")
    app.button(key="audit_verify_again").click().run()
    no_exception(app)
    [broken] = badges(app)
    assert broken.startswith(":red-badge[:material/gpp_bad: Hash chain BROKEN at seq 1:")


# ---------------------------------------------------------------- DSH-11 every page


@pytest.mark.parametrize("page", navigation.all_pages(), ids=lambda p: p.url_path)
def test_dsh_11_every_registered_page_opens_without_error(app: AppTest, org: Org, page: navigation.PageSpec
                                                          ) -> None:
    log_in(app, org.admin_email, org.admin_password)
    app.switch_page(page.path).run()
    no_exception(app)
    assert errors(app) == []
    assert titles(app) == [page.title]


# ---------------------------------------------------------------- DSH-3 records


def _write(org: Org, index_id: str, text: str, person: str | None = None, **fields: Any) -> str:
    headers = bearer(org.key, person) if person else org.full
    response = org.client.post("/memory", json={"index_id": index_id, "type": fields.pop("type", "fact"),
                                                "text": text, **fields}, headers=headers)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


@pytest.fixture
def memory_org(org: Org) -> dict[str, Any]:
    """Two stores; shared and personal records of several types, tags and labels."""
    stores = {}
    for name in ("handbook", "support"):
        response = org.client.post("/indexes", json={"name": name}, headers=org.admin)
        assert response.status_code == 201, response.text
        stores[name] = response.json()["id"]
    ids = {
        "office": _write(org, stores["handbook"], "The office opens at eight", tags=["office"],
                         confidence=0.5),
        "tea": _write(org, stores["handbook"], "Anna drinks green tea", person="anna", type="preference",
                      labels={"team": "support"}),
        "bike": _write(org, stores["handbook"], "Bert cycles to work", person="bert"),
        "vpn": _write(org, stores["support"], "The VPN needs a token", tags=["vpn", "office"]),
    }
    return {"stores": stores, "ids": ids}


def open_records(at: AppTest) -> AppTest:
    at.switch_page("app_pages/records.py").run()
    no_exception(at)
    assert titles(at) == ["Records"]
    return at


def apply_records(at: AppTest) -> AppTest:
    at.button(key="records_apply").click().run()
    no_exception(at)
    assert errors(at) == []
    return at


def shown_ids(at: AppTest) -> list[str]:
    found = [d.value for d in at.dataframe if "effective" in d.value.columns]
    return list(found[0]["id"]) if found else []


def open_record(at: AppTest, record_id: str) -> AppTest:
    at.text_input(key="records_open_id").input(record_id).run()
    no_exception(at)
    return at


def test_dsh_3_banner_and_filters_narrow_the_table(app: AppTest, org: Org, memory_org: dict[str, Any],
                                                   admin_client: CoreClient) -> None:
    ids, stores = memory_org["ids"], memory_org["stores"]
    log_in(app, org.admin_email, org.admin_password)
    open_records(app)
    assert any("audit trail" in i.value for i in app.info)
    assert shown_ids(app) == [ids["vpn"], ids["bike"], ids["tea"], ids["office"]]
    reads = admin_client.audit(AuditQuery(action=["memory.read"])).data
    assert any(e.actor.type == "admin" and e.detail.get("count") == 4 for e in reads)  # the banner is true

    app.selectbox(key="records_store").select(stores["handbook"])
    apply_records(app)
    assert shown_ids(app) == [ids["bike"], ids["tea"], ids["office"]]

    app.multiselect(key="records_types").select("preference")
    apply_records(app)
    assert shown_ids(app) == [ids["tea"]]

    app.multiselect(key="records_types").unselect("preference")
    app.selectbox(key="records_owner").select("one person")
    app.text_input(key="records_person").input("bert")
    apply_records(app)
    assert shown_ids(app) == [ids["bike"]]

    app.selectbox(key="records_owner").select("shared only")
    apply_records(app)
    assert shown_ids(app) == [ids["office"]]
    assert any(c.value.startswith("1 record matches · showing 1, newest first") for c in app.caption)
    # The API filters (so paging walks shared records only), as its audit event of the read shows.
    last_read = admin_client.audit(AuditQuery(action=["memory.read"])).data[0]
    assert last_read.detail["filters"].get("shared") is True and last_read.detail["count"] == 1

    app.selectbox(key="records_owner").select("everyone")
    app.selectbox(key="records_store").select(None)
    app.text_input(key="records_tags").input("office")
    apply_records(app)
    assert shown_ids(app) == [ids["vpn"], ids["office"]]

    app.text_input(key="records_tags").input("")
    app.text_input(key="records_labels").input("team:support")
    apply_records(app)
    assert shown_ids(app) == [ids["tea"]]

    app.text_input(key="records_labels").input("")
    app.text_input(key="records_q").input("vpn")
    apply_records(app)
    assert shown_ids(app) == [ids["vpn"]]

    app.text_input(key="records_q").input("")
    app.slider(key="records_min_conf").set_value(0.8)
    apply_records(app)
    assert shown_ids(app) == [ids["vpn"], ids["bike"], ids["tea"]]

    app.text_input(key="records_q").input("submarine")
    apply_records(app)
    assert shown_ids(app) == []
    assert "No records match these filters — pick another store or clear a filter." in [i.value for i in app.info]

    app.text_input(key="records_labels").input("nocolon")
    app.button(key="records_apply").click().run()
    no_exception(app)
    assert errors(app) == ["`nocolon` is not `name:value`. Write filters as `name:value`, separated by commas."
                           "\n\nCode `invalid_filter`"]


def test_dsh_3_cursor_paging_next_and_previous(app: AppTest, org: Org) -> None:
    store = org.client.post("/indexes", json={"name": "many"}, headers=org.admin).json()["id"]
    made = [_write(org, store, f"Fact number {n:02d}") for n in range(30)]
    log_in(app, org.admin_email, org.admin_password)
    open_records(app)
    app.selectbox(key="records_page_size").select(25)
    apply_records(app)
    first = shown_ids(app)
    assert first == made[::-1][:25]
    assert app.button(key="records_previous").disabled
    app.button(key="records_next").click().run()
    no_exception(app)
    assert shown_ids(app) == made[::-1][25:]
    assert app.button(key="records_next").disabled
    # A cursor pager, no page numbers (at a million records a page count is neither cheap nor useful).
    captions = [c.value for c in app.caption]
    assert any(c.startswith("30 records match · showing 26–30, newest first") for c in captions), captions
    assert not any(re.search(r"page \d", c) for c in captions), captions
    app.button(key="records_previous").click().run()
    assert shown_ids(app) == first


def test_dsh_3_detail_edit_verify_and_delete_with_confirmation(app: AppTest, org: Org, admin_client: CoreClient,
                                                               memory_org: dict[str, Any]) -> None:
    record_id = memory_org["ids"]["tea"]
    log_in(app, org.admin_email, org.admin_password)
    open_records(app)
    open_record(app, record_id)
    assert errors(app) == []
    assert f"Record `{record_id}`" in [s.value for s in app.subheader]
    shown = metrics(app)
    assert shown["Stored confidence"] == "1.00" and "Effective confidence" in shown
    history = [d.value for d in app.dataframe if "action" in d.value.columns and "partner" in d.value.columns]
    assert list(history[0]["action"]) == ["created"]

    version = f"{record_id}_1"
    app.text_area(key=f"records_edit_text_{version}").input("Anna drinks mint tea")
    app.number_input(key=f"records_edit_confidence_{version}").set_value(0.6)
    app.button(key="records_edit_save").click().run()
    no_exception(app)
    assert errors(app) == []
    assert [s.value for s in app.success] == [f"Saved confidence, text of `{record_id}`: now version 2."]
    again = admin_client.memory_record(record_id)
    assert (again.text, again.confidence, again.version) == ("Anna drinks mint tea", 0.6, 2)
    history = [d.value for d in app.dataframe if "action" in d.value.columns and "partner" in d.value.columns]
    assert list(history[0]["action"]) == ["created", "updated"]

    app.button(key="records_verify").click().run()
    no_exception(app)
    assert admin_client.memory_record(record_id).verified is True
    assert app.button(key="records_verify").disabled

    app.button(key="records_delete").click().run()
    no_exception(app)
    [warning] = [w.value for w in app.warning]
    assert warning.startswith(f"Delete record `{record_id}`")
    app.button(key="records_delete_cancel").click().run()
    assert [w.value for w in app.warning] == []
    assert admin_client.memory_record(record_id).id == record_id

    app.button(key="records_delete").click().run()
    app.button(key="records_delete_confirm").click().run()
    no_exception(app)
    assert [s.value for s in app.success] == [f"Record `{record_id}` is deleted."]
    assert record_id not in shown_ids(app)
    from shared.client import ApiError

    with pytest.raises(ApiError) as caught:
        admin_client.memory_record(record_id)
    assert caught.value.status == 404


def test_dsh_3_api_errors_are_shown_with_their_code(app: AppTest, org: Org, memory_org: dict[str, Any]) -> None:
    log_in(app, org.admin_email, org.admin_password)
    open_records(app)
    open_record(app, "mem_does_not_exist")
    [message] = errors(app)
    assert message.startswith("Could not read record mem_does_not_exist:") and "Code `" in message


# ---------------------------------------------------------------- DSH-4 stores


@pytest.fixture
def store_id(org: Org) -> str:
    response = org.client.post("/indexes", json={"name": "handbook"}, headers=org.admin)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def open_stores(at: AppTest) -> AppTest:
    at.switch_page("app_pages/stores.py").run()
    no_exception(at)
    assert titles(at) == ["Stores"]
    return at


def section_table(at: AppTest, section: str) -> Any:
    """The values card of one section (a pandas frame: setting label, effective, default, differs, by name)."""
    from dashboard.data import stores

    cards = [d.value for d in at.dataframe if "differs" in d.value.columns]
    assert len(cards) == len(stores.SETTINGS_SECTIONS)
    return cards[stores.SETTINGS_SECTIONS.index(section)].set_index("name")


def test_dsh_4_cards_show_effective_and_default_values(app: AppTest, org: Org, store_id: str) -> None:
    log_in(app, org.admin_email, org.admin_password)
    open_stores(app)
    assert errors(app) == []
    commitments = section_table(app, "commitments")
    assert (commitments.loc["inject_limit", "effective"], commitments.loc["inject_limit", "default"]) == ("5", "5")
    assert not commitments["differs"].any()
    injection = section_table(app, "injection")
    assert not injection["differs"].any()  # no budget of its own is the ceiling, not a difference
    assert injection.loc["budget_tokens", "default"].startswith("none (the ceiling, ")
    assert "No settings changes yet: this store has run on its defaults since it was made." in [
        i.value for i in app.info]


def test_dsh_4_lessons_on_with_maintenance_off_warn_that_nothing_writes_them(app: AppTest, org: Org,
                                                                             store_id: str) -> None:
    """EXT-14/EXT-16: maintenance lessons are written by the maintenance pass; with it off, the lessons card says
    so (the demo's People and payroll store is set up this way)."""
    patched = org.client.patch(f"/memory/stores/{store_id}", headers=org.admin, json={
        "lessons": {"enabled": True, "min_episodes": 5}, "maintenance": {"enabled": False}})
    assert patched.status_code == 200, patched.text
    log_in(app, org.admin_email, org.admin_password)
    open_stores(app)
    assert [w.value for w in app.warning] == [
        "`lessons` is on, but the maintenance pass that acts on it is off in this store: no lesson is written until "
        "`maintenance.enabled` is switched on."]
    app.checkbox(key="stores_field_maintenance_enabled").check()
    app.button(key="stores_review_maintenance").click().run()
    app.button(key="stores_save_maintenance").click().run()
    no_exception(app)
    assert [s.value for s in app.success] == ["Saved `maintenance` of handbook."]
    assert [w.value for w in app.warning] == []


def test_dsh_4_edit_shows_the_change_then_saves_and_the_api_returns_it(app: AppTest, org: Org, store_id: str,
                                                                       admin_client: CoreClient) -> None:
    log_in(app, org.admin_email, org.admin_password)
    open_stores(app)
    app.number_input(key="stores_field_commitments_inject_limit").set_value(9)
    app.button(key="stores_review_commitments").click().run()
    no_exception(app)
    [diff] = [d.value for d in app.dataframe if "before" in d.value.columns]
    assert diff.to_dict("records") == [{"setting": "Commitments per turn", "before": "5", "after": "9"}]
    assert admin_client.store_settings(store_id).commitments.inject_limit == 5  # nothing saved yet

    app.button(key="stores_save_commitments").click().run()
    no_exception(app)
    assert errors(app) == []
    assert [s.value for s in app.success] == ["Saved `commitments` of handbook."]
    assert admin_client.store_settings(store_id).commitments.inject_limit == 9
    commitments = section_table(app, "commitments")
    assert (commitments.loc["inject_limit", "effective"], commitments.loc["inject_limit", "default"]) == ("9", "5")
    assert bool(commitments.loc["inject_limit", "differs"])
    [history] = [d.value for d in app.dataframe if "seq" in d.value.columns]
    assert list(history["action"]) == ["store.settings_changed"] and list(history["object_id"]) == [store_id]
    assert '"inject_limit": 9' in history["detail"][0]


def test_dsh_4_api_validation_error_is_shown_beside_its_field(app: AppTest, org: Org, store_id: str,
                                                              admin_client: CoreClient) -> None:
    log_in(app, org.admin_email, org.admin_password)
    open_stores(app)
    app.number_input(key="stores_field_injection_budget_tokens").set_value(-1)
    app.button(key="stores_review_injection").click().run()
    app.button(key="stores_save_injection").click().run()
    no_exception(app)
    [message] = errors(app)
    assert message.startswith("Could not save `injection.budget_tokens`:")
    assert "field `injection.budget_tokens`" in message and "Code `" in message
    # Shown inside the injection form, right after the field it names.
    form = app.get("form")
    injection_form = [f for f in form if any(getattr(c, "key", None) == "stores_field_injection_budget_tokens"
                                             for c in f.children.values())]
    [children] = [list(f.children.values()) for f in injection_form]
    position = [getattr(c, "key", None) for c in children].index("stores_field_injection_budget_tokens")
    assert children[position + 1].type == "error" and "budget_tokens" in children[position + 1].value
    assert admin_client.store_settings(store_id).customised == []  # nothing was saved

    app.number_input(key="stores_field_commitments_inject_limit").set_value(1000)
    app.button(key="stores_review_commitments").click().run()
    app.button(key="stores_save_commitments").click().run()
    no_exception(app)
    assert any("field `commitments.inject_limit`" in e for e in errors(app))


def test_dsh_2_overview_counts_records_per_store_type_and_owner(app: AppTest, org: Org,
                                                                memory_org: dict[str, Any]) -> None:
    for headers, items in ((bearer(org.key, "anna"), ["Hallo", "Dag Anna"]), (bearer(org.key), ["Beleid"])):
        body = {"items": [{"type": "message", "role": role, "content": text}
                          for role, text in zip(("user", "assistant"), items, strict=False)]}
        assert org.client.post("/threads", json=body, headers=headers).status_code == 201
    log_in(app, org.admin_email, org.admin_password)
    no_exception(app)
    assert errors(app) == []
    shown = metrics(app)
    assert (shown["Threads"], shown["Shared threads"], shown["People with threads"], shown["Messages"]) == (
        "2", "1", "1", "3")
    assert (shown["Records"], shown["Personal records"], shown["Shared records"], shown["People"]) == (
        "4", "2", "2", "2")
    [counts] = [d.value for d in app.dataframe if "personal" in d.value.columns]
    assert counts.to_dict("records") == [
        {"store": "handbook", "type": "fact", "records": 2, "personal": 1, "shared": 1},
        {"store": "handbook", "type": "preference", "records": 1, "personal": 1, "shared": 0},
        {"store": "support", "type": "fact", "records": 1, "personal": 0, "shared": 1},
    ]
    assert any(c.value.startswith("Active, unexpired records, counted by the API over every store")
               for c in app.caption)


def test_dsh_3_the_unfiltered_count_is_the_overviews_and_is_asked_once(app: AppTest, org: Org,
                                                                       memory_org: dict[str, Any],
                                                                       admin_client: CoreClient) -> None:
    """At a million records the count is most of a page's time (issue 16 goal 7): the Records page opened after the
    Overview shows the Overview's unfiltered count instead of asking again; a filter asks for its own."""
    def stats_reads() -> list[Any]:
        reads = admin_client.audit(AuditQuery(action=["memory.read"]), limit=200).data
        return [e for e in reads if e.detail.get("route") == "GET /memory/stats" and e.seq > before]

    earlier = admin_client.audit(limit=1).data
    before = earlier[0].seq if earlier else 0
    log_in(app, org.admin_email, org.admin_password)
    no_exception(app)
    open_records(app)
    assert any(c.value.startswith("4 records match · showing 1–4") for c in app.caption)
    assert [e.detail["count"] for e in stats_reads()] == [4]

    app.selectbox(key="records_store").select(memory_org["stores"]["handbook"])
    apply_records(app)
    assert any(c.value.startswith("3 records match · showing 1–3") for c in app.caption)
    assert sorted(e.detail["count"] for e in stats_reads()) == [3, 4]
