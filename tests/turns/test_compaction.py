"""TRN-6 through turns: the first summary after the eighth turn, summaries sent instead of the turns they cover,
full items while a summary is missing, `window`, and no compaction without the capability."""

from __future__ import annotations

from typing import Any

from tests.helpers import Org, bearer
from tests.turns.conftest import anna, turn


def _turns(client: Any, headers: dict[str, str], count: int, thread_id: str | None = None) -> str:
    for n in range(1, count + 1):
        body: dict[str, Any] = {"input": f"message {n}"}
        if thread_id:
            body["thread_id"] = thread_id
        thread_id = turn(client, headers, **body)["thread_id"]
    assert thread_id is not None
    return thread_id


def test_trn_6_the_first_summary_follows_the_eighth_turn_and_replaces_its_turns(client: Any, org: Org,
                                                                                scripted: Any, run_jobs: Any,
                                                                                db: Any) -> None:
    thread_id = _turns(client, anna(org), 7)
    run_jobs()
    assert db.execute("SELECT count(*) FROM thread_summaries").fetchone()[0] == 0
    _turns(client, anna(org), 1, thread_id)
    # before the job has run, the ninth turn sends every item in full: nothing is lost
    turn(client, anna(org), input="message 9", thread_id=thread_id)
    contents = [m["content"] for m in scripted.messages(-1)]
    assert contents[0] == "message 1" and contents[-1] == "message 9"
    scripted.reply("Anna sent messages one to three.")
    run_jobs()
    rows = db.execute("SELECT from_position, to_position, level, text FROM thread_summaries").fetchall()
    assert rows == [(1, 6, 1, "Anna sent messages one to three.")]
    summary_request = scripted.messages(-1)
    assert "message 1" in str(summary_request) and "message 4" not in str(summary_request)
    turn(client, anna(org), input="message 10", thread_id=thread_id)
    sent = scripted.messages(-1)
    assert sent[0]["role"] == "system" and "Anna sent messages one to three." in sent[0]["content"]
    user_lines = [m["content"] for m in sent if m["role"] == "user"]
    assert user_lines[0] == "message 4" and user_lines[-1] == "message 10"
    listed = client.get(f"/threads/{thread_id}/summaries", headers=anna(org)).json()["data"]
    assert [(s["from_position"], s["to_position"], s["model"]) for s in listed] == [(1, 6, "scripted")]
    usage_jobs = db.execute("SELECT count(*) FROM usage_events WHERE job = 'compaction'").fetchone()[0]
    assert usage_jobs == 1


def test_trn_6_window_mode_and_a_key_without_compaction(client: Any, org: Org, scripted: Any, run_jobs: Any,
                                                        db: Any) -> None:
    window = org.make_key(memory={"compaction": {"mode": "window", "keep_recent_turns": 2}})["secret"]
    thread_id = _turns(client, bearer(window, subject="anna"), 4)
    run_jobs()
    assert db.execute("SELECT count(*) FROM thread_summaries").fetchone()[0] == 0
    turn(client, bearer(window, subject="anna"), input="message 5", thread_id=thread_id)
    assert [m["content"] for m in scripted.messages(-1) if m["role"] == "user"] == ["message 3", "message 4",
                                                                                     "message 5"]
    plain = org.make_key(["knowledge", "memory", "threads"])["secret"]
    other = _turns(client, bearer(plain, subject="anna"), 9)
    run_jobs()
    assert db.execute("SELECT count(*) FROM thread_summaries WHERE thread_id = %s", (other,)).fetchone()[0] == 0
    turn(client, bearer(plain, subject="anna"), input="message 10", thread_id=other)
    assert len([m for m in scripted.messages(-1) if m["role"] == "user"]) == 10
