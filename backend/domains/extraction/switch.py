"""The extraction switch of a store (EXT-2 … EXT-6): who may send it, what it checks, its author and state, and
the reports the dashboard's health charts read (runs, windows, counts). Jobs are queued in the request's
transaction (backend/domains/extraction/queue.py)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import msgspec

from backend.access.context import RequestContext
from backend.domains.extraction import queue
from backend.domains.extraction import repository as repo
from backend.domains.extraction.session_repository import mark_episodes_on
from backend.domains.models import repository as models_repo
from backend.domains.models.service import offered_spec
from backend.errors import CapabilityMissing, Conflict, NotFound, ValidationFailed
from backend.ids import new_id
from shared.schemas.extraction import ExtractionSwitchIn

READ_AGAIN_ON = ("model", "instructions", "types")  # EXT-6
NOT_EXTRACTED_TYPES = frozenset({"episode", "lesson"})  # written by their own switches (EXT-12, EXT-13)


def _may_write_memory(ctx: RequestContext) -> bool:
    scope = ctx.management_scope
    return scope.unrestricted or any(rule.effect == "permit" and rule.covers("memory_write", "write")
                                     for rule in scope.rules)


def _reachable_store(ctx: RequestContext, index_id: str) -> None:
    if not ctx.management_scope.reaches_index(index_id):
        raise NotFound(f"No index {index_id!r} is reachable with this credential.", param="index_id")


def _require_reader(ctx: RequestContext) -> None:
    """A switch and its reports: administrators, or a key holding `threads` that names nobody (never a subject
    token): windows and runs span every person's threads, so a request for one person reads none of them."""
    ctx.principal.refuse_subject_token("read or change extraction switches")
    ctx.refuse_person_named("A store's extraction switch, runs and windows are the organisation's: send the request "
                            "without naming a person.")
    if not ctx.is_admin and "threads" not in ctx.principal.capabilities:
        raise CapabilityMissing("threads")


async def put(ctx: RequestContext, index_id: str, body: ExtractionSwitchIn) -> dict[str, Any]:
    """EXT-2: set the switch (on or off); the sender becomes its author (EXT-3)."""
    _require_reader(ctx)
    _reachable_store(ctx, index_id)
    if not _may_write_memory(ctx):
        raise ctx.deny("Setting an extraction switch needs a policy that permits `memory_write`.",
                       action="extraction.set", object_type="memory_store", object_id=index_id)
    if not await repo.index_exists(ctx.db, ctx.org_id, index_id):
        raise NotFound(f"No index {index_id!r} is reachable with this credential.", param="index_id")
    await offered_spec(ctx.db, ctx.org_id, body.model)
    if body.lessons and not body.episodes:
        raise ValidationFailed("Lessons are drawn from episodes: send `episodes: true` with `lessons: true`.",
                               param="lessons")
    types = list(dict.fromkeys(body.types))
    for i, name in enumerate(types):
        if name in NOT_EXTRACTED_TYPES:
            raise ValidationFailed(f"`{name}` records are not chosen in `types`; the switch's `episodes` and "
                                   "`lessons` fields ask for them.", param=f"types[{i}]")
    before = await repo.get_switch(ctx.db, ctx.org_id, index_id, lock=True)
    held = (before or {}).get("filters") or {}
    await _check_filters(ctx, body, set(held.get("agent_ids") or []), set(held.get("key_ids") or []))
    author = ("key", ctx.principal.key_id) if ctx.principal.key_id else ("admin", ctx.actor.id)
    values = {"org_id": ctx.org_id, "index_id": index_id, "enabled": body.enabled, "model": body.model,
              "instructions": body.instructions, "types": types, "schedule_minutes": body.schedule_minutes,
              "quiet_minutes": body.quiet_minutes, "threads": body.threads, "episodes": body.episodes,
              "lessons": body.lessons, "filters": msgspec.to_builtins(body.filters), "author_type": author[0],
              "author_id": author[1]}
    await repo.upsert_switch(ctx.db, values)
    if body.episodes and not (before or {}).get("episodes"):
        await mark_episodes_on(ctx.db, ctx.org_id, index_id)
    requeued = 0
    if before is not None and any(before[k] != values[k] for k in READ_AGAIN_ON):
        run_id = new_id("run")
        await repo.insert_run(ctx.db, {"org_id": ctx.org_id, "id": run_id, "index_id": index_id,
                                       "trigger": "requeue"})
        threads = await repo.requeue(ctx.db, ctx.org_id, index_id, "failed", run_id)
        await repo.mark_planned(ctx.db, ctx.org_id, run_id)
        requeued = len(threads)
    if body.enabled:  # windows left waiting while the switch could not run go on now (EXT-3, EXT-5)
        for thread_id in await repo.queued_threads(ctx.db, ctx.org_id, index_id):
            await queue.queue_thread(ctx.db, ctx.org_id, index_id, thread_id)
    changed = {k: v for k, v in values.items() if k not in ("org_id", "index_id", "instructions")
               and (before is None or before[k] != v)}
    if before is None or before["instructions"] != values["instructions"]:
        changed["instructions"] = True  # the trail says that they changed, not what they say
    await ctx.audit("extraction.switch_set", object_type="memory_store", object_id=index_id,
                    detail={"changed": changed, "created": before is None, "threads_requeued": requeued})
    return await get(ctx, index_id)


