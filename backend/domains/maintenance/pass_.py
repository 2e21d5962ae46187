"""One maintenance pass of one store (EXT-16), in three steps for the job: `prepare` (one transaction: the store
locked, proposals by records written, what the helper model is to be asked gathered), `ask` (no transaction
open), `finish` (one transaction: contested marks, lessons, judged proposals, and the store's last run).

The last run is written by `finish` alone, so a worker killed between the steps leaves the store due: the job
comes back (stalled-job recovery) and the pass runs again, whose steps skip what the first one committed
(proposals already made, records already contested, episodes already used). One pass of a store at a time:
the job holds an advisory lock on the store for the whole pass (`backend/jobs/maintenance.run_store`), which
PostgreSQL frees when a killed worker's connection goes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from backend.access.context import RequestContext
from backend.domains.erasure import guard as erasure
from backend.domains.indexes import repository as indexes_repo
from backend.domains.maintenance import contested, lessons
from backend.domains.maintenance import repository as repo
from backend.domains.maintenance.helper import Asked, helper_spec
from backend.domains.proposals import analysis
from backend.domains.stores.service import effective_sections

EVERY_MINUTES = 60  # a store's pass runs at most this often (the job looks every five minutes)


@dataclass
class Plan:
    index_id: str
    proposed: int = 0
    judging: analysis.Judging | None = None
    pairs: contested.Pairs | None = None
    lessons: lessons.LessonWork | None = None
    answers: dict[str, Any] = field(default_factory=dict)


async def prepare(ctx: RequestContext, index_id: str) -> Plan | None:
    """None when the store is gone or its `maintenance.enabled` is off."""
    if not await indexes_repo.exists(ctx.db, ctx.org_id, index_id):
        return None
    row = await repo.lock_store(ctx.db, ctx.org_id, index_id)
    if row is None:
        return None
    sections = effective_sections(row["sections"], ctx.settings.injection_max_budget_tokens)
    if not sections.maintenance.enabled:
        return None
    index = await indexes_repo.get(ctx.db, ctx.scope, index_id)
    assert index is not None
    spec = await helper_spec(ctx)
    plan = Plan(index_id)
    if analysis.analyses_on(ctx.org, sections):  # EXT-15: only while `improvements.enabled` is on
        plan.proposed = await analysis.by_records(ctx, index)
        plan.judging = await analysis.to_judge(ctx, index_id, spec)
    plan.pairs = await contested.to_ask(ctx, index_id, spec)
    if sections.lessons.enabled:
        # MEM-19: her lessons are refused if she was erased after this transaction began (it reads her episodes),
        # by the database's clock, which an erasure's time is on
        plan.lessons = await lessons.to_ask(ctx, index_id, spec, sections.lessons.min_episodes,
                                            await erasure.transaction_start(ctx.db))
    return plan


async def ask(plan: Plan) -> None:
    """Every helper-model question of the pass, with no transaction open."""
    if plan.judging is not None:
        plan.answers["judging"] = await analysis.judge(plan.judging)
    if plan.pairs is not None:
        plan.answers["pairs"] = await contested.ask_pairs(plan.pairs)
    if plan.lessons is not None:
        plan.answers["lessons"] = await lessons.ask_all(plan.lessons)


async def finish(ctx: RequestContext, plan: Plan) -> dict[str, int]:
    counts = {"proposed": plan.proposed, "contested": 0, "lessons": 0}
    judged: Asked | None = plan.answers.get("judging")
    if plan.judging is not None and judged is not None:
        counts["proposed"] += await analysis.by_judgement(ctx, plan.judging, judged)
    pairs: Asked | None = plan.answers.get("pairs")
    if plan.pairs is not None and pairs is not None:
        counts["contested"] = await contested.mark(ctx, plan.pairs, pairs)
    taught: list[Asked] | None = plan.answers.get("lessons")
    if plan.lessons is not None and taught is not None:
        counts["lessons"] = await lessons.write(ctx, plan.lessons, taught)
    await repo.mark_run(ctx.db, ctx.org_id, plan.index_id)
    return counts
