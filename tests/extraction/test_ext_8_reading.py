"""EXT-7 … EXT-10: quiet threads read in windows by a real worker against the scripted model server: what was
sent, the records written, confirmed and replaced, and what fails a window."""

from __future__ import annotations

import json

from backend.access.policy import default_policy, writer_policy
from backend.db import job_queue
from backend.domains.extraction.queue import SCHEDULE_TASK
from tests.extraction.util import (
    answer,
    conversation,
    first_read_fails,
    get_switch,
    new,
    new_store,
    records,
    run_now,
    set_switch,
    switch_on,
    windows,
)
from tests.helpers import bearer, in_transaction
from tests.threads.util import append, msg


def test_ext_10_a_quiet_thread_of_anna_gives_records_owned_by_anna(client, org, db, scripted, run_jobs):
    index_id = new_store(org)
    conversation(org, "anna", ("user", "I moved to Utrecht last month."), ("assistant", "Noted!"))
    switch_on(org, index_id)
    scripted.reply(answer(new("fact", "Anna lives in Utrecht.", confidence=0.9)), usage=(300, 40))
    run_now(org, index_id)
    run_jobs()
    mine = records(org, index_id, "anna")
    assert [(r["subject"], r["type"], r["text"], r["source"]) for r in mine] == [
        ("anna", "fact", "Anna lives in Utrecht.", "extraction")]
    sent = scripted.last
    assert sent["response_format"]["type"] == "json_schema"
    assert "user: I moved to Utrecht last month." in sent["messages"][-1]["content"]
    assert db.execute("SELECT key_id, job, input_tokens, output_tokens FROM usage_events").fetchall() == [
        (org.key_id, "extraction", 300, 40)]
    provenance = mine[0]["provenance"]
    assert provenance["thread_id"] and provenance["window_id"] and provenance["first_item_id"]
    assert json.loads(json.dumps(windows(db, index_id)))[0][3:] == ["ready", None, 1, 0, 0, 0]


def test_ext_7_a_thread_naming_nobody_gives_nothing_under_with_person_and_shared_records_under_all(
        client, org, db, scripted, run_jobs):
    index_id = new_store(org)
    conversation(org, None, ("user", "The office closes at six."))
    switch_on(org, index_id)
    run_now(org, index_id)
    run_jobs()
    assert scripted.requests == [] and windows(db, index_id) == []
    switch_on(org, index_id, threads="all")
    scripted.reply(answer(new("fact", "The office closes at six.")))
    run_now(org, index_id)
    run_jobs()
    shared = records(org, index_id)
    assert [(r["subject"], r["text"], r["labels"]) for r in shared] == [(None, "The office closes at six.", {})]


def test_ext_10_a_repeated_fact_confirms_and_a_correction_replaces_with_history(client, org, db, scripted,
                                                                                run_jobs):
    index_id = new_store(org)
    tid = conversation(org, "anna", ("user", "I live in Utrecht."))
    switch_on(org, index_id)
    scripted.reply(answer(new("fact", "Anna lives in Utrecht.")))
    run_now(org, index_id)
    run_jobs()
    first = records(org, index_id, "anna")[0]
    # The model calls it new, in other case and with a full stop: the same normalised words confirm it.
    append(client, bearer(org.key, "anna"), tid, msg("user", "Utrecht is home, as I said."))
    scripted.reply(answer(new("fact", "anna lives in utrecht")))
    run_now(org, index_id)
    run_jobs()
    assert f"[{first['id']}] fact: Anna lives in Utrecht." in scripted.last["messages"][-1]["content"]
    again = records(org, index_id, "anna")
    assert [(r["id"], r["confirmations"]) for r in again] == [(first["id"], 1)]
    append(client, bearer(org.key, "anna"), tid, msg("user", "Actually I moved to Delft."))
    scripted.reply(answer({"type": "fact", "text": "Anna lives in Delft.", "action": "replace",
                           "target_id": first["id"]}))
    run_now(org, index_id)
    run_jobs()
    now = records(org, index_id, "anna")
    assert [(r["text"], r["replaces"], r["subject"]) for r in now] == [("Anna lives in Delft.", first["id"], "anna")]
    history = client.get(f"/memory/{first['id']}/history", headers=bearer(org.key, "anna")).json()
    assert history["replaced_by"]["id"] == now[0]["id"]
    assert [v["action"] for v in history["versions"]] == ["created", "confirmed", "replaced"]
    assert [w[3:] for w in windows(db, index_id)] == [("ready", None, 1, 0, 0, 0), ("ready", None, 0, 1, 0, 0),
                                                      ("ready", None, 0, 0, 1, 0)]


