"""Edge inputs of extraction, proposals, maintenance and compaction: bad HTTP input (PLT-14) and garbage from the
extraction, helper and summary models (EXT-8, EXT-9, EXT-16, TRN-6, PLT-18).

A model answer that cannot be stored (NUL in an id, another shape, unreadable or negative usage) fails its window
with a code the health data shows instead of crashing the job into retries; a helper's unstorable lesson is skipped
and the pass (and the stores after it) goes on; a summary holding NUL is kept without it and its tokens metered.
Also: a cursor decoding to a lone surrogate is 400 on the extraction-health and proposal routes, NUL or lone
surrogates in a model's record text fail the window, and a thread naming nobody cannot replace a person's record."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from tests.extraction.maintenance_util import maintain, org_settings, store_settings
from tests.extraction.util import answer, conversation, get_switch, new, new_store, records, run_now, switch_on, windows
from tests.helpers import bearer
from tests.model_server import Step


def cursor(value: str) -> str:
    return base64.urlsafe_b64encode(value.encode()).decode().rstrip("=")


def raw_completion(message: Any = None, usage: Any = None, **top: Any) -> bytes:
    body: dict[str, Any] = {"id": "chatcmpl-x", "object": "chat.completion", "created": 1, "model": "scripted",
                            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                            "usage": usage if usage is not None else {"prompt_tokens": 11, "completion_tokens": 7,
                                                                      "total_tokens": 18}}
    body.update(top)
    return json.dumps(body).encode()


def raw_text(text: str, **extra: Any) -> bytes:
    """A completion whose content is `text` exactly as written (it may hold escapes json.dumps would not write)."""
    return raw_completion({"role": "assistant", "content": "__C__"}, **extra).replace(b'"__C__"', text.encode())


def window_states(db: Any, index_id: str) -> list[tuple[Any, Any]]:
    return [(w[3], w[4]) for w in windows(db, index_id)]


# ---------------------------------------------------------------- (1) HTTP input

def test_plt_14_a_cursor_decoding_to_a_lone_surrogate_is_400_not_500(client, org, scripted, run_jobs):
    index_id = new_store(org)
    conversation(org, "anna", ("user", "I like tea."))
    switch_on(org, index_id)
    scripted.reply("not json")
    run_now(org, index_id)
    run_jobs()
    bad = cursor('"\\ud800"')  # base64 of the JSON string "\ud800": valid JSON, no UTF-8 text
    answers = {path: client.get(f"{path}?cursor={bad}", headers=org.admin)
               for path in (f"/memory/stores/{index_id}/extraction/windows",
                            f"/memory/stores/{index_id}/extraction/runs", "/memory/proposals")}
    wrong = {path: (r.status_code, r.json().get("code")) for path, r in answers.items() if r.status_code != 400}
    assert not wrong, f"PLT-14/PLT-14a: a cursor the API never handed out must be 400 invalid_cursor, got {wrong}"
    for response in answers.values():
        assert response.json()["code"] == "invalid_cursor" and response.json()["param"] == "cursor"


# ---------------------------------------------------------------- (2) the model's output

def _anna_store(org: Any, **switch: Any) -> str:
    index_id = new_store(org)
    conversation(org, "anna", ("user", "I like tea."))
    switch_on(org, index_id, **switch)
    return index_id


def test_ext_9_a_target_id_holding_nul_fails_the_window_instead_of_crashing_the_job(client, org, db, scripted,
                                                                                   run_jobs):
    index_id = _anna_store(org)
    scripted.reply(answer({"type": "fact", "text": "Anna likes tea.", "action": "replace",
                           "target_id": "mem_\u0000x"}))
    run_now(org, index_id)
    run_jobs()
    assert window_states(db, index_id) == [("failed", "invalid_model_output")], (
        "EXT-9: a target_id holding NUL must fail the window with invalid_model_output; the read job crashed and "
        f"left it {window_states(db, index_id)}")


@pytest.mark.parametrize("usage", [
    {"prompt_tokens": 10 ** 30, "completion_tokens": 1},
    {"prompt_tokens": "many", "completion_tokens": 1},
    {"prompt_tokens": 1e308, "completion_tokens": 1},
], ids=["huge-int", "string", "1e308"])
def test_ext_8_a_completion_with_unreadable_usage_does_not_crash_the_read_job(client, org, db, scripted, run_jobs,
                                                                             usage):
    index_id = _anna_store(org)
    scripted.steps.append(Step(raw=raw_text(json.dumps(answer(new("preference", "Anna likes tea."))),
                                            usage=usage)))
    run_now(org, index_id)
    run_jobs()
    states = window_states(db, index_id)
    assert states[0][0] in ("ready", "failed"), (
        f"EXT-8/EXT-4: a model answer whose usage is {usage} crashed the read job: the window stays {states} and "
        "the health data shows no failure")


def test_plt_18_negative_usage_from_the_model_server_is_not_metered(client, org, db, scripted, run_jobs):
    index_id = _anna_store(org)
    scripted.steps.append(Step(raw=raw_text(json.dumps(answer(new("preference", "Anna likes tea."))),
                                            usage={"prompt_tokens": -1_000_000, "completion_tokens": -5})))
    run_now(org, index_id)
    run_jobs()
    rows = db.execute("SELECT input_tokens, output_tokens FROM usage_events WHERE job = 'extraction'").fetchall()
    assert all(i >= 0 and o >= 0 for i, o in rows), f"PLT-18: a model server lowered the metered usage: {rows}"


@pytest.mark.parametrize("message", [
    {"role": "assistant", "content": {"memories": []}},
    {"role": "assistant", "content": [{"type": "text", "text": "{\"memories\": []}"}]},
    {"role": "assistant", "content": 5},
    None,
    "text",
], ids=["object", "parts", "number", "null-message", "string-message"])
def test_ext_9_a_completion_of_another_shape_fails_the_window_instead_of_crashing_the_job(
        client, org, db, scripted, run_jobs, message):
    index_id = _anna_store(org)
    scripted.steps.append(Step(raw=raw_completion(message)))
    run_now(org, index_id)
    run_jobs()
    states = window_states(db, index_id)
    assert states[0] in (("failed", "invalid_model_output"), ("ready", None)), (
        f"EXT-9: a completion whose message is {message!r} crashed the read job: window {states}")


@pytest.mark.parametrize("text", ["Anna likes tea \\ud800.", "Anna likes tea.\\u0000"], ids=["surrogate", "nul"])
def test_ext_9_nul_or_a_lone_surrogate_in_a_record_fails_the_window(client, org, db, scripted, run_jobs, text):
    index_id = _anna_store(org)
    content = '{"memories": [{"type": "preference", "text": "' + text + '", "action": "new"}]}'
    scripted.steps.append(Step(raw=raw_text(json.dumps(content))))
    run_now(org, index_id)
    run_jobs()
    states = window_states(db, index_id)
    assert states[0] == ("failed", "invalid_model_output"), f"EXT-9: {text!r}: window {states}"


def test_ext_10_a_thread_naming_nobody_cannot_replace_a_persons_record(client, org, db, scripted, run_jobs):
    index_id = new_store(org)
    annas = client.post("/memory", json={"index_id": index_id, "type": "fact", "text": "Anna is tall."},
                        headers=bearer(org.key, "anna")).json()
    conversation(org, None, ("user", "The office closes at six."))
    switch_on(org, index_id, threads="all")
    scripted.reply(answer({"type": "fact", "text": "Anna is short.", "action": "replace", "target_id": annas["id"]}))
    run_now(org, index_id)
    run_jobs()
    assert window_states(db, index_id) == [("failed", "invalid_model_output")]
    mine = records(org, index_id, "anna")
    assert [(r["id"], r["text"], r["status"]) for r in mine] == [(annas["id"], "Anna is tall.", "active")]
    assert records(org, index_id) == []


@pytest.mark.parametrize("lesson", ["Plan the week \\u0000 in one go.", "Plan the week \\ud800 in one go."],
                         ids=["nul", "surrogate"])
def test_ext_16_a_helper_lesson_with_nul_or_a_surrogate_does_not_stop_maintenance(
        client, org, db, scripted, run_jobs, database_url, lesson):
    index_id = new_store(org)
    switch_on(org, index_id, episodes=True)
    conversation(org, "anna", ("user", "Plan my week."))
    good = {"text": "The plan was made.", "result": "succeeded", "result_basis": "judge"}
    scripted.reply(answer(episode=good))
    run_now(org, index_id)
    run_jobs()
    assert len(records(org, index_id, "anna", type="episode")) == 1
    later = new_store(org, "later")  # maintained after the first store (stores go in id order)
    org_settings(org, helper_model={"provider": "openai_compatible", "model": "scripted"})
    store_settings(org, index_id, lessons={"enabled": True, "min_episodes": 1})
    scripted.reset()
    scripted.reply('{"text": "' + lesson + '"}')
    maintain(database_url, run_jobs)
    last_runs = {i: client.get(f"/memory/stores/{i}", headers=org.full).json()["last_maintenance_run_at"]
                 for i in (index_id, later)}
    assert None not in last_runs.values(), (
        f"EXT-16: a helper-model lesson {lesson!r} made the maintenance job raise: neither that store's pass nor "
        f"the passes of the stores after it finished (last runs {last_runs}); every five minutes it happens again")


def test_ext_8_a_malformed_completion_is_not_retried_until_the_job_dies_leaving_the_window_queued(
        client, org, db, scripted, run_jobs):
    index_id = _anna_store(org)
    for _ in range(8):
        scripted.steps.append(Step(raw=raw_completion({"role": "assistant", "content": {"memories": []}})))
    run_now(org, index_id)
    for _ in range(7):
        run_jobs()
        db.execute("UPDATE procrastinate_jobs SET scheduled_at = now() WHERE status = 'todo'")
    job = db.execute("SELECT status, attempts FROM procrastinate_jobs WHERE task_name = 'extraction.read_thread'"
                     ).fetchall()
    body = get_switch(org, index_id)
    assert (window_states(db, index_id), body["error_code"]) == ([("failed", "invalid_model_output")],
                                                                 "invalid_model_output"), (
        f"EXT-8/EXT-9: a malformed completion fails its window at once; instead the read job crashed, was retried "
        f"(job {job}, the model asked {len(scripted.requests)} times) and the window stays "
        f"{window_states(db, index_id)} with health {body['windows']}, error_code {body['error_code']}")


def test_plt_18_trn_6_a_summary_holding_nul_is_metered_and_does_not_crash_the_job(
        client, org, db, database_url, scripted, run_jobs):
    from tests.compaction.util import new_thread as compaction_thread
    from tests.compaction.util import schedule_job, write_turns

    tid = compaction_thread(client, bearer(org.key))["id"]
    write_turns(database_url, org.org_id, tid, 1, 8)
    scripted.reply("Asked three questions \u0000 each answered.", usage=(120, 15))
    assert schedule_job(database_url, org.org_id, tid, org.key_id)
    run_jobs()
    usage = db.execute("SELECT job, input_tokens FROM usage_events WHERE job = 'compaction'").fetchall()
    job = db.execute("SELECT status, attempts FROM procrastinate_jobs WHERE task_name = 'compaction.summarise'"
                     ).fetchall()
    assert usage == [("compaction", 120)], (
        f"PLT-18/TRN-6: the summary job's model call (120 input tokens) answered a text holding NUL; the job "
        f"crashed writing it (job {job}) and the tokens it spent were never metered (usage rows {usage})")
