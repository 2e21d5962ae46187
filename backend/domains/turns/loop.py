"""The bounded tool loop (TRN-3): the model answers, the platform runs its own tools and asks again, and client
function calls go back to the caller. No transaction waits for the model; each platform tool call is one short
transaction of its own, like the REST call it mirrors (POST /tools/{name}/call).

A memory write tool answers the model as soon as everything that may refuse it has run; its record's insert (with
the vector's insertion into the HNSW index, the slow part) and the commit finish in a task while the model reads
the answer (`Turn.committing`). Nothing else uses the turn's session until `settle` has waited for that task, and
should the insert fail after all, the turn fails: the model was told of a record that is not there."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any

from backend.domains.erasure import guard as erasure
from backend.domains.memory import embed_later
from backend.domains.tools import service as tools
from backend.domains.tools.memory_tools import LaterStep
from backend.domains.turns import privacy, state_tool
from backend.domains.turns.inputs import WORKING_STATE_TOOL
from backend.domains.turns.turn import ModelCall, Turn, TurnFailure
from backend.errors import ApiError, PolicyDenied
from backend.ids import new_id
from backend.providers.chat import CallOptions, ChatAnswer, ModelError, ToolCall, complete

log = logging.getLogger(__name__)


def options(turn: Turn) -> CallOptions:
    settings = turn.ctx.settings
    return CallOptions(timeout_seconds=settings.model_timeout_seconds, max_retries=settings.model_max_retries,
                       temperature=turn.body.temperature, top_p=turn.body.top_p,
                       max_output_tokens=turn.body.max_output_tokens)


def message_item(text: str) -> dict[str, Any]:
    return {"id": new_id("itm"), "type": "message", "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}


async def run(turn: Turn, *, commit_first: bool = False) -> None:
    """Ask the model until it answers in words or calls a client function; raises TurnFailure.

    `commit_first`: the session's open transaction (the accepting one: the input kept, TRN-11) is committed as the
    model is first asked. The commit is sent, and the model's request (this process's own work, in the OpenAI SDK)
    goes out while it completes; nothing uses the session before `settle` has waited for it. Should it fail, the
    turn ends on that error, as an error reading what the model is sent would, and the model's answer is dropped.
    """
    try:
        if commit_first:
            turn.committing = (asyncio.get_running_loop().create_task(turn.ctx.db.commit()), None)
            await asyncio.sleep(0)  # the commit is sent now, before the model's request takes the event loop
        await _rounds(turn)
    finally:
        await settle(turn)


async def settle(turn: Turn) -> None:
    """Wait for the accepting commit or a platform tool's transaction still finishing. Should a tool's fail (a
    person the record names erased since it began, or an error of the database), the turn fails and the call's
    result in the thread says so."""
    if turn.committing is None:
        return
    (task, call_id), turn.committing = turn.committing, None
    if call_id is None:  # the accepting commit (`run`'s commit_first): its error is the turn's own
        await task
        return
    try:
        await task
    except Exception as failed:
        await turn.ctx.db.rollback()
        if isinstance(failed, ApiError):
            why = failed.message
        else:
            log.exception("a memory write tool's insert failed after the model read its result")
            why = "the database refused it; nothing was written."
        error = f"The memory write failed after the model was told it succeeded: {why}"
        for item in turn.produced:
            if item["type"] == "function_call_output" and item["call_id"] == call_id:
                item.update(output="", error=error)
        for traced in turn.tool_trace:
            if traced["call_id"] == call_id:
                traced["status"] = "error"
        raise TurnFailure("tool_write_failed", error) from failed


async def _rounds(turn: Turn) -> None:
    definitions = turn.tools.definitions(turn.ctx, turn.zone)
    limit = turn.ctx.settings.turn_max_tool_rounds
    while True:
        turn.rounds += 1
        answer = await _ask(turn, definitions)
        # `limit` rounds of platform tools have run: this answer must not start another one.
        if turn.rounds > limit and any(c.name not in turn.tools.functions for c in answer.tool_calls):
            raise TurnFailure("tool_rounds_exceeded", f"The model kept calling tools for {limit} rounds; the turn "
                              "was stopped. Its tool calls so far are kept in the thread.")
        hidden_calls = list(answer.tool_calls)
        _restore(turn, answer)
        if answer.content or not answer.tool_calls:
            turn.produced.append(message_item(answer.content or ""))
        if not answer.tool_calls:
            turn.cut_short = answer.finish_reason == "length"
            return
        turn.messages.append({"role": "assistant", "content": answer.hidden_content,
                              "tool_calls": [{"id": c.id, "type": "function",
                                              "function": {"name": c.name, "arguments": c.arguments}}
                                             for c in hidden_calls]})
        client_calls = False
        for call in answer.tool_calls:
            turn.produced.append({"id": new_id("itm"), "type": "function_call", "call_id": call.id,
                                  "name": call.name, "arguments": call.arguments, "status": "completed"})
            if call.name in turn.tools.functions:
                client_calls = True
                continue
            output, error = await _run_platform_tool(turn, call, turn.produced[-1]["id"])
            turn.produced.append({"id": new_id("itm"), "type": "function_call_output", "call_id": call.id,
                                  "name": call.name, "output": output, "error": error})
            content = output or json.dumps({"error": error})
            if turn.pseudonymizer is not None:  # a search's output may be long: hidden off the event loop
                content = (await privacy.hide_texts_aside(turn.pseudonymizer, [content]))[0]
            turn.messages.append({"role": "tool", "tool_call_id": call.id, "content": content})
        if client_calls:
            return


def _restore(turn: Turn, answer: ChatAnswer) -> None:
    """TRN-10: the model wrote placeholders; what the platform runs, keeps and answers has the real values."""
    answer.hidden_content = answer.content
    pz = turn.pseudonymizer
    if pz is None:
        return
    if answer.content:
        answer.content = pz.restore(answer.content)
    answer.tool_calls = [ToolCall(c.id, c.name, privacy.restore_arguments(pz, c.arguments))
                         for c in answer.tool_calls]


async def _ask(turn: Turn, definitions: list[dict[str, Any]]) -> ChatAnswer:
    try:
        answer = await complete(turn.spec, turn.messages, tools=definitions, options=options(turn))
    except ModelError as failed:
        turn.calls.append(ModelCall(turn.spec.id, failed.input_tokens, failed.output_tokens, 0.0))
        raise TurnFailure(failed.code, failed.message) from failed
    turn.calls.append(ModelCall(turn.spec.id, answer.input_tokens, answer.output_tokens, answer.model_ms))
    return answer


async def _run_platform_tool(turn: Turn, call: ToolCall, call_item_id: str) -> tuple[str, str | None]:
    """(output, error). A refusal is something the model reads and may recover from, never a failed turn."""
    await settle(turn)  # the session is free again
    started = time.perf_counter()
    status = "completed"
    error: str | None
    try:
        arguments = json.loads(call.arguments or "{}")
        if not isinstance(arguments, dict):
            raise ValueError
    except (ValueError, RecursionError):  # RecursionError: nested deeper than the parser goes
        output, error = "", "The arguments are not a JSON object."
    else:
        output, error = await _dispatch(turn, call, arguments, call_item_id)
    if error is not None:
        status = "error"
    turn.tool_trace.append({"name": call.name, "call_id": call.id, "status": status,
                            "ms": round((time.perf_counter() - started) * 1000, 1)})
    return output, error


async def _dispatch(turn: Turn, call: ToolCall, arguments: dict[str, Any], call_item_id: str
                    ) -> tuple[str, str | None]:
    ctx = turn.ctx
    if call.name == WORKING_STATE_TOOL and turn.tools.working_state and turn.thread_id:
        try:
            turn.state_schema = await state_tool.schema_of(ctx, turn.thread_id, turn.agent)
            turn.pending_state, output, error = await state_tool.call(ctx, turn.thread_id, turn.pending_state,
                                                                      arguments, turn.state_schema)
        finally:
            await ctx.db.rollback()  # nothing written: the patch is applied when the turn completes
        return output, error
    if call.name not in turn.tools.memory:
        offered = ", ".join([*turn.tools.memory, *([WORKING_STATE_TOOL] if turn.tools.working_state else []),
                             *turn.tools.functions]) or "none"
        return "", f"There is no tool named {call.name!r} in this turn; offered: {offered}."
    index = turn.tools.memory[call.name]  # resolved when the turn was accepted
    if turn.people and turn.tools.writes(call.name):
        # MEM-19: this call's transaction began after the turn did, so its own checks would miss a person erased in
        # between. One of the turn's people (`Turn.people`) erased since the turn was accepted ends the turn with
        # 409 `subject_erased`, as its finish would; the locks come first.
        await erasure.refuse_if_erased(ctx.db, ctx.org_id, ctx.settings.secret, turn.people,
                                       started_at=turn.accepted_at)
    unembedded: list[str] = []  # the model does not wait for the record's vector: it is made after the commit
    later: list[LaterStep] = []  # nor for the record's insert (see the module's text)
    try:
        output = await tools.call(ctx, call.name, arguments, turn.body.timezone,
                                  provenance={**turn.provenance, "item_id": call_item_id}, index=index,
                                  labels=turn.thread_labels, embed_later=unembedded, insert_later=later)
    except PolicyDenied as denied:
        await ctx.db.rollback()
        await ctx.audit(denied.action, object_type=denied.object_type, object_id=denied.object_id,
                        detail=denied.detail, subject_id=denied.subject_id, outcome="denied")
        await ctx.db.commit()
        return tools.tool_error_output(denied), denied.message
    except ApiError as refused:
        await ctx.db.rollback()
        return tools.tool_error_output(refused), refused.message
    turn.committing = (asyncio.get_running_loop().create_task(_finish_write(turn, later, index, unembedded)),
                       call.id)
    await asyncio.sleep(0)  # the insert is sent now, before the model's next request takes the event loop
    return output, None


async def _finish_write(turn: Turn, later: list[LaterStep], index: dict[str, Any], unembedded: list[str]) -> None:
    """The rest of a memory tool's transaction, while the model reads its answer."""
    db = turn.ctx.db
    for step in later:
        await step()
    await db.commit()
    if unembedded:
        embed_later.soon(db, turn.ctx.org_id, index, unembedded)
