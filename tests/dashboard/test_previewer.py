"""DSH-6, DSH-11: the injection previewer page shows exactly the block the API's preview returns."""

from __future__ import annotations

import json

from streamlit.testing.v1 import AppTest

from tests.dashboard.conftest import log_in
from tests.helpers import bearer


def _store(client, org):
    index_id = client.post("/indexes", headers=org.full, json={"name": "support"}).json()["id"]
    anna = bearer(org.key, subject="anna")
    for body, headers in (({"type": "fact", "text": "Has a dog named Rex"}, anna),
                          ({"type": "behaviour", "text": "Answer in Dutch"}, anna),
                          ({"type": "fact", "text": "Expense claims go to finance by the 25th"}, org.full),
                          ({"type": "fact", "text": "Bob likes tea"}, bearer(org.key, subject="bob"))):
        assert client.post("/memory", headers=headers, json={"index_id": index_id, **body}).status_code == 201
    return index_id


def _open(app: AppTest, org) -> AppTest:
    log_in(app, org.admin_email, org.admin_password)
    app.switch_page("app_pages/previewer.py").run()
    assert not app.exception
    return app


def test_dsh_6_preview_block_equals_the_api_preview(app, org, client):
    index_id = _store(client, org)
    expected = client.post(f"/memory/stores/{index_id}/injection/preview", headers=org.admin,
                           json={"subject": {"id": "anna"}, "input": "dog"}).json()
    at = _open(app, org)
    at.text_input(key="preview_person").input("anna")
    at.text_area(key="preview_input").input("dog")
    at.button(key="preview_submit").click().run()
    assert not at.exception
    assert [c.value for c in at.code] == [expected["block"]]
    assert "Bob likes tea" not in expected["block"] and "Answer in Dutch" in expected["block"]
    assert at.metric[0].value == f"{expected['trace']['estimated_tokens']} / {expected['trace']['budget_tokens']}"


def test_dsh_6_nobody_gets_only_shared_records_and_bad_attributes_are_explained(app, org, client):
    index_id = _store(client, org)
    at = _open(app, org)
    at.checkbox(key="preview_nobody").check()
    at.button(key="preview_submit").click().run()
    assert [c.value for c in at.code] == [
        '[organisation]\n{"type":"fact","confidence":"100%","text":"Expense claims go to finance by the 25th"}']
    at.checkbox(key="preview_nobody").uncheck()
    at.text_input(key="preview_person").input("anna")
    at.text_input(key="preview_attributes").input('{"department": "payroll"}')
    at.button(key="preview_submit").click().run()
    assert any("list of strings" in e.value for e in at.error)
    assert index_id


def test_dsh_6_a_key_without_block_previews_nothing_unless_the_store_is_forced(app, org, client):
    index_id = _store(client, org)
    blockless = org.make_key(["knowledge", "memory"], name="blockless")
    at = _open(app, org)
    at.selectbox(key="preview_key").select(blockless["id"])
    at.text_input(key="preview_person").input("anna")
    at.button(key="preview_submit").click().run()
    assert not at.exception
    assert at.info[0].value == "Nothing is injected: this key injects no block (its memory.injection is not set)."
    assert not at.code
    at.checkbox(key="preview_override").check()
    at.button(key="preview_submit").click().run()
    assert any("Has a dog named Rex" in c.value for c in at.code)
    assert index_id


def test_dsh_6_compare_two_people_side_by_side_with_the_shared_share(app, org, client):
    index_id = _store(client, org)
    expected = {who: client.post(f"/memory/stores/{index_id}/injection/preview", headers=org.admin,
                                 json={"subject": {"id": who}}).json() for who in ("anna", "bob")}
    at = _open(app, org)
    at.toggle(key="preview_compare").set_value(True).run()
    at.text_input(key="preview_person").input("anna")
    at.text_input(key="preview_person_b").input("bob")
    at.button(key="preview_submit").click().run()
    assert not at.exception and not at.error
    assert [s.value for s in at.subheader] == ["anna", "bob"]
    assert [c.value for c in at.code] == [expected["anna"]["block"], expected["bob"]["block"]]
    assert "Bob likes tea" not in at.code[0].value and "Has a dog named Rex" not in at.code[1].value
    # The shared share: the shared line's tokens over the budget, against the 40% line.
    shared = sum(r["tokens"] for r in expected["anna"]["records"] if r["owner"] is None)
    budget = expected["anna"]["trace"]["budget_tokens"]
    metrics = {m.label: m.value for m in at.metric[:2]}
    assert metrics["Shared share"] == f"{shared / budget:.0%}"
    charts = [json.loads(c.proto.spec) for c in at.get("vega_lite_chart")]
    limits = [layer for spec in charts for layer in spec.get("layer", []) if layer["mark"]["type"] == "tick"]
    assert len(limits) == 2
    # The records per section: every injected record with its section and owner.
    tables = [d.value for d in at.dataframe if "line" in d.value.columns]
    assert [sorted(zip(t["section"], t["owner"], strict=True)) for t in tables] == [
        sorted((r["section"], r["owner"] or "shared") for r in expected[who]["records"]) for who in ("anna", "bob")]


def test_dsh_6_an_agents_block_is_previewed_when_the_agent_is_picked(app, org, client, scripted):
    index_id = _store(client, org)
    blockless = org.make_key(["knowledge", "memory"], name="blockless")
    agent = client.post("/agents", headers=org.admin, json={"name": "helpdesk", "model": "scripted",
                                                            "instructions": "Answer briefly.",
                                                            "memory_injection": {"index_id": index_id}})
    assert agent.status_code == 201, agent.text
    expected = client.post(f"/memory/stores/{index_id}/injection/preview", headers=org.admin, json={
        "subject": {"id": "anna"}, "key_id": blockless["id"], "agent_id": agent.json()["id"]}).json()
    at = _open(app, org)
    at.selectbox(key="preview_key").select(blockless["id"])
    at.text_input(key="preview_person").input("anna")
    at.button(key="preview_submit").click().run()
    assert not at.code  # the key alone injects nothing
    at.selectbox(key="preview_agent").select(agent.json()["id"])
    at.button(key="preview_submit").click().run()
    assert not at.exception and not at.error
    assert [c.value for c in at.code] == [expected["block"]]
    assert "Has a dog named Rex" in expected["block"]
