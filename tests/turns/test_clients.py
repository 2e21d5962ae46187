"""TRN-1 and TRN-9 through the official clients: `openai` on POST /responses, `anthropic` on POST /messages, and
the Messages shapes over plain HTTP."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import httpx
import openai

from tests.helpers import Org, assert_error
from tests.turns.conftest import anna, items


def test_trn_1_the_openai_client_creates_and_continues_a_response(live_api: str, org: Org, scripted: Any) -> None:
    scripted.reply("Hello from coremem.").reply("You said hello.")
    client = openai.OpenAI(base_url=live_api, api_key=org.key, default_headers={"X-Core-Subject": '{"id": "anna"}'})
    first = client.responses.create(model="scripted", input="Hello", instructions="Be kind.")
    assert first.status == "completed" and first.output_text == "Hello from coremem."
    assert first.usage is not None and first.usage.total_tokens == 18
    second = client.responses.create(model="scripted", input=[{"role": "user", "content": "What did I say?"}],
                                     previous_response_id=first.id)
    assert second.output_text == "You said hello."
    assert [m["content"] for m in scripted.messages(1)] == ["Hello", "Hello from coremem.", "What did I say?"]
    raw = client.responses.with_raw_response.create(model="scripted", input="Third", previous_response_id=second.id)
    assert raw.headers["x-core-thread-id"] == raw.parse().to_dict()["thread_id"]


def test_trn_1_the_output_limit_reaches_the_model_and_a_cut_answer_is_incomplete(live_api: str, org: Org,
                                                                                  scripted: Any) -> None:
    scripted.reply("Once upon a", finish_reason="length").reply("Done.")
    person = {"X-Core-Subject": '{"id": "anna"}'}
    with openai.OpenAI(base_url=live_api, api_key=org.key, default_headers=person) as client:
        cut = client.responses.create(model="scripted", input="Tell me a story", max_output_tokens=5)
        assert scripted.last["max_tokens"] == 5
        assert cut.status == "incomplete" and cut.incomplete_details is not None
        assert cut.incomplete_details.reason == "max_output_tokens" and cut.output_text == "Once upon a"
        assert client.responses.retrieve(cut.id).status == "incomplete"
        whole = client.responses.create(model="scripted", input="Thanks", previous_response_id=cut.id)
        assert "max_tokens" not in scripted.last and whole.status == "completed" and whole.incomplete_details is None
    scripted.reply("Er was eens", finish_reason="length")
    with anthropic.Anthropic(base_url=live_api, auth_token=org.key, default_headers=person) as messages:
        answer = messages.messages.create(model="scripted", max_tokens=7,
                                          messages=[{"role": "user", "content": "Vertel"}])
    assert scripted.last["max_tokens"] == 7 and answer.stop_reason == "max_tokens"


def test_trn_9_the_anthropic_client_continues_a_thread_from_the_header(live_api: str, org: Org,
                                                                       scripted: Any) -> None:
    scripted.reply("Hoi Anna!").reply("Je zei hoi.")
    client = anthropic.Anthropic(base_url=live_api, auth_token=org.key,
                                 default_headers={"X-Core-Subject": '{"id": "anna"}'})
    raw = client.messages.with_raw_response.create(model="scripted", max_tokens=200, system="Antwoord kort.",
                                                   messages=[{"role": "user", "content": "Hoi"}])
    first = raw.parse()
    thread_id = raw.headers["x-core-thread-id"]
    assert first.content[0].text == "Hoi Anna!" and first.stop_reason == "end_turn"
    assert scripted.messages(0)[0] == {"role": "system", "content": "Antwoord kort."}
    second = client.messages.create(model="scripted", max_tokens=200, extra_headers={"X-Core-Thread-Id": thread_id},
                                    messages=[{"role": "user", "content": "Wat zei ik?"}])
    assert second.content[0].text == "Je zei hoi."
    assert [m["content"] for m in scripted.messages(1)] == ["Hoi", "Hoi Anna!", "Wat zei ik?"]
    assert first.usage.input_tokens == 11 and first.usage.output_tokens == 7


def _messages(live_api: str, org: Org, body: dict[str, Any], **headers: str) -> httpx.Response:
    return httpx.post(f"{live_api}/messages", json={"model": "scripted", "max_tokens": 100, **body},
                      headers={**anna(org), **headers}, timeout=30)


def test_trn_9_tool_use_round_trip_and_header_conflicts(live_api: str, org: Org, scripted: Any) -> None:
    tool = {"name": "get_weather", "description": "Weather", "input_schema": {"type": "object"}}
    scripted.reply(tool_calls=[("get_weather", {"city": "Delft"})]).reply("Rainy in Delft.")
    first = _messages(live_api, org, {"messages": [{"role": "user", "content": "Weather?"}], "tools": [tool]})
    assert first.status_code == 200, first.text
    use = first.json()["content"][0]
    assert first.json()["stop_reason"] == "tool_use" and use["input"] == {"city": "Delft"}
    thread_id = first.headers["x-core-thread-id"]
    result = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use["id"], "content": "rain"}]}
    second = _messages(live_api, org, {"messages": [result], "tools": [tool]}, **{"X-Core-Thread-Id": thread_id})
    assert second.status_code == 200, second.text
    assert second.json()["content"] == [{"type": "text", "text": "Rainy in Delft."}]
    assert scripted.messages(1)[-1] == {"role": "tool", "tool_call_id": use["id"], "content": "rain"}
    conflict = _messages(live_api, org, {"messages": [result], "thread_id": "thr_other"},
                         **{"X-Core-Thread-Id": thread_id})
    assert_error(conflict, 400, "conflicting_thread_fields", param="thread_id")
    refused = _messages(live_api, org, {"messages": [result], "working_state_from": thread_id})
    assert_error(refused, 422, param="working_state_from")
    with httpx.Client(base_url=live_api) as http:
        kept = items(http, anna(org), thread_id)
    assert [i["type"] for i in kept] == ["message", "function_call", "function_call_output", "message"]


def test_trn_9_a_tool_result_with_words_reaches_the_model_right_after_its_call(live_api: str, org: Org,
                                                                              scripted: Any) -> None:
    tool = {"name": "get_weather", "description": "Weather", "input_schema": {"type": "object"}}
    scripted.reply(tool_calls=[("get_weather", {"city": "Delft"})]).reply("Rainy, take a coat.")
    first = _messages(live_api, org, {"messages": [{"role": "user", "content": "Weather?"}], "tools": [tool]})
    use = first.json()["content"][0]
    thread_id = first.headers["x-core-thread-id"]
    # Anthropic's shape: the tool result first, then the person's words, in one user message.
    both = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use["id"], "content": "rain"},
                                        {"type": "text", "text": "Do I need a coat?"}]}
    second = _messages(live_api, org, {"messages": [both], "tools": [tool]}, **{"X-Core-Thread-Id": thread_id})
    assert second.status_code == 200, second.text
    sent = scripted.messages(1)
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "user"]
    assert sent[2]["tool_call_id"] == use["id"] and sent[3]["content"] == "Do I need a coat?"
    with httpx.Client(base_url=live_api) as http:
        kept = items(http, anna(org), thread_id)
    assert [i["type"] for i in kept] == ["message", "function_call", "function_call_output", "message", "message"]


def test_trn_9_sampling_fields_reach_the_model_and_fields_without_a_counterpart_are_refused(
        live_api: str, org: Org, scripted: Any) -> None:
    scripted.reply("Hoi.")
    hello = [{"role": "user", "content": "Hoi"}]
    answer = _messages(live_api, org, {"messages": hello, "top_p": 0.5, "tool_choice": {"type": "auto"},
                                       "metadata": {"user_id": "u-42"}})
    assert answer.status_code == 200, answer.text
    assert scripted.last["top_p"] == 0.5
    read = httpx.get(f"{live_api}/responses/{answer.json()['id']}", headers=anna(org), timeout=10).json()
    assert read["metadata"] == {"user_id": "u-42"}
    calls = len(scripted.requests)
    for field, value in (("top_k", 5), ("stop_sequences", ["END"]), ("tool_choice", {"type": "any"})):
        assert_error(_messages(live_api, org, {"messages": hello, field: value}), 422, param=field)
    assert len(scripted.requests) == calls  # refused before any model call


def test_trn_11_a_failed_turn_on_messages_is_an_error_naming_the_kept_response(live_api: str, org: Org,
                                                                               scripted: Any) -> None:
    scripted.malformed()
    failed = _messages(live_api, org, {"messages": [{"role": "user", "content": "Hi"}]})
    body = assert_error(failed, 502, "invalid_model_output")
    assert "resp_" in body["message"] and failed.headers["x-core-thread-id"].startswith("thr_")
    response_id = body["message"].split("(response ")[1].rstrip(")")
    read = httpx.get(f"{live_api}/responses/{response_id}", headers=anna(org), timeout=10).json()
    assert read["status"] == "failed" and json.dumps(read["error"])
