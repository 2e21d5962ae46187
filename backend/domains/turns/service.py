"""Turns (TRN-1 … TRN-11): accept the request, build what the model is sent, run the loop, keep the result.

A turn is the one route that commits more than once (docs/decisions.md): it commits the input as it first calls
the model (TRN-11: a failed turn still has its input in the thread), holds no transaction while the model thinks,
runs each platform tool in a transaction of its own, and writes the answer, the working state and the usage
together at the end; the recall counts follow, written with other turns' (memory.recall_tally).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import msgspec

from backend.access.context import RequestContext
from backend.access.subjects import Subject, combine
from backend.db.plan_mode import let_key_checks_keep_plans
from backend.domains import compaction
from backend.domains.agents import service as agents
from backend.domains.erasure import guard as erasure
from backend.domains.injection import service as injection
from backend.domains.models import service as models
from backend.domains.orgs.service import check_timezone
from backend.domains.privacy import service as pii_service
from backend.domains.threads import repository as threads_repo
from backend.domains.threads import rules as thread_rules
from backend.domains.threads import service as threads
from backend.domains.threads.state import check_state
from backend.domains.turns import block_ahead, conversation, documents, idempotency, inputs, loop, privacy, reads
from backend.domains.turns import repository as repo
from backend.domains.turns.abandoned import finished_late
from backend.domains.turns.deleted import thread_deleted
from backend.domains.turns.state_tool import apply as apply_state
from backend.domains.turns.state_tool import shown as state_shown
from backend.domains.turns.turn import AgentTurn, Turn, TurnFailure
from backend.domains.usage import repository as usage
from backend.errors import ApiError, ValidationFailed
from backend.ids import new_id
from backend.providers.pii import PiiUnavailable
from shared.schemas.threads import ItemIn
from shared.schemas.turns import ResponseCreate

HISTORY_LIMIT = 2000  # items of a thread sent in full when nothing summarises them (TRN-6 bounds it further)


def with_user(ctx: RequestContext, user: str | None) -> RequestContext:
    """PLT-7: the turn body's `user` names the person when nothing else does (two different people: 400). Its
    length is the schema's to check (422 at `user`, as any body field); printability is checked here."""
    if user is None:
        return ctx
    if not user.isprintable():
        raise ValidationFailed("`user` is a subject id: 1 to 256 printable characters (no line breaks or control "
                               "characters).", param="user")
    subject = combine(ctx.principal.subject, Subject(user))
    return ctx.acting_as(dataclasses.replace(ctx.principal, subject=subject))


def _compaction(ctx: RequestContext, agent: agents.AgentVersion | None) -> compaction.CompactionSettings | None:
    """TRN-6: with the key's `compaction` capability, the agent's settings or else the key's; without it the
    thread goes in full (bounded by HISTORY_LIMIT items)."""
    chosen = agents.choose_compaction(ctx.principal, agent)
    return None if chosen is None else compaction.CompactionSettings.parse(msgspec.to_builtins(chosen))


def _agent_turn(agent: agents.AgentVersion | None) -> AgentTurn | None:
    if agent is None:
        return None
    return AgentTurn(agent.id, agent.version, agent.instructions, agent.memory_injection,
                     agent.working_state_schema, agent.compaction)


async def _thread_of(ctx: RequestContext, field: tuple[str, str]) -> tuple[str, str | None, dict[str, Any]]:
    name, value = field
    if name == "previous_response_id":
        _, thread = await reads.reachable(ctx, value, param=name)
    else:
        thread = await threads.visible_thread(ctx, value, param=name)
    if not thread["can_write"]:
        raise ctx.deny("The policy does not let this request continue this thread.", action="thread.write",
                       object_type="thread", object_id=thread["id"])
    # Her owner and the participants it names are locked here: the turn copies its labels (THR-5).
    await thread_rules.not_erased(ctx, thread["subject"], labels=thread["labels"])
    return str(thread["id"]), thread["subject"], dict(thread["labels"] or {})