async def _check_filters(ctx: RequestContext, body: ExtractionSwitchIn, held_agents: set[str],
                         held_keys: set[str]) -> None:
    """EXT-2: agent ids new to the switch must be live agents; key ids new to it must be or have been keys."""
    agents = body.filters.agent_ids
    live = await repo.live_agent_ids(ctx.db, ctx.org_id, [a for a in agents if a not in held_agents])
    for i, agent_id in enumerate(agents):
        if agent_id not in held_agents and agent_id not in live:
            raise ValidationFailed(f"{agent_id!r} is not an agent of this organisation.",
                                   param=f"filters.agent_ids[{i}]", code="agent_not_found")
    keys = body.filters.key_ids
    known = await repo.known_key_ids(ctx.db, ctx.org_id, [k for k in keys if k not in held_keys])
    for i, key_id in enumerate(keys):
        if key_id not in held_keys and key_id not in known:
            raise ValidationFailed(f"{key_id!r} was never a key of this organisation (per its key audit trail).",
                                   param=f"filters.key_ids[{i}]", code="key_not_found")


async def state_of(ctx: RequestContext, switch: dict[str, Any]) -> str:
    """EXT-5: `off`, else the first reason nothing runs, else `active`. Nothing else is checked here: an author
    that lost `threads` or the right to write memory shows as failed windows (`permission_denied`)."""
    if not switch["enabled"]:
        return "off"
    if not await repo.index_exists(ctx.db, ctx.org_id, switch["index_id"]):
        return "objects_missing"
    if not await author_usable(ctx, switch):
        return "author_unavailable"
    if await models_repo.find(ctx.db, ctx.org_id, switch["model"]) is None:
        return "model_unavailable"
    return "active"


async def author_usable(ctx: RequestContext, switch: dict[str, Any]) -> bool:
    if switch["author_type"] == "admin":
        return await repo.admin_row(ctx.db, ctx.org_id, switch["author_id"]) is not None
    key = await repo.key_row(ctx.db, ctx.org_id, switch["author_id"])
    return key is not None and key["revoked_at"] is None and (key["expires_at"] is None
                                                              or key["expires_at"] > datetime.now(UTC))


def run_document(row: dict[str, Any]) -> dict[str, Any]:
    finished = None
    if row["planned_at"] is not None and not row["pending"]:
        finished = max(t for t in (row["planned_at"], row["last_finished"]) if t is not None)
    duration = int((finished - row["started_at"]).total_seconds() * 1000) if finished else None
    return {"id": row["id"], "trigger": row["trigger"], "started_at": row["started_at"], "finished_at": finished,
            "windows": row["windows"], "windows_read": row["windows_read"], "written": int(row["written"]),
            "confirmed": int(row["confirmed"]), "replaced": int(row["replaced"]), "dropped": int(row["dropped"]),
            "failures": row["failures"], "duration_ms": duration, "input_tokens": int(row["input_tokens"]),
            "output_tokens": int(row["output_tokens"])}