def test_ext_9_a_malformed_answer_fails_the_window_and_a_model_change_queues_it_again(client, org, db, scripted,
                                                                                   run_jobs):
    index_id = new_store(org)
    conversation(org, "anna", ("user", "I like tea."))
    switch_on(org, index_id)
    scripted.reply("Sure! Anna likes tea.")
    run_now(org, index_id)
    run_jobs()
    body = get_switch(org, index_id)
    assert body["windows"]["failed"] == 1 and body["error_code"] == "invalid_model_output"
    assert body["state"] == "active" and body["last_run"]["failures"] == 1
    switch_on(org, index_id)  # nothing read again: neither model, instructions nor types changed
    run_jobs()
    assert get_switch(org, index_id)["windows"]["failed"] == 1
    scripted.reply(answer(new("preference", "Anna likes tea.")))
    switch_on(org, index_id, instructions="Note what people like.")
    run_jobs()
    body = get_switch(org, index_id)
    assert body["windows"] == {"ready": 1, "failed": 0, "queued": 0, "parked": 0} and body["error_code"] is None
    assert "Note what people like." in scripted.last["messages"][0]["content"]
    assert [r["text"] for r in records(org, index_id, "anna")] == ["Anna likes tea."]


def test_ext_9_a_target_she_does_not_own_fails_and_foreign_types_are_dropped(client, org, db, scripted, run_jobs):
    index_id = new_store(org)
    bert = client.post("/memory", json={"index_id": index_id, "type": "fact", "text": "Bert is tall."},
                       headers=bearer(org.key, "bert")).json()
    conversation(org, "anna", ("user", "I am tall too."))
    switch_on(org, index_id, types=["fact"])
    scripted.reply(answer({"type": "fact", "text": "x", "action": "confirm", "target_id": bert["id"]}))
    run_now(org, index_id)
    run_jobs()
    assert windows(db, index_id)[0][3:5] == ("failed", "invalid_model_output")
    assert client.get(f"/memory/{bert['id']}", headers=org.full).json()["confirmations"] == 0
    conversation(org, "anna", ("user", "I prefer mornings."))
    scripted.reply(answer(new("preference", "Anna prefers mornings."), new("fact", "Anna is tall.")))
    run_now(org, index_id)
    run_jobs()
    assert [r["text"] for r in records(org, index_id, "anna")] == ["Anna is tall."]
    assert get_switch(org, index_id)["last_run"]["dropped"] == 1


def test_ext_8_tool_excerpts_and_no_reasoning(client, org, db, scripted, run_jobs):
    index_id = new_store(org)
    tid = conversation(org, "anna", ("user", "Book the train."))
    append(client, bearer(org.key, "anna"), tid,
           {"type": "reasoning", "summary": [{"type": "summary_text", "text": "SECRET THOUGHT"}]},
           {"type": "function_call", "call_id": "c1", "name": "book", "arguments": "{\"to\": \"Delft\"}"},
           {"type": "function_call_output", "call_id": "c1", "output": "y" * 1000},
           msg("assistant", "Booked."))
    switch_on(org, index_id)
    scripted.reply(answer())
    run_now(org, index_id)
    run_jobs()
    sent = scripted.last["messages"][-1]["content"]
    assert "SECRET THOUGHT" not in sent and "tool call book" in sent and "assistant: Booked." in sent
    excerpt = next(line for line in sent.splitlines() if line.startswith("tool result: "))
    assert len(excerpt.removeprefix("tool result: ")) == 300


