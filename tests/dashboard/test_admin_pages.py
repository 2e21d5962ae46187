"""The administration pages in AppTest against the live API: Keys (PLT-4, PLT-5), People (MEM-19, PLT-7) and
Indexes (PLT-13)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from shared.client import ApiError, CoreClient
from shared.schemas.platform import AuditQuery
from tests.dashboard.conftest import log_in, no_exception
from tests.helpers import Org, bearer


def errors(at: AppTest) -> list[str]:
    return [e.value for e in at.error]


def open_page(at: AppTest, org: Org, page: str, title: str) -> AppTest:
    log_in(at, org.admin_email, org.admin_password)
    at.switch_page(page).run()
    no_exception(at)
    assert [t.value for t in at.title] == [title]
    assert errors(at) == []
    return at


def run(at: AppTest) -> AppTest:
    at.run()
    no_exception(at)
    return at


def frames(at: AppTest, column: str) -> list[Any]:
    return [d.value for d in at.dataframe if column in d.value.columns]


def after(at: AppTest, key: str) -> Any:
    """The element drawn right after the widget `key`, in whatever block (form, column) holds it."""
    def walk(node: Any) -> Any:
        children = list(getattr(node, "children", {}).values())
        for n, child in enumerate(children):
            if getattr(child, "key", None) == key:
                return children[n + 1] if n + 1 < len(children) else None
            found = walk(child)
            if found is not None:
                return found
        return None

    return walk(at._tree)


# ---------------------------------------------------------------- keys


def create_key(at: AppTest, name: str, capabilities: list[str] | None = None, *, may_write: bool = True) -> str:
    """Fill *Create a key* and press it; returns the secret the page shows once."""
    at.text_input(key="keys_new_name").input(name)
    if capabilities is not None:
        chosen = at.multiselect(key="keys_new_capabilities")
        for cap in list(chosen.value):
            chosen.unselect(cap)
        for cap in capabilities:
            chosen.select(cap)
    if not may_write:
        at.checkbox(key="keys_new_may_write").uncheck()
    at.button(key="keys_create").click().run()
    no_exception(at)
    assert errors(at) == []
    [secret] = [c.value for c in at.code]
    assert secret.startswith("ck_")
    return str(secret)


def test_plt_4_a_key_created_on_the_page_works_against_the_api(app: AppTest, org: Org, live_api: str,
                                                               admin_client: CoreClient) -> None:
    index_id = admin_client.create_index({"name": "handbook"}).id
    open_page(app, org, "app_pages/keys.py", "Keys")
    secret = create_key(app, "support assistant", ["knowledge", "memory", "threads"])
    made = [k for k in admin_client.all_keys(org.org_id) if k.name == "support assistant"]
    assert len(made) == 1 and made[0].status == "active" and made[0].last_used_at is None
    # The secret the page showed is the key: it reads its own document and writes a record (the write rule).
    with CoreClient(live_api, secret) as as_key:
        assert as_key.own_key().id == made[0].id
        assert [i.id for i in as_key.all_indexes()] == [index_id]
    written = org.client.post("/memory", headers=bearer(secret), json={"index_id": index_id, "type": "fact",
                                                                       "text": "Written with the new key"})
    assert written.status_code == 201, written.text
    # Shown once: the next run of the page no longer has it.
    run(app)
    assert [c.value for c in app.code] == []
    # The list shows it with its capabilities, status and last use.
    app.sidebar.button(key="refresh").click().run()
    [listed] = frames(app, "last_used")
    row = listed.set_index("name").loc["support assistant"]
    assert row["status"] == "active" and list(row["capabilities"]) == ["knowledge", "memory", "threads"]
    assert row["last_used"] != "never" and row["expires"] == "never"
    assert "The secret of support assistant" not in " ".join(m.value for m in app.markdown)


def test_plt_4_revoke_and_delete_with_confirmation(app: AppTest, org: Org, live_api: str,
                                                   admin_client: CoreClient) -> None:
    open_page(app, org, "app_pages/keys.py", "Keys")
    secret = create_key(app, "to revoke", ["knowledge"], may_write=False)
    key_id = app.session_state["keys_open"]
    app.button(key="keys_revoke").click().run()
    assert admin_client.key(org.org_id, key_id).status == "active"  # nothing happens before the confirmation
    app.button(key="keys_confirm_yes").click().run()
    no_exception(app)
    assert admin_client.key(org.org_id, key_id).status == "revoked"
    assert [s.value for s in app.success] == ["to revoke is revoked."]
    with CoreClient(live_api, secret) as as_key, pytest.raises(ApiError) as refused:
        as_key.own_key()
    assert refused.value.code == "key_revoked"
    app.button(key="keys_delete").click().run()
    app.button(key="keys_confirm_yes").click().run()
    no_exception(app)
    assert key_id not in {k.id for k in admin_client.all_keys(org.org_id)}
    trail = admin_client.key_audit(org.org_id, key_id=key_id).data
    assert [e.action for e in trail] == ["deleted", "revoked", "created"]


def test_plt_5_memory_configuration_and_policy_errors_show_at_the_path_the_api_names(
        app: AppTest, org: Org, admin_client: CoreClient) -> None:
    index_id = admin_client.create_index({"name": "handbook"}).id
    open_page(app, org, "app_pages/keys.py", "Keys")
    create_key(app, "assistant", ["knowledge", "memory"])
    key = admin_client.key(org.org_id, app.session_state["keys_open"])
    v = f"{key.id}_{key.updated_at.timestamp()}"

    app.session_state["keys_tabs"] = "Memory configuration"
    run(app)
    app.checkbox(key=f"keys_inject_{v}").check()
    app.selectbox(key=f"keys_inj_index_{v}").select(index_id)
    app.number_input(key=f"keys_inj_limit_{v}").set_value(500)
    app.button(key=f"keys_memory_save_{key.id}").click().run()
    no_exception(app)
    [message] = errors(app)
    assert "field `memory.injection.limit`" in message
    assert after(app, f"keys_inj_limit_{v}").type == "error"  # right under the field it names
    assert admin_client.key(org.org_id, key.id).memory.get("injection") is None  # nothing was saved

    app.number_input(key=f"keys_inj_limit_{v}").set_value(7)
    app.checkbox(key=f"keys_write_{v}").check()
    app.button(key=f"keys_memory_save_{key.id}").click().run()
    no_exception(app)
    assert errors(app) == []
    saved = admin_client.key(org.org_id, key.id)
    assert saved.memory["injection"]["index_id"] == index_id and saved.memory["injection"]["limit"] == 7
    assert saved.memory["write_tool"] is True
    assert [s.value for s in app.success] == ["Saved the memory configuration of assistant."]

    v = f"{key.id}_{saved.updated_at.timestamp()}"
    app.session_state["keys_tabs"] = "Policy"
    run(app)
    [rules] = frames(app, "effect")
    assert "memory-write-all" in list(rules["id"])
    policy = dict(saved.policy)
    policy["rules"] = [*policy["rules"][:2], {"id": "odd", "effect": "permit", "kind": "memory_recrod"}]
    app.text_area(key=f"keys_policy_text_{v}").input(json.dumps(policy))
    app.button(key=f"keys_policy_save_{key.id}").click().run()
    no_exception(app)
    [message] = errors(app)
    assert message.startswith("At `policy.rules[2].kind`:")
    assert admin_client.key(org.org_id, key.id).policy == saved.policy
    app.text_area(key=f"keys_policy_text_{v}").input("{not json")
    app.button(key=f"keys_policy_save_{key.id}").click().run()
    [message] = errors(app)
    assert message.startswith("At `policy`: The policy is not JSON")

    app.session_state["keys_tabs"] = "Audit trail"
    run(app)
    [trail] = frames(app, "changed")
    assert list(trail["action"]) == ["changed", "changed", "created"]
    assert list(trail["changed"])[:2] == ["memory", "policy"]


# ---------------------------------------------------------------- people


@pytest.fixture
def anna(org: Org, admin_client: CoreClient) -> dict[str, str]:
    """Anna's records in two stores, her thread with a note she wrote, Bert's record and a shared one."""
    stores = {name: admin_client.create_index({"name": name}).id for name in ("handbook", "support")}
    ids = {}
    for label, (store, person, text) in {"tea": ("handbook", "anna", "Anna drinks green tea"),
                                         "vpn": ("support", "anna", "Anna's VPN token expires in May"),
                                         "bert": ("handbook", "bert", "Bert cycles to work"),
                                         "office": ("handbook", None, "The office opens at eight")}.items():
        response = org.client.post("/memory", headers=bearer(org.key, person) if person else org.full,
                                   json={"index_id": stores[store], "type": "fact", "text": text})
        assert response.status_code == 201, response.text
        ids[label] = response.json()["id"]
    thread = org.client.post("/threads", headers=bearer(org.key, "anna"), json={"items": [
        {"type": "message", "role": "user", "content": "Where is my refund?"}]}).json()
    item = thread["items"][0]["id"]
    noted = org.client.put(f"/threads/{thread['id']}/items/{item}/metadata", json={"metadata": {"status": "open"}},
                           headers=bearer(org.key, "anna"))
    assert noted.status_code == 200, noted.text
    return {**ids, "thread": thread["id"], **{f"store_{k}": v for k, v in stores.items()}}


def look_up(at: AppTest, person: str) -> AppTest:
    at.text_input(key="people_id").input(person)
    at.button(key="people_lookup_submit").click().run()
    no_exception(at)
    assert errors(at) == []
    return at


def test_mem_19_people_page_shows_what_is_held_and_erasing_leaves_nothing_on_the_records_page(
        app: AppTest, org: Org, anna: dict[str, str], admin_client: CoreClient) -> None:
    open_page(app, org, "app_pages/people.py", "People")
    look_up(app, "anna")
    shown = {m.label: m.value for m in app.metric}
    assert (shown["Memory records"], shown["Threads"], shown["Messages in her threads"], shown["Notes she wrote"]) \
        == ("2", "1", "1", "1")
    [records] = frames(app, "records")
    assert records.to_dict("records") == [{"store": "handbook", "type": "fact", "records": 1},
                                          {"store": "support", "type": "fact", "records": 1}]
    [threads] = frames(app, "messages")
    assert list(threads["id"]) == [anna["thread"]]
    [notes] = frames(app, "note")
    assert list(notes["note"]) == ["status:open"]

    # The erase button waits for the typed confirmation.
    assert app.button(key="people_erase").disabled
    app.text_input(key="people_confirm_anna").input("ann").run()
    assert app.button(key="people_erase").disabled
    app.text_input(key="people_confirm_anna").input("anna").run()
    app.button(key="people_erase").click().run()
    no_exception(app)
    assert errors(app) == []
    [counts] = frames(app, "removed")
    answered = dict(zip(counts["name"], counts["count"], strict=True))
    assert answered["memory_records"] == 2 and answered["threads"] == 1 and answered["notes"] == 1
    erased = admin_client.audit(AuditQuery(action=["subject.erased"])).data
    assert len(erased) == 1 and erased[0].detail["counts"] == answered

    # The Records page shows nothing of hers: not in the whole list, not when asked for her.
    app.switch_page("app_pages/records.py").run()
    no_exception(app)
    [listed] = frames(app, "effective")
    assert set(listed["id"]) == {anna["bert"], anna["office"]} and "anna" not in set(listed["owner"])
    app.selectbox(key="records_owner").select("one person")
    app.text_input(key="records_person").input("anna")
    app.button(key="records_apply").click().run()
    no_exception(app)
    assert frames(app, "effective") == []
    assert "No records match these filters — pick another store or clear a filter." in [i.value for i in app.info]


def test_plt_7_people_page_mints_a_subject_token_that_sees_her_view(app: AppTest, org: Org, anna: dict[str, str],
                                                                      live_api: str) -> None:
    open_page(app, org, "app_pages/people.py", "People")
    look_up(app, "anna")
    app.selectbox(key="people_token_key").select(org.key_id)
    app.button(key="people_token_submit").click().run()
    no_exception(app)
    assert errors(app) == []
    [token] = [c.value for c in app.code]
    assert token.startswith("cst_")
    with CoreClient(live_api, token) as as_anna:
        texts = {r.text for r in as_anna.memory().data}
    assert texts == {"Anna drinks green tea", "Anna's VPN token expires in May", "The office opens at eight"}


def test_mem_19_people_page_for_someone_unknown_says_nothing_is_held(app: AppTest, org: Org) -> None:
    open_page(app, org, "app_pages/people.py", "People")
    look_up(app, "nobody-we-know")
    assert any(i.value.startswith("Nothing is held of nobody-we-know") for i in app.info)


# ---------------------------------------------------------------- indexes


def test_plt_13_indexes_page_creates_an_index_and_shows_the_api_error_under_the_field(
        app: AppTest, org: Org, admin_client: CoreClient) -> None:
    open_page(app, org, "app_pages/indexes.py", "Indexes")
    assert any(i.value.startswith("No indexes yet") for i in app.info)
    app.text_input(key="indexes_name").input("handbook")
    app.radio(key="indexes_provider").set_value("hashing")
    run(app)
    app.button(key="indexes_create").click().run()
    no_exception(app)
    assert errors(app) == []
    [made] = admin_client.all_indexes()
    assert made.name == "handbook" and made.embedding is not None and made.embedding.provider == "hashing"
    assert [s.value for s in app.success] == [f"Created index handbook (`{made.id}`)."]
    [listed] = frames(app, "embedding")
    assert list(listed["name"]) == ["handbook"]
    assert any(h.value == f"handbook · `{made.id}`" for h in app.subheader)

    # A name in use: the API's refusal under the name field.
    app.text_input(key="indexes_name").input("handbook")
    app.radio(key="indexes_provider").set_value("none")
    run(app)
    app.button(key="indexes_create").click().run()
    no_exception(app)
    [message] = errors(app)
    assert "Code `name_taken`" in message and "field `name`" in message
    # An embedding choice the API does not take (yet) is refused under the embedding choice, never a crash.
    app.text_input(key="indexes_name").input("semantic")
    app.radio(key="indexes_provider").set_value("openai_compatible")
    run(app)
    app.number_input(key="indexes_dimensions_openai_compatible").set_value(99999)
    app.button(key="indexes_create").click().run()
    no_exception(app)
    [message] = errors(app)
    assert "field `embedding.dimensions`" in message
    assert [i.name for i in admin_client.all_indexes()] == ["handbook"]


def test_plt_13_the_local_choice_is_offered_and_a_refusal_shows_under_it(app: AppTest, org: Org,
                                                                         admin_client: CoreClient) -> None:
    open_page(app, org, "app_pages/indexes.py", "Indexes")
    provider = app.radio(key="indexes_provider")
    assert provider.options[0] == "Local model (recommended)"
    app.text_input(key="indexes_name").input("semantic")
    app.button(key="indexes_create").click().run()
    no_exception(app)
    made = [i for i in admin_client.all_indexes() if i.name == "semantic"]
    if made:  # an installation with the local provider creates it
        assert made[0].embedding is not None and made[0].embedding.provider == "local"
    else:  # one without it refuses the choice, and the page says so under the embedding field
        [message] = errors(app)
        assert "field `embedding" in message and "Code `" in message


def test_plt_13_deleting_an_index_needs_its_name_typed(app: AppTest, org: Org, admin_client: CoreClient) -> None:
    made = admin_client.create_index({"name": "scratch"})
    open_page(app, org, "app_pages/indexes.py", "Indexes")
    app.session_state["indexes_open"] = made.id
    run(app)
    assert app.button(key="indexes_delete").disabled
    app.text_input(key=f"indexes_confirm_{made.id}").input("scratch").run()
    app.button(key="indexes_delete").click().run()
    no_exception(app)
    assert admin_client.all_indexes() == []
    assert [s.value for s in app.success] == ["Deleted index scratch with its records."]


def test_dsh_empty_states_send_the_administrator_to_the_indexes_page(app: AppTest, org: Org) -> None:
    log_in(app, org.admin_email, org.admin_password)
    no_exception(app)
    assert not any("POST /" in i.value for i in app.info)
    app.button(key="overview_go_indexes").click().run()
    no_exception(app)
    assert [t.value for t in app.title] == ["Indexes"]
    for page, button in (("app_pages/stores.py", "stores_go_indexes"), ("app_pages/records.py", "records_go_indexes"),
                         ("app_pages/previewer.py", "preview_go_indexes")):
        app.switch_page(page).run()
        no_exception(app)
        assert not any("POST /" in i.value for i in app.info)
        app.button(key=button).click().run()
        assert [t.value for t in app.title] == ["Indexes"]
