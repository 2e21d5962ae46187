"""DSH-5: the extraction health page against the real API (and, where a model is needed, the real worker and the
scripted model): counts per state and reason, the failed windows' threads, the switch's editor and *Run now*."""

from __future__ import annotations

from typing import Any

from streamlit.testing.v1 import AppTest

from tests.dashboard.conftest import log_in, no_exception
from tests.dashboard.extraction_seed import expected, seed_windows
from tests.extraction.util import answer, conversation, new, new_store, run_now, switch_on


def open_page(app: AppTest, org: Any) -> AppTest:
    log_in(app, org.admin_email, org.admin_password)
    app.switch_page("app_pages/extraction.py").run()
    no_exception(app)
    return app


def refresh(at: AppTest) -> AppTest:
    at.button(key="refresh").click().run()
    no_exception(at)
    return at


def metrics(at: AppTest) -> dict[str, int]:
    return {m.label: int(m.value) for m in at.metric if m.label in ("Ready", "Failed", "Queued", "Parked")}


def captions(at: AppTest) -> str:
    return "\n".join(c.value for c in at.caption)


def test_dsh_5_seeded_windows_are_counted_per_state_and_reason_and_a_failed_window_opens_its_thread(
        app, org, db, scripted):
    index_id = new_store(org)
    thread_id = conversation(org, "anna", ("user", "I moved to Utrecht."), ("assistant", "Noted!"))
    switch_on(org, index_id)
    seed_windows(db, org.org_id, index_id, 1000, thread_id)
    want = expected(1000)
    at = open_page(app, org)
    assert metrics(at) == {state.capitalize(): n for state, n in want["states"].items()}
    text = captions(at)
    for code, n in want["codes"].items():
        assert f"`{code}` {n}" in text
    assert any("nothing to fix" in m.value for m in at.markdown)
    failed = at.dataframe(key="extraction_failed").value
    assert len(failed) == 50 and set(failed["thread"]) == {thread_id}
    assert set(failed["error_code"]) == set(want["codes"])
    at.selectbox(key="extraction_thread").select(thread_id).run()
    at.button(key="extraction_open_thread").click().run()
    no_exception(at)
    assert at.text_input(key="threads_open_id").value == thread_id
    items = [d.value for d in at.dataframe if "text" in d.value.columns and "writer" in d.value.columns]
    assert items and list(items[0]["text"]) == ["I moved to Utrecht.", "Noted!"]


def test_dsh_5_failures_by_reason_and_a_new_model_in_the_editor_queues_them_again(app, org, scripted, drain):
    index_id = new_store(org)
    conversation(org, "anna", ("user", "I moved to Utrecht last month."))
    switch_on(org, index_id)
    scripted.reply(answer(new("fact", "Lives in Utrecht.")), usage=(300, 40))
    run_now(org, index_id)
    drain()
    conversation(org, "bert", ("user", "I like tea."))
    scripted.reply("not json", usage=(200, 5))
    run_now(org, index_id)
    drain()
    at = open_page(app, org)
    assert metrics(at) == {"Ready": 1, "Failed": 1, "Queued": 0, "Parked": 0}
    assert "`invalid_model_output` 1" in captions(at)
    # A refusal of the API shows under the field it names.
    at.checkbox(key="extraction_field_lessons").check()
    at.button(key="extraction_save").click().run()
    no_exception(at)
    assert [e.value for e in at.error if "`lessons`" in e.value]
    # Another model: the failed window is queued again and read by the worker.
    assert org.client.post("/admin/models", headers=org.admin, json={
        "id": "other", "provider": "openai_compatible", "base_url": scripted.url}).status_code == 201
    refresh(at)
    at.checkbox(key="extraction_field_lessons").uncheck()
    at.selectbox(key="extraction_field_model").select("other")
    at.button(key="extraction_save").click().run()
    no_exception(at)
    assert any("Switch saved" in s.value for s in at.success)
    assert metrics(at)["Queued"] == 1 and metrics(at)["Failed"] == 0
    scripted.reply(answer(new("preference", "Likes tea.")))
    drain()
    refresh(at)
    assert metrics(at) == {"Ready": 2, "Failed": 0, "Queued": 0, "Parked": 0}
    assert "No window has failed." in captions(at)


def test_dsh_5_a_store_without_a_switch_says_what_to_do_and_run_now_queues_a_run(app, org, scripted, client):
    index_id = new_store(org)
    at = open_page(app, org)
    assert any("not set up" in i.value for i in at.info)
    at.selectbox(key="extraction_field_model").select("scripted")
    at.button(key="extraction_save").click().run()
    no_exception(at)
    switch = org.client.get(f"/memory/stores/{index_id}/extraction", headers=org.full).json()
    assert switch["state"] == "active" and switch["author_admin_id"] and switch["model"] == "scripted"
    at.button(key="extraction_run").click().run()
    no_exception(at)
    runs = org.client.get(f"/memory/stores/{index_id}/extraction/runs", headers=org.full).json()["data"]
    assert [r["trigger"] for r in runs] == ["manual"]
    assert any(runs[0]["id"] in s.value for s in at.success)
    # A model no longer offered: the badge says so with its fix, and a run cannot be asked for.
    assert client.delete("/admin/models/scripted", headers=org.admin,
                         params={"org_id": org.org_id}).status_code in (200, 204)
    refresh(at)
    assert any("pick an offered model" in m.value for m in at.markdown)
    assert at.button(key="extraction_run").disabled


def test_ext_1_a_replay_model_is_labelled_in_the_switchs_caption_and_the_model_choice(app, org, scripted):
    """A `replay` model answers from recordings: wherever the page names it, it says so (the label of GET /models)."""
    offered = org.client.post("/admin/models", headers=org.admin, json={
        "id": "demo-extraction", "provider": "replay", "model": "demo-extraction", "org_id": org.org_id})
    assert offered.status_code == 201, offered.text
    label = offered.json()["label"]
    assert "replay" in label
    switch_on(org, new_store(org), model="demo-extraction")
    at = open_page(app, org)
    assert f"Model `demo-extraction` — {label}" in captions(at)
    choice = at.selectbox(key="extraction_field_model")
    assert choice.value == "demo-extraction"  # the id is what is saved; the label is how it shows
    assert f"demo-extraction — {label}" in choice.options
    assert not any(option == "demo-extraction" for option in choice.options)