async def accept(ctx: RequestContext, body: ResponseCreate, idempotency_key: str | None) -> Turn | dict[str, Any]:
    """Check the request and keep its input (one transaction). Answers a replayed document for a repeated
    Idempotency-Key."""
    inputs.refuse_unsupported(body)
    field = inputs.thread_field(body)
    if field is not None or body.working_state_from is not None:
        ctx.require_threads()  # PLT-6: the exact 404
        inputs.refuse_state_copy(body, field)
    if (body.model is None) == (body.agent_id is None):
        raise ValidationFailed("Name the model (`model`, from GET /models) or an agent (`agent_id`), one of them.",
                               param="model")
    items = inputs.input_items(body.input)
    zone = str(ctx.org.get("timezone") or "UTC") if body.timezone is None else check_timezone(body.timezone)
    # TRN-8: the kept answer replays before anything that may have changed since (agent, model, tools).
    earlier = await idempotency.replayed(ctx, body, idempotency_key)
    if earlier is not None:
        return earlier
    agent = await agents.resolve(ctx, body.agent_id) if body.agent_id is not None else None
    ahead = block_ahead.start(ctx, agent.memory_injection if agent else None, items)
    try:
        accepted = await _keep(ctx, body, idempotency_key, field, agent, items, zone)
    except BaseException:
        await block_ahead.discard(ahead)
        raise
    accepted.block_ahead = ahead
    return accepted


async def _keep(ctx: RequestContext, body: ResponseCreate, idempotency_key: str | None, field: tuple[str, str] | None,
                agent: agents.AgentVersion | None, items: list[ItemIn], zone: str) -> Turn:
    stored = body.store and "threads" in ctx.principal.capabilities
    model_id = agent.model if agent is not None else str(body.model)
    spec = await models.offered_spec(ctx.db, ctx.org_id, model_id, param="agent_id" if agent else "model")
    tools = await inputs.turn_tools(ctx, body, stored=stored)
    turn = Turn(ctx, body, spec, items, tools, zone, stored, agent=_agent_turn(agent),
                compaction=_compaction(ctx, agent), input_later=idempotency_key is not None)
    owner = ctx.person
    if field is not None:
        turn.thread_id, owner, turn.thread_labels = await _thread_of(ctx, field)
    turn.items = await inputs.check_outputs(ctx, turn.thread_id, turn.items, HISTORY_LIMIT)
    named = (ctx.person, owner, *erasure.people_in_labels(turn.thread_labels))
    turn.people = tuple(sorted({p for p in named if p is not None}))
    if not stored:
        if turn.people and turn.tools.writes_memory:  # what its write tool's transactions are checked against
            turn.accepted_at = await erasure.transaction_start(ctx.db)
        return turn
    opened, source = await _new_thread(ctx, turn) if turn.thread_id is None else (None, None)
    # One statement keeps the response, the input and a new thread (the response's insert lets the items' key checks
    # keep plans; the build plans anew: db/plan_mode.py).
    accepted = await repo.accept(ctx.db, {
        "org_id": ctx.org_id, "id": turn.id, "thread_id": turn.thread_id, "key_id": ctx.principal.key_id,
        "subject": ctx.person, "model": spec.id, "agent_id": turn.agent.id if turn.agent else None,
        "agent_version": turn.agent.version if turn.agent else None, "status": "in_progress", "metadata": body.metadata,
        "idempotency_owner": idempotency.owner(ctx) if idempotency_key else None, "labels": turn.thread_labels,
        "idempotency_key": idempotency_key, "request_digest": idempotency.digest(body) if idempotency_key else None,
        "created_at": turn.created_at}, [] if turn.input_later else _item_rows(ctx, turn, turn.items),
        new_thread=opened)
    if accepted is None:  # TRN-8: a request with this key is being accepted right now (it inserted first)
        raise idempotency.in_flight()
    if turn.items and not turn.input_later and accepted.positions is None:
        raise thread_deleted(turn.thread_id)
    turn.accepted_at = accepted.at
    turn.history_positions = accepted.positions
    if source is not None:
        await threads_repo.write_state(ctx.db, ctx.org_id, str(turn.thread_id), source["state"], 1, source["size"])
    return turn