async def _switch(ctx: RequestContext, index_id: str) -> dict[str, Any]:
    _require_reader(ctx)
    _reachable_store(ctx, index_id)
    switch = await repo.get_switch(ctx.db, ctx.org_id, index_id)
    if switch is None:
        raise NotFound(f"The store {index_id!r} has no extraction switch; PUT one to switch extraction on.",
                       param="index_id", code="switch_not_found")
    return switch


async def get(ctx: RequestContext, index_id: str) -> dict[str, Any]:
    """EXT-4: the switch, its author, state, last run, window counts and most common failure."""
    switch = await _switch(ctx, index_id)
    runs = await repo.runs_page(ctx.db, ctx.org_id, index_id, None, 1)
    codes = await repo.error_codes(ctx.db, ctx.org_id, index_id)
    return {**{k: switch[k] for k in ("index_id", "enabled", "model", "instructions", "types", "schedule_minutes",
                                     "quiet_minutes", "threads", "episodes", "lessons", "filters", "set_at")},
            "author_key_id": switch["author_id"] if switch["author_type"] == "key" else None,
            "author_admin_id": switch["author_id"] if switch["author_type"] == "admin" else None,
            "state": await state_of(ctx, switch), "last_run": run_document(runs[0]) if runs else None,
            "windows": await repo.window_counts(ctx.db, ctx.org_id, index_id),
            "error_code": next(iter(codes), None)}


async def run_now(ctx: RequestContext, index_id: str) -> str:
    """EXT-4: queue a run now (administrators, or a key with `threads` and `management`)."""
    _require_reader(ctx)
    ctx.require_management()
    switch = await _switch(ctx, index_id)
    state = await state_of(ctx, switch)
    if state != "active":
        raise Conflict(f"Extraction cannot run: the switch's state is {state!r}.", code="extraction_not_active")
    run_id = await start_run(ctx, index_id, "manual")
    await ctx.audit("extraction.run_queued", object_type="memory_store", object_id=index_id,
                    detail={"run_id": run_id})
    return run_id


async def start_run(ctx: RequestContext, index_id: str, trigger: str) -> str:
    run_id = new_id("run")
    await repo.insert_run(ctx.db, {"org_id": ctx.org_id, "id": run_id, "index_id": index_id, "trigger": trigger})
    await repo.mark_scheduled(ctx.db, ctx.org_id, index_id)
    await queue.queue_plan(ctx.db, ctx.org_id, index_id, run_id)
    return run_id


async def runs(ctx: RequestContext, index_id: str, before_id: str | None, limit: int) -> list[dict[str, Any]]:
    await _switch(ctx, index_id)
    return [run_document(r) for r in await repo.runs_page(ctx.db, ctx.org_id, index_id, before_id, limit)]


async def windows(ctx: RequestContext, index_id: str, query: Any, before_id: str | None,
                  limit: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """A page of windows with the filters, and the counts the charts need (aggregated in SQL)."""
    await _switch(ctx, index_id)
    rows = await repo.windows_page(ctx.db, ctx.org_id, index_id, state=query.state_, error_code=query.error_code,
                                   run_id=query.run_id, before_id=before_id, limit=limit)
    rows = [{k: v for k, v in row.items() if k not in ("org_id", "index_id")} for row in rows]
    zone = ctx.org.get("timezone") or "UTC"
    extra = {"counts": await repo.window_counts(ctx.db, ctx.org_id, index_id),
             "error_codes": await repo.error_codes(ctx.db, ctx.org_id, index_id),
             "buckets": await repo.buckets(ctx.db, ctx.org_id, index_id, unit=query.bucket, count=query.buckets,
                                           zone=zone, run_id=query.run_id)}
    return rows, extra


async def refuse_agent_deletion(ctx: RequestContext, agent_id: str) -> None:
    """A switch that names the agent in its filters keeps it from being deleted (EXT-2)."""
    stores = await repo.stores_naming_agent(ctx.db, ctx.org_id, agent_id)
    if stores:
        raise Conflict(f"The extraction switch of store {stores[0]!r} names this agent in its filters; remove it "
                       "there first.", code="agent_in_use")
