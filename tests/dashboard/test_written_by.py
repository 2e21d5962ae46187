"""DSH-3: a record's detail says who wrote it — a key, an administrator, a model's write tool with its key and agent,
or extraction with its window and thread — from what the API answers."""

from __future__ import annotations

from typing import Any

from streamlit.testing.v1 import AppTest

from backend.access.policy import writer_policy
from tests.dashboard.conftest import log_in, no_exception
from tests.extraction.util import answer, conversation, new, records, run_now, switch_on
from tests.helpers import bearer


def written_by(at: AppTest, record_id: str) -> str:
    at.text_input(key="records_open_id").input(record_id).run()
    no_exception(at)
    found = [m.value for m in at.markdown if m.value.startswith("**Written by**")]
    assert len(found) == 1, found
    return str(found[0].removeprefix("**Written by** "))


def test_dsh_3_the_detail_names_the_key_the_administrator_the_agent_or_extraction(app, org, scripted, drain):
    index_id = org.client.post("/indexes", headers=org.full, json={"name": "support"}).json()["id"]
    by_key = org.client.post("/memory", headers=org.full, json={"index_id": index_id, "type": "fact",
                                                                "text": "The office opens at eight"}).json()["id"]
    by_admin = org.client.post("/memory", headers=org.admin, json={"index_id": index_id, "type": "fact",
                                                                   "text": "Invoices go out monthly"}).json()["id"]
    # Extraction (before any turn, so bert's thread is the only one it reads).
    thread_id = conversation(org, "bert", ("user", "I cycle to work."))
    switch_on(org, index_id)
    scripted.reply(answer(new("fact", "Cycles to work.")))
    run_now(org, index_id)
    drain()
    extracted = next(r for r in records(org, index_id, "bert") if r["source"] == "extraction")
    # A model's write tool in a turn an agent answered.
    writer = org.make_key(memory={"write_tool": True}, policy=writer_policy())
    agent = org.client.post("/agents", headers=org.full, json={"name": "helpdesk", "model": "scripted",
                                                               "instructions": "Answer briefly."}).json()["id"]
    write = f"memory__{index_id}__write"
    scripted.reply(tool_calls=[(write, {"type": "preference", "text": "Prefers tea"})]).reply("Noted.")
    turned = org.client.post("/responses", headers=bearer(writer["secret"], subject="anna"), json={
        "agent_id": agent, "input": "I prefer tea.", "tools": [{"type": "tool", "name": write}]})
    assert turned.status_code == 201, turned.text
    by_model = next(r["id"] for r in records(org, index_id, "anna") if r["source"] == "model")

    at = log_in(app, org.admin_email, org.admin_password)
    at.switch_page("app_pages/records.py").run()
    no_exception(at)
    assert written_by(at, by_key) == f"key `{org.key_id}`"
    assert written_by(at, by_admin).startswith("administrator `")
    model_line: Any = written_by(at, by_model)
    assert model_line == (f"a model's write tool, with key `{writer['id']}` and agent `{agent}` in response "
                          f"`{turned.json()['id']}`")
    assert written_by(at, extracted["id"]) == (f"extraction, reading window `{extracted['provenance']['window_id']}` "
                                                f"of thread `{thread_id}`")
