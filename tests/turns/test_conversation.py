"""TRN-2: what the model is sent, built from the thread's items (a pure function)."""

from __future__ import annotations

from backend.domains.turns.conversation import build


def _call(call_id: str) -> dict[str, str]:
    return {"type": "function_call", "call_id": call_id, "name": "lookup", "arguments": "{}"}


def _result(call_id: str) -> dict[str, str]:
    return {"type": "function_call_output", "call_id": call_id, "output": "42"}


def test_trn_2_history_cut_after_a_call_does_not_send_its_result_alone() -> None:
    """The newest items of a long thread may begin with a result whose call lies before the cut."""
    history = [_result("call_old"), {"type": "message", "role": "assistant", "content": "It is 42."},
               _call("call_new"), _result("call_new")]
    sent = build(instructions=[], summaries=[], state=None, block="", history=history,
                 new_input=[{"type": "message", "role": "user", "content": "Thanks"}])
    assert [m["role"] for m in sent] == ["assistant", "assistant", "tool", "user"]
    assert [m.get("tool_call_id") for m in sent if m["role"] == "tool"] == ["call_new"]


def test_trn_2_a_result_in_the_new_input_answers_a_call_of_the_history() -> None:
    sent = build(instructions=[], summaries=[], state=None, block="", history=[_call("call_1")],
                 new_input=[_result("call_1")])
    assert [m["role"] for m in sent] == ["assistant", "tool"]