def test_ext_8_windows_are_bounded_in_messages(client, org, db, scripted, run_jobs, settings):
    index_id = new_store(org)
    conversation(org, "anna", *[("user", f"line {n}") for n in range(5)])
    switch_on(org, index_id)
    run_now(org, index_id)
    for _ in range(3):
        scripted.reply(answer())
    run_jobs(settings_used=settings.with_overrides(extraction_window_messages=2))
    assert [(w[1], w[2], w[3]) for w in windows(db, index_id)] == [(1, 2, "ready"), (3, 4, "ready"),
                                                                    (5, 5, "ready")]
    assert len(scripted.requests) == 3
    page = client.get(f"/memory/stores/{index_id}/extraction/windows", headers=org.full,
                      params={"state": "ready", "bucket": "day", "buckets": 2}).json()
    assert len(page["data"]) == 3 and page["counts"]["ready"] == 3 and page["error_codes"] == {}
    assert sum(b["ready"] for b in page["buckets"]) == 3
    runs = client.get(f"/memory/stores/{index_id}/extraction/runs", headers=org.full).json()["data"]
    assert runs[0]["windows"] == 3 and runs[0]["windows_read"] == 3 and runs[0]["finished_at"] is not None


def test_ext_3_a_key_that_lost_the_right_to_write_fails_its_windows_with_permission_denied(client, org, db, scripted,
                                                                                         run_jobs):
    index_id = new_store(org)
    author = org.make_key(policy=writer_policy())
    conversation(org, "anna", ("user", "I like tea."))
    assert set_switch(org, index_id, headers=bearer(author["secret"])).status_code == 200
    response = client.patch(f"/tenants/{org.org_id}/keys/{author['id']}", headers=org.admin,
                            json={"policy": default_policy()})
    assert response.status_code == 200, response.text
    scripted.reply(answer(new("preference", "Anna likes tea.")), usage=(50, 5))
    run_now(org, index_id)
    run_jobs()
    body = get_switch(org, index_id)
    assert body["state"] == "active" and body["error_code"] == "permission_denied"
    assert db.execute("SELECT key_id, input_tokens FROM usage_events").fetchall() == [(author["id"], 50)]


def test_ext_8_windows_park_at_the_monthly_cap_and_go_on_when_it_is_raised(client, org, db, scripted, run_jobs):
    index_id = new_store(org)
    conversation(org, "anna", ("user", "I like tea."))
    switch_on(org, index_id)
    limits = client.patch(f"/tenants/{org.org_id}", headers=org.admin, json={"limits": {"monthly_model_tokens": 0}})
    assert limits.status_code == 200 and limits.json()["limits"] == {"monthly_model_tokens": 0}
    run_now(org, index_id)
    run_jobs()
    assert get_switch(org, index_id)["windows"]["parked"] == 1 and scripted.requests == []
    client.patch(f"/tenants/{org.org_id}", headers=org.admin, json={"limits": {"monthly_model_tokens": None}})
    scripted.reply(answer(new("preference", "Anna likes tea.")))
    run_now(org, index_id)
    run_jobs()
    assert get_switch(org, index_id)["windows"] == {"ready": 1, "failed": 0, "queued": 0, "parked": 0}


def test_ext_8_a_model_error_is_retried_later_with_backoff(client, org, db, scripted, run_jobs):
    first_read_fails(org, scripted, run_jobs)
    assert db.execute("SELECT state, attempts FROM extraction_windows").fetchall() == [("queued", 1)]
    job = db.execute("SELECT status, scheduled_at > now() FROM procrastinate_jobs "
                     "WHERE task_name = 'extraction.read_thread'").fetchall()
    assert job == [("todo", True)]
    db.execute("UPDATE procrastinate_jobs SET scheduled_at = now() WHERE task_name = 'extraction.read_thread'")
    scripted.reply(answer(new("preference", "Anna likes tea.")))
    run_jobs()
    assert db.execute("SELECT state, attempts FROM extraction_windows").fetchall() == [("ready", 1)]


