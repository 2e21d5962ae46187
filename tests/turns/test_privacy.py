"""TRN-10: a key with `privacy.pseudonymize` sends placeholders to the model and keeps real values."""

from __future__ import annotations

import json
from typing import Any

from backend.access.policy import writer_policy
from tests.helpers import Org, bearer
from tests.turns.conftest import items, turn

ANNA = {"name": ["Anna de Vries"], "email": ["anna@example.com"]}


def _hiding_key(org: Org, **memory: Any) -> str:
    return str(org.make_key(privacy={"pseudonymize": True}, policy=writer_policy(), memory=memory or None)["secret"])


def test_trn_10_the_model_sees_placeholders_and_the_thread_keeps_real_values(client: Any, org: Org, scripted: Any,
                                                                           db: Any) -> None:
    key = _hiding_key(org)
    headers = bearer(key, subject="anna", attributes=ANNA)
    scripted.reply("I will write to <EMAIL_1> about IBAN <IBAN_1>, <PERSON_1>.").reply("Noted, <PERSON_1>.")
    text = "I am Anna de Vries, mail me at anna@example.com; my IBAN is NL91ABNA0417164300."
    first = turn(client, headers, input=text)
    sent = json.dumps(scripted.requests[0]["messages"])
    for value in ("Anna de Vries", "anna@example.com", "NL91ABNA0417164300"):
        assert value not in sent
    user = scripted.messages(0)[-1]["content"]
    assert "<PERSON_1>" in user and "<EMAIL_1>" in user and "<IBAN_1>" in user
    assert first["output_text"] == "I will write to anna@example.com about IBAN NL91ABNA0417164300, Anna de Vries."
    kept = items(client, headers, first["thread_id"])
    assert kept[0]["content"] == text and "anna@example.com" in kept[1]["content"][0]["text"]
    # the same placeholders in the next turn of the thread, for the history and the new input
    turn(client, headers, input="Again: anna@example.com", thread_id=first["thread_id"])
    second = scripted.messages(1)
    assert second[-1]["content"] == "Again: <EMAIL_1>"
    assert second[-2]["content"].startswith("I will write to <EMAIL_1>")
    marked = db.execute("SELECT pseudonymized FROM threads WHERE id = %s", (first["thread_id"],)).fetchone()[0]
    assert marked is True


def test_trn_10_tool_arguments_are_restored_before_the_tool_runs(client: Any, org: Org, scripted: Any) -> None:
    index_id = client.post("/indexes", headers=org.full, json={"name": "support"}).json()["id"]
    key = _hiding_key(org, write_tool=True)
    headers = bearer(key, subject="anna", attributes=ANNA)
    write = f"memory__{index_id}__write"
    scripted.reply(tool_calls=[(write, {"type": "fact", "text": "<PERSON_1> can be reached at <EMAIL_1>"})])
    scripted.reply("Saved.")
    answer = turn(client, headers, input="Remember: I am Anna de Vries and anna@example.com is my address.",
                  tools=[{"type": "tool", "name": write}])
    record_id = json.loads(answer["output"][1]["output"])["memory_id"]
    record = client.get(f"/memory/{record_id}", headers=headers).json()
    assert record["text"] == "Anna de Vries can be reached at anna@example.com"
    # the tool result the model reads next is hidden too
    assert "anna@example.com" not in json.dumps(scripted.requests[1]["messages"])


def test_trn_10_a_pseudonymised_thread_s_summaries_are_written_from_placeholders(client: Any, org: Org,
                                                                               scripted: Any, run_jobs: Any,
                                                                               db: Any) -> None:
    headers = bearer(_hiding_key(org), subject="anna", attributes=ANNA)
    thread_id = None
    for n in range(8):
        body: dict[str, Any] = {"input": f"Note {n}: I am Anna de Vries, write to anna@example.com"}
        if thread_id:
            body["thread_id"] = thread_id
        thread_id = turn(client, headers, **body)["thread_id"]
    scripted.reply("<PERSON_1> asked three times to write to <EMAIL_1>.")
    run_jobs()
    assert "anna@example.com" not in json.dumps(scripted.requests[-1]["messages"])
    (text,) = db.execute("SELECT text FROM thread_summaries").fetchone()
    assert text == "Anna de Vries asked three times to write to anna@example.com."
