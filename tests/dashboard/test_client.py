"""shared.client against the real API: decoding into the schema Structs, errors, filters and cursors."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from shared.client import ApiError, CoreClient, query_params
from shared.schemas.memory import MemoryHistory, MemoryOut, MemoryPage, MemoryPatch, MemoryQuery
from shared.schemas.platform import AuditPage, AuditQuery, ChainStatus, KeyCreate, LoginOut
from shared.schemas.stores import CommitmentsSettings, StoreSettingsOut, StoreSettingsPatch
from tests.dashboard.conftest import _free_port_closed
from tests.helpers import Org, bearer


def test_plt_14a_login_returns_token_and_admin(live_api: str, org: Org) -> None:
    with CoreClient(live_api) as client:
        result = client.login(org.admin_email, org.admin_password)
        assert isinstance(result, LoginOut)
        assert result.token.startswith("cat_") and client.token == result.token
        assert (result.admin.email, result.admin.role, result.admin.org_id) == (org.admin_email, "admin", org.org_id)
        assert [o.id for o in client.orgs().data] == [org.org_id]


def test_plt_14_wrong_password_raises_api_error_with_code(live_api: str, org: Org) -> None:
    with CoreClient(live_api) as client, pytest.raises(ApiError) as caught:
        client.login(org.admin_email, "not-the-password")
    assert (caught.value.status, caught.value.code) == (401, "bad_login")
    assert caught.value.message == "Wrong e-mail address or password."
    assert client.token is None


def test_plt_2_logout_ends_the_token(admin_client: CoreClient) -> None:
    token = admin_client.token
    admin_client.logout()
    with CoreClient(admin_client.base_url, token) as stale, pytest.raises(ApiError) as caught:
        stale.indexes()
    assert (caught.value.status, caught.value.code) == (401, "bad_credential")


def test_plt_4_create_and_list_keys(admin_client: CoreClient, org: Org) -> None:
    created = admin_client.create_key(org.org_id, KeyCreate(name="reader", capabilities=["knowledge"]))
    assert created.secret.startswith("ck_") and created.status == "active"
    assert {(k.name, k.status) for k in admin_client.all_keys(org.org_id)} == {("bootstrap", "active"),
                                                                               ("reader", "active")}


def test_plt_5_key_audit_trail(admin_client: CoreClient, org: Org) -> None:
    created = admin_client.create_key(org.org_id, KeyCreate(name="reader", capabilities=["knowledge"]))
    trail = admin_client.key_audit(org.org_id, key_id=created.id)
    assert [(e.key_id, e.action) for e in trail.data] == [(created.id, "created")]
    admin_client.update_key(org.org_id, created.id, {"name": "renamed"})
    first = admin_client.key_audit(org.org_id, key_id=created.id, limit=1)
    assert [e.action for e in first.data] == ["changed"] and first.next_cursor is not None
    older = admin_client.key_audit(org.org_id, key_id=created.id, limit=1, cursor=first.next_cursor)
    assert [e.action for e in older.data] == ["created"]


def test_plt_14_validation_error_names_the_field(admin_client: CoreClient, org: Org) -> None:
    with pytest.raises(ApiError) as caught:
        admin_client.create_key(org.org_id, KeyCreate(name="bad", capabilities=["memory"]))
    assert (caught.value.status, caught.value.param) == (422, "capabilities")


def test_plt_12_audit_filters_repeat_action_and_follow_cursors(admin_client: CoreClient, org: Org) -> None:
    for name in ("a", "b", "c"):
        org.client.post("/indexes", json={"name": name}, headers=org.full)
    page = admin_client.audit(AuditQuery(action=["index.created", "key.created"]), limit=2)
    assert isinstance(page, AuditPage)
    assert [e.action for e in page.data] == ["index.created", "index.created"] and page.next_cursor
    rest = admin_client.audit(AuditQuery(action=["index.created", "key.created"]), cursor=page.next_cursor)
    assert [e.action for e in rest.data] == ["index.created", "key.created"] and rest.next_cursor is None
    walked = admin_client.audit_events(AuditQuery(action=["index.created"]), max_events=10, page_size=1)
    assert [e.detail["name"] for e in walked] == ["c", "b", "a"]
    future = AuditQuery(from_=datetime.now(UTC) + timedelta(days=1))
    assert admin_client.audit(future).data == []


def test_plt_12_audit_filter_refuses_naive_instants() -> None:
    with pytest.raises(ValueError, match="offset"):
        query_params(AuditQuery(from_=datetime(2026, 1, 1)))


def test_plt_12_chain_status(admin_client: CoreClient, org: Org) -> None:
    status = admin_client.audit_verify()
    assert isinstance(status, ChainStatus)
    assert (status.org_id, status.intact, status.broken_at_seq) == (org.org_id, True, None)
    assert status.events >= 1


def test_plt_2_operator_names_the_organisation(live_api: str, org: Org, other_org: Org,
                                               operator: dict[str, str]) -> None:
    with CoreClient(live_api) as client:
        assert client.login(operator["email"], operator["password"]).admin.role == "operator"
        assert {o.name for o in client.orgs().data} == {"Acme", "Globex"}
        with pytest.raises(ApiError) as caught:
            client.indexes()
        assert (caught.value.code, caught.value.param) == ("org_required", "X-Core-Org")
        client.org_id = other_org.org_id
        assert client.audit_verify().org_id == other_org.org_id
        assert client.for_org(org.org_id).audit_verify().org_id == org.org_id


def test_unreachable_api_is_an_api_error() -> None:
    with CoreClient(f"http://127.0.0.1:{_free_port_closed()}", timeout=2) as client, pytest.raises(ApiError) as caught:
        client.health()
    assert (caught.value.status, caught.value.code) == (0, "api_unreachable")


# ---------------------------------------------------------------- memory records and store settings (DSH-3, DSH-4)


def _store(org: Org, name: str = "notes") -> str:
    response = org.client.post("/indexes", json={"name": name}, headers=org.admin)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def _write(org: Org, index_id: str, text: str, person: str | None = None, **fields: object) -> str:
    headers = bearer(org.key, person) if person else org.full
    response = org.client.post("/memory", json={"index_id": index_id, "type": "fact", "text": text, **fields},
                               headers=headers)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def test_mem_memory_filters_and_cursor(admin_client: CoreClient, org: Org) -> None:
    store = _store(org)
    other = _store(org, "other")
    shared = _write(org, store, "The office opens at eight", tags=["office"])
    anna = _write(org, store, "Anna drinks tea", person="anna", labels={"team": "support"})
    _write(org, other, "Elsewhere")
    page = admin_client.memory(MemoryQuery(index_id=store))
    assert isinstance(page, MemoryPage) and [r.id for r in page.data] == [anna, shared]
    assert [r.id for r in admin_client.memory(MemoryQuery(index_id=store, subject="anna")).data] == [anna]
    assert [r.id for r in admin_client.memory(MemoryQuery(index_id=store, tag=["office"])).data] == [shared]
    assert [r.id for r in admin_client.memory(MemoryQuery(label=["team:support"])).data] == [anna]
    assert [r.id for r in admin_client.memory(MemoryQuery(index_id=store, q="tea")).data] == [anna]
    first = admin_client.memory(MemoryQuery(index_id=store), limit=1)
    assert [r.id for r in first.data] == [anna] and first.next_cursor
    rest = admin_client.memory(MemoryQuery(index_id=store), cursor=first.next_cursor, limit=1)
    assert [r.id for r in rest.data] == [shared]


def test_mem_memory_record_edit_history_verify_delete(admin_client: CoreClient, org: Org) -> None:
    store = _store(org)
    record_id = _write(org, store, "Bert likes coffee", person="bert")
    changed = admin_client.update_memory(record_id, MemoryPatch(text="Bert likes strong coffee", confidence=0.5))
    assert isinstance(changed, MemoryOut) and (changed.text, changed.confidence, changed.version) == (
        "Bert likes strong coffee", 0.5, 2)
    assert admin_client.memory_record(record_id).text == "Bert likes strong coffee"
    history = admin_client.memory_history(record_id)
    assert isinstance(history, MemoryHistory)
    assert [v.action for v in history.versions][:2] == ["created", "updated"]
    assert admin_client.verify_memory(record_id).verified is True
    with pytest.raises(ApiError) as caught:
        admin_client.update_memory(record_id, {"confidence": 2})
    assert (caught.value.status, caught.value.param) == (422, "confidence")
    admin_client.delete_memory(record_id)
    with pytest.raises(ApiError) as caught:
        admin_client.memory_record(record_id)
    assert caught.value.status == 404


def test_inj_3_store_settings_read_patch_and_field_error(admin_client: CoreClient, org: Org) -> None:
    store = _store(org)
    settings = admin_client.store_settings(store)
    assert isinstance(settings, StoreSettingsOut) and settings.index_id == store
    assert settings.commitments == settings.defaults.commitments
    changed = admin_client.update_store_settings(store, StoreSettingsPatch(commitments=CommitmentsSettings(
        inject_limit=7)))
    assert changed.commitments.inject_limit == 7 and "commitments" in changed.customised
    assert admin_client.store_settings(store).commitments.inject_limit == 7
    with pytest.raises(ApiError) as caught:
        admin_client.update_store_settings(store, {"injection": {"budget_tokens": -1}})
    assert (caught.value.status, caught.value.param) == (422, "injection.budget_tokens")
    events = admin_client.audit(AuditQuery(action=["store.settings_changed"], object_id=store)).data
    assert [e.object_id for e in events] == [store]


# ---------------------------------------------------------------- threads (DSH-7)


def test_dsh_7_thread_reads_decode_into_the_schemas(admin_client: CoreClient, org: Org) -> None:
    from shared.schemas.threads import (
        FunctionCallOut,
        ItemSearchQuery,
        MessageOut,
        SearchPage,
        StateOut,
        ThreadPage,
        ThreadQuery,
    )

    created = org.client.post("/threads", headers=bearer(org.key, "anna"), json={
        "metadata": {"dossier": "4711"},
        "items": [{"type": "message", "role": "user", "content": "Where is my refund?"},
                  {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": "{}"}]})
    assert created.status_code == 201, created.text
    anna = created.json()["id"]
    shared = org.client.post("/threads", json={}, headers=org.full).json()["id"]

    page = admin_client.threads(ThreadQuery(subject="anna"))
    assert isinstance(page, ThreadPage) and [t.id for t in page.data] == [anna]
    assert [t.id for t in admin_client.threads(ThreadQuery(subject="")).data] == [shared]
    assert [t.id for t in admin_client.threads(ThreadQuery(metadata=["dossier:4711"])).data] == [anna]
    first = admin_client.threads(limit=1)
    assert [t.id for t in first.data] == [shared] and first.next_cursor
    assert [t.id for t in admin_client.threads(cursor=first.next_cursor, limit=1).data] == [anna]
    thread = admin_client.thread(anna)
    assert (thread.subject, thread.message_counts.user, thread.metadata) == ("anna", 1, {"dossier": "4711"})

    items = admin_client.thread_items(anna).items
    assert [type(i) for i in items] == [MessageOut, FunctionCallOut]
    newest = admin_client.thread_items(anna, order="desc", limit=1)
    assert [i.position for i in newest.items] == [2] and newest.next_cursor
    noted = org.client.put(f"/threads/{anna}/items/{items[0].id}/metadata", json={"metadata": {"status": "open"}},
                           headers=org.full)
    assert noted.status_code == 200, noted.text
    assert [(n.by, n.metadata) for n in admin_client.item_notes(anna, items[0].id).data] == [(None, {"status": "open"})]
    state = admin_client.thread_state(anna)
    assert isinstance(state, StateOut) and (state.state, state.version, state.updated_at) == ({}, 0, None)
    assert admin_client.thread_summaries(anna).data == []

    found = admin_client.search_messages(ItemSearchQuery(q="refund"))
    assert isinstance(found, SearchPage) and [(h.item_id, h.subject) for h in found.data] == [(items[0].id, "anna")]
    assert found.searched_to is not None
    assert admin_client.search_messages(ItemSearchQuery(q="refund", role="assistant")).data == []
    by_note = admin_client.search_messages(ItemSearchQuery(metadata=["status:open"])).data
    assert [h.item_id for h in by_note] == [items[0].id]
    with pytest.raises(ApiError) as caught:
        admin_client.search_messages(ItemSearchQuery(q="-refund"))
    assert (caught.value.status, caught.value.code, caught.value.param) == (400, "exclusions_only", "q")
    with pytest.raises(ValueError, match="offset"):
        admin_client.search_messages(ItemSearchQuery(q="refund", from_=datetime(2026, 1, 1)))