def test_ext_7_the_scheduler_starts_due_runs(client, org, db, scripted, run_jobs, database_url):
    index_id = new_store(org)
    conversation(org, "anna", ("user", "I like tea."))
    switch_on(org, index_id)
    scripted.reply(answer(new("preference", "Anna likes tea.")))
    in_transaction(database_url, lambda s: job_queue.defer(s, task=SCHEDULE_TASK, queue="maintenance",
                                                           args={"timestamp": 0}))
    run_jobs()
    assert [r["text"] for r in records(org, index_id, "anna")] == ["Anna likes tea."]
    runs = client.get(f"/memory/stores/{index_id}/extraction/runs", headers=org.full).json()["data"]
    assert [r["trigger"] for r in runs] == ["schedule"]
    # Not due again before schedule_minutes have passed.
    in_transaction(database_url, lambda s: job_queue.defer(s, task=SCHEDULE_TASK, queue="maintenance",
                                                           args={"timestamp": 1}))
    run_jobs()
    assert len(client.get(f"/memory/stores/{index_id}/extraction/runs", headers=org.full).json()["data"]) == 1


def test_ext_4_each_run_reports_the_tokens_of_the_calls_that_finished_its_windows(client, org, db, scripted,
                                                                                  run_jobs):
    index_id = new_store(org)
    conversation(org, "anna", ("user", "I moved to Utrecht last month."))
    switch_on(org, index_id)
    scripted.reply(answer(new("fact", "Lives in Utrecht.")), usage=(300, 40))
    first = run_now(org, index_id)
    run_jobs()
    conversation(org, "bert", ("user", "I like tea."))
    scripted.reply("not json", usage=(200, 5))
    second = run_now(org, index_id)
    run_jobs()
    runs = {r["id"]: r for r in org.client.get(f"/memory/stores/{index_id}/extraction/runs",
                                               headers=org.full).json()["data"]}
    assert [(runs[r]["failures"], runs[r]["input_tokens"], runs[r]["output_tokens"]) for r in (first, second)] == [
        (0, 300, 40), (1, 200, 5)]
    scripted.reply(answer(new("preference", "Likes tea.")), usage=(120, 9))
    switch_on(org, index_id, instructions="Note what people like.")  # the failed window is queued again
    run_jobs()
    response = org.client.get(f"/memory/stores/{index_id}/extraction/runs", headers=org.full)
    assert response.status_code == 200, response.text
    runs = {r["id"]: r for r in response.json()["data"]}
    requeue = next(r for r in runs.values() if r["trigger"] == "requeue")
    assert (requeue["windows"], requeue["written"], requeue["input_tokens"], requeue["output_tokens"]) == (
        1, 1, 120, 9)
    # The window moved to the run that queued it again; the call that failed it stays in the usage report only.
    assert (runs[second]["windows"], runs[second]["input_tokens"]) == (0, 0)
    assert (runs[first]["input_tokens"], runs[first]["output_tokens"]) == (300, 40)
    assert db.execute("SELECT sum(input_tokens) FROM usage_events WHERE job = 'extraction'").fetchone()[0] == 620


def test_ext_9_an_episode_or_lessons_the_switch_did_not_ask_for_fail_the_window(client, org, db, scripted,
                                                                                 run_jobs):
    index_id = new_store(org)
    switch_on(org, index_id, types=["fact"])
    episode = {"text": "Talked about moving.", "result": "unknown", "result_basis": "judge"}
    lesson = {"kind": "pitfall", "basis": "model", "text": "Ask for the date first."}
    for extra in ({"episode": episode}, {"lessons": [lesson]}):
        conversation(org, "anna", ("user", "I am moving to Delft."))
        scripted.reply(answer(new("fact", "Anna moves to Delft."), **extra))
        run_now(org, index_id)
        run_jobs()
        assert windows(db, index_id)[-1][3:5] == ("failed", "invalid_model_output")
        [error] = db.execute("SELECT error FROM extraction_windows WHERE index_id = %s ORDER BY thread_id DESC "
                             "LIMIT 1", (index_id,)).fetchone()
        assert f"`{next(iter(extra))}` was not asked for" in error
    assert records(org, index_id, "anna") == []
    conversation(org, "anna", ("user", "I am moving to Delft."))
    scripted.reply(answer(new("fact", "Anna moves to Delft.")))
    run_now(org, index_id)
    run_jobs()
    assert [r["text"] for r in records(org, index_id, "anna")] == ["Anna moves to Delft."]
