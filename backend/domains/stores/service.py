"""Store settings (INJ-3): five sections, each replaced whole when sent; every change audited."""

from __future__ import annotations

from typing import Any

import msgspec

from backend.access.context import RequestContext
from backend.access.labels import check_labels
from backend.domains.indexes.service import reachable
from backend.domains.stores import repository as repo
from backend.errors import Forbidden
from shared.schemas.stores import (
    CommitmentsSettings,
    InjectionSettings,
    LessonsSettings,
    MaintenanceSettings,
    PromotionSettings,
    StoreSections,
    StoreSettingsPatch,
)

SECTION_TYPES: dict[str, type[msgspec.Struct]] = {
    "injection": InjectionSettings, "commitments": CommitmentsSettings, "lessons": LessonsSettings,
    "promotion": PromotionSettings, "maintenance": MaintenanceSettings,
}


def defaults() -> StoreSections:
    return StoreSections(injection=InjectionSettings(), commitments=CommitmentsSettings(), lessons=LessonsSettings(),
                         promotion=PromotionSettings(), maintenance=MaintenanceSettings())


def effective_sections(stored: dict[str, Any] | None, max_budget: int) -> StoreSections:
    """Stored sections over the defaults; the budget never above the operator's ceiling."""
    values = msgspec.to_builtins(defaults())
    for name, section in (stored or {}).items():
        if name in values:
            values[name] = section
    sections = msgspec.convert(values, StoreSections)
    budget = sections.injection.budget_tokens
    sections.injection.budget_tokens = max_budget if budget is None else min(budget, max_budget)
    return sections


def document(index_id: str, row: dict[str, Any] | None, max_budget: int) -> dict[str, Any]:
    sections = effective_sections(row["sections"] if row else None, max_budget)
    return {
        "index_id": index_id, **msgspec.to_builtins(sections), "defaults": msgspec.to_builtins(defaults()),
        "max_budget_tokens": max_budget, "customised": sorted((row or {}).get("sections", {}) or {}),
        "updated_at": row["updated_at"] if row else None,
        "last_maintenance_run_at": row["last_maintenance_run_at"] if row else None,
    }


async def read(ctx: RequestContext, index_id: str) -> dict[str, Any]:
    ctx.require("memory")
    await reachable(ctx.db, ctx.management_scope, index_id)
    max_budget = ctx.settings.injection_max_budget_tokens
    return document(index_id, await repo.get(ctx.db, ctx.org_id, index_id), max_budget)


def _check_promotion_writer(ctx: RequestContext) -> None:
    if not ctx.is_admin and "management" not in ctx.principal.capabilities:
        raise Forbidden("Changing `promotion` needs the `management` capability beside `memory`, or an administrator.",
                        param="promotion", code="capability_missing")
    if "improvements" not in (ctx.org.get("capabilities") or []):
        raise Forbidden("This organisation does not hold the `improvements` capability, so promotion cannot be "
                        "switched on for its stores.", param="promotion", code="improvements_missing")


async def patch(ctx: RequestContext, index_id: str, body: StoreSettingsPatch) -> dict[str, Any]:
    ctx.principal.refuse_subject_token("change store settings")
    ctx.require("memory")
    await reachable(ctx.db, ctx.management_scope, index_id)
    max_budget = ctx.settings.injection_max_budget_tokens
    sent = {name: getattr(body, name) for name in SECTION_TYPES if getattr(body, name) is not msgspec.UNSET}
    if "promotion" in sent:
        _check_promotion_writer(ctx)
        check_labels(sent["promotion"].labels, ctx.org.get("vocabulary"), "memory_record", param="promotion.labels")
    if "injection" in sent and sent["injection"].budget_tokens is not None:
        # The store may only lower budgets: a value above the operator's ceiling is stored as the ceiling.
        sent["injection"].budget_tokens = min(sent["injection"].budget_tokens, max_budget)
    current = await repo.get_for_update(ctx.db, ctx.org_id, index_id)
    before = document(index_id, current, max_budget)
    stored = dict(current["sections"]) if current else {}
    for name, section in sent.items():
        stored[name] = msgspec.to_builtins(section)
    row = await repo.save_sections(ctx.db, ctx.org_id, index_id, stored)
    after = document(index_id, row, max_budget)
    if sent:
        await ctx.audit("store.settings_changed", object_type="store", object_id=index_id,
                        detail={"sections": sorted(sent),
                                "before": {n: before[n] for n in sent}, "after": {n: after[n] for n in sent}})
    return after