async def _new_thread(ctx: RequestContext, turn: Turn) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The checks of opening a thread for this turn; its values for `repo.accept` to insert, and the working state
    it starts with (TRN-4's `working_state_from`)."""
    body = turn.body
    scope = thread_rules.threads_scope(ctx)
    if not scope.may("thread", "write", ctx.person, {}):
        raise ctx.deny("The policy does not let this request open a thread.", action="thread.write",
                       object_type="thread")
    await thread_rules.not_erased(ctx)
    source = await threads.state_source(ctx, body.working_state_from) if body.working_state_from is not None else None
    if source is not None and turn.agent is not None and turn.agent.working_state_schema is not None:
        # the copy is the new thread's first state: it must fit the agent's schema as any write to it must (THR-11)
        check_state(source["state"], ctx.settings.working_state_max_bytes, turn.agent.working_state_schema)
    turn.thread_id = new_id("thr")
    turn.new_thread = True
    return {"subject": ctx.person, "labels": {}, "metadata": {}}, source


async def _append(ctx: RequestContext, turn: Turn, items: Sequence[ItemIn | dict[str, Any]]) -> None:
    """Append items of this turn to its thread, each naming the response."""
    if not items or turn.thread_id is None:
        return
    if await threads_repo.append_items(ctx.db, ctx.org_id, turn.thread_id, _item_rows(ctx, turn, items)) is None:
        raise thread_deleted(turn.thread_id)


def _item_rows(ctx: RequestContext, turn: Turn, items: Sequence[ItemIn | dict[str, Any]]) -> list[dict[str, Any]]:
    typed = [i if not isinstance(i, dict) else msgspec.convert(_as_input(i), ItemIn) for i in items]
    rows = thread_rules.item_rows(ctx, typed)
    for row, item in zip(rows, items, strict=True):
        row["response_id"] = turn.id
        if isinstance(item, dict):
            row["id"] = item["id"]  # the id the answer already showed (and tool provenance names)
    return rows


def _as_input(item: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in item.items() if k != "id"}


# ---------------------------------------------------------------- what the model is sent (TRN-2)

async def prepare(turn: Turn) -> None:
    """Read what the model is sent: summaries, working state, the memory block and the recent items."""
    ctx = turn.ctx
    ahead, turn.block_ahead = turn.block_ahead, None
    try:
        history, summaries, state = await _thread_context(turn)
    except BaseException:
        await block_ahead.discard(ahead)
        raise
    agent_block = turn.agent.memory_injection if turn.agent else None
    turn.injected = await (ahead or block_ahead.build(ctx, ctx.db, block_ahead.choose(ctx, agent_block), turn.items))
    instructions = [turn.agent.instructions] if turn.agent and turn.agent.instructions else []
    if turn.body.instructions:
        instructions.append(turn.body.instructions)
    turn.messages = conversation.build(instructions=instructions, summaries=summaries, state=state,
                                       block=turn.injected.text, history=history,
                                       new_input=conversation.input_dicts(turn.items))
    if privacy.wanted(ctx):
        await _hide(turn)


async def _thread_context(turn: Turn) -> tuple[list[dict[str, Any]], list[str], dict[str, Any] | None]:
    """The thread's recent items (after its summaries, TRN-6), the summaries and its working state."""
    ctx = turn.ctx
    history: list[dict[str, Any]] = []
    summaries: list[str] = []
    state: dict[str, Any] | None = None
    before = turn.history_positions[0] if turn.history_positions else None
    if turn.thread_id is not None and before != 1:  # a thread whose first item is this input has no history
        if turn.compaction is not None:  # TRN-6: summaries for what is summarised, the rest in full
            kept = await compaction.history(ctx.db, ctx.org_id, turn.thread_id, turn.compaction,
                                            before_position=before)
            summaries = [s["text"] for s in kept.summaries]
            rows = list(kept.items)
        else:
            rows = list(reversed(await threads_repo.list_items(ctx.db, ctx.org_id, turn.thread_id, after=before,
                                                               descending=True, limit=HISTORY_LIMIT)))
        history = [{**r["body"], "type": r["type"]} for r in rows]
        # MEM-19: the model reads their words, so the answer is not kept should one of them be erased meanwhile
        turn.people = tuple(sorted({*turn.people, *(r["subject"] for r in rows if r["subject"] is not None)}))
    if turn.thread_id is not None:
        state_row = None
        if not (turn.new_thread and turn.body.working_state_from is None):  # a new thread has no state to read
            state_row = await threads_repo.get_state(ctx.db, ctx.org_id, turn.thread_id)
        state = state_row["state"] if state_row else None
        turn.pending_state = state_shown(state_row)  # TRN-4: the turn's state write is based on what it showed
    return history, summaries, state


async def _hide(turn: Turn) -> None:
    """TRN-10: the model sees placeholders; a kept thread keeps the mapping (stable across its turns) and is
    marked. When a concurrent turn numbered a value first, the messages are hidden again with its numbers."""
    ctx = turn.ctx
    real = turn.messages
    try:
        pz = await pii_service.open_pseudonymizer(ctx, turn.thread_id if turn.stored else None)
        turn.messages = await privacy.hide_messages_aside(pz, real)
    except PiiUnavailable as exc:
        raise TurnFailure("pii_unavailable", f"Personal data could not be hidden from the model: {exc}") from exc
    if turn.stored and turn.thread_id is not None and await pii_service.store(ctx, turn.thread_id, pz):
        turn.messages = await privacy.hide_messages_aside(pz, real)
    turn.pseudonymizer = pz


# ---------------------------------------------------------------- keeping the result

def _usage_rows(turn: Turn) -> list[dict[str, Any]]:
    ctx = turn.ctx
    return [{"org_id": ctx.org_id, "model": call.model, "input_tokens": call.input_tokens,
             "output_tokens": call.output_tokens, "key_id": ctx.principal.key_id,
             "response_id": turn.id if turn.stored else None, "job": None} for call in turn.calls]


async def _meter(turn: Turn) -> None:
    await usage.record_many(turn.ctx.db, _usage_rows(turn))


def _row(turn: Turn, status: str, error: dict[str, str] | None) -> dict[str, Any]:
    return {"id": turn.id, "status": status, "thread_id": turn.thread_id if turn.stored else None,
            "model": turn.spec.id, "agent_id": turn.agent.id if turn.agent else None,
            "agent_version": turn.agent.version if turn.agent else None, "output": turn.produced,
            "usage": turn.usage, "error": error, "metadata": turn.body.metadata, "trace": turn.trace(),
            "created_at": turn.created_at, "completed_at": datetime.now(UTC), "labels": turn.thread_labels}


async def finish(turn: Turn, failure: TurnFailure | None) -> dict[str, Any]:
    """Keep the answer (or the failure), the working state and usage in one transaction."""
    ctx = turn.ctx
    status = "failed" if failure else "incomplete" if turn.cut_short else "completed"
    error = {"code": failure.code, "message": failure.message} if failure else None
    # Writes by key follow: planning each for its values cost ~0.3 ms a turn (db/plan_mode.py).
    # MEM-19: a person erased while the model answered gets nothing back; the erasure's lock is taken before any
    # row lock here, as the erasure itself takes it (the other order deadlocks with it).
    plans_kept = turn.stored and await erasure.refuse_if_erased(
        ctx.db, ctx.org_id, ctx.settings.secret, turn.people, started_at=turn.accepted_at, keep_plans=True)
    if not plans_kept:
        await let_key_checks_keep_plans(ctx.db)
    placeholders = turn.pseudonymizer is not None and turn.thread_id is not None
    state = failure is None and turn.thread_id is not None and (turn.pending_state is not None
                                                                and turn.pending_state.patched)
    # The output items go with the closing update (a round trip fewer), unless other writes of the thread follow
    # them: its placeholders and its working state come after the items, as when an application writes them.
    appended_apart = turn.stored and (placeholders or state)
    kept: list[ItemIn | dict[str, Any]] = [*(turn.items if turn.input_later else ()), *turn.produced]
    if appended_apart:
        await _append(ctx, turn, kept)
        if placeholders:
            await pii_service.store(ctx, str(turn.thread_id), turn.pseudonymizer)  # values first seen in tool results
        if state:
            assert turn.pending_state is not None
            turn.state_written = await apply_state(ctx, str(turn.thread_id), turn.pending_state, turn.id,
                                                   turn.state_schema)
    row = _row(turn, status, error)
    if turn.stored:
        items = [] if appended_apart or turn.thread_id is None else _item_rows(ctx, turn, kept)
        ended = await repo.finish(ctx.db, ctx.org_id, turn.id, {"status": status, "output": turn.produced,
                                                                "usage": turn.usage, "error": error,
                                                                "trace": row["trace"],
                                                                "completed_at": row["completed_at"]},
                                  _usage_rows(turn), thread_id=turn.thread_id, items=items)
        if ended == "settled":  # TRN-11: failed as abandoned meanwhile, it stays failed
            return await finished_late(ctx, turn.id, _usage_rows(turn), turn.usage)
        if ended == "thread_deleted":
            raise thread_deleted(turn.thread_id)
    else:
        await _meter(turn)
    if turn.stored and turn.thread_id is not None and turn.compaction is not None:
        # Queued in this transaction: the summary job exists exactly when the turn it follows was kept.
        await compaction.schedule(ctx, ctx.org_id, turn.thread_id, turn.compaction, ctx.principal.key_id,
                                  turn.spec.id)
    return documents.document(row)


async def run(ctx: RequestContext, body: ResponseCreate, idempotency_key: str | None) -> dict[str, Any]:
    """The whole turn; the caller's transaction is committed here between the steps: once before the model is
    asked, after each platform tool, and once at the end."""
    ctx = with_user(ctx, body.user)
    accepted = await accept(ctx, body, idempotency_key)
    if isinstance(accepted, dict):
        return accepted
    turn = accepted
    try:
        failure: TurnFailure | None = None
        try:
            # The thread's part of what the model is sent is read in the accepting transaction (the block beside
            # it: block_ahead.py); its commit is sent as the model is asked (TRN-11). An unexpected error here
            # keeps nothing at all.
            await prepare(turn)
        except TurnFailure as failed:
            failure = failed
        if failure is not None:
            await ctx.db.commit()
        else:
            try:
                await loop.run(turn, commit_first=True)
            except TurnFailure as failed:
                failure = failed
        await ctx.db.rollback()
        doc = await finish(turn, failure)
        await ctx.db.commit()  # kept whatever the route answers next (POST /messages answers a failure with 502)
        if doc["status"] != "failed" and turn.injected is not None:
            injection.count_recalls_soon(ctx, turn.injected)  # INJ-8: written with other turns' counts
        return doc
    except BaseException as error:
        await ctx.db.rollback()
        await _mark_failed(turn, error)
        raise


async def _mark_failed(turn: Turn, error: BaseException) -> None:
    """The response must not stay `in_progress` (an Idempotency-Key would wait forever); it keeps the error the
    route answers (`subject_erased`, say), or `internal_error` for an unexpected one."""
    if not turn.stored:
        return
    ctx = turn.ctx
    kept = {"code": error.code, "message": error.message} if isinstance(error, ApiError) else {
        "code": "internal_error", "message": "The turn stopped on an unexpected error on our side."}
    try:
        await repo.mark_failed(ctx.db, ctx.org_id, turn.id, {"status": "failed", "usage": turn.usage, "error": kept})
        await _meter(turn)
        await ctx.db.commit()
    except Exception:
        await ctx.db.rollback()
