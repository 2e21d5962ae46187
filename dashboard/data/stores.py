"""What the stores page reads and changes: a store's settings per section, against the defaults, and their history
(DSH-4)."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import polars as pl

from dashboard.data import _cached, events_frame
from shared.client import CoreClient
from shared.schemas.platform import AuditQuery
from shared.schemas.stores import StoreSettingsOut

SETTINGS_SECTIONS = ("injection", "commitments", "lessons", "promotion", "maintenance")
SETTINGS_CHANGED = "store.settings_changed"
# Settings whose value is one of a few names (the API's Literal); the editor offers them in a select box.
SETTING_CHOICES: dict[str, list[str]] = {"injection.rank": ["confidence", "relevance", "blend"]}
SECTION_TITLES = {"injection": "Injection", "commitments": "Commitments", "lessons": "Lessons",
                  "promotion": "Promotion", "maintenance": "Maintenance"}
SECTION_PURPOSE = {
    "injection": "What a turn is given from this store: how many tokens, how they are shared, in which order.",
    "commitments": "Open promises injected into turns.",
    "lessons": "Lessons the maintenance pass draws from past sessions.",
    "promotion": "Proposals to turn people's records into shared ones (an administrator applies them).",
    "maintenance": "The scheduled pass that tidies this store.",
}
# Every setting's label and one sentence of help, keyed `section.name`.
SETTING_TEXT: dict[str, tuple[str, str]] = {
    "injection.budget_tokens": (
        "Token budget", "The most tokens a turn's memory block may use from this store. It can only lower a key's "
                        "own budget; empty means the installation's ceiling."),
    "injection.section_budgets": (
        "Budget per section", "Optional ceilings inside the budget, per section (commitments, behaviour, "
                              "about_this_person, organisation, past_sessions), in tokens, labels included."),
    "injection.rank": (
        "Order records by", "confidence: the most certain first; relevance: closest to what the turn is about; "
                            "blend: half of each."),
    "injection.episodes_limit": (
        "Past sessions per turn", "How many summaries of earlier sessions a turn is given; 0 gives none."),
    "commitments.inject_limit": (
        "Commitments per turn", "How many open commitments a turn is given, due soonest first."),
    "lessons.enabled": ("Learn lessons", "Let the maintenance pass write lessons from past sessions."),
    "lessons.min_episodes": (
        "Sessions before a lesson", "How many past sessions must point the same way before a lesson is written."),
    "promotion.enabled": (
        "Propose shared records", "Let the analysis pass propose shared records drawn from people's records; "
                                  "nothing is shared until an administrator applies a proposal."),
    "promotion.labels": (
        "Labels of promoted records", "Labels every shared record made from a proposal gets, so the policy "
                                      "decides who sees it (for example department: payroll)."),
    "maintenance.enabled": (
        "Run maintenance", "Let the scheduled pass tidy this store (contradictions, duplicates, lessons)."),
}


def setting_text(section: str, name: str) -> tuple[str, str]:
    """A setting's label and help; a setting this dashboard does not know yet shows its own name."""
    return SETTING_TEXT.get(f"{section}.{name}", (name.replace("_", " ").capitalize(), f"`{section}.{name}`"))


@_cached
def store_settings(client: CoreClient, index_id: str) -> StoreSettingsOut:
    return client.store_settings(index_id)


def idle_warning(settings: StoreSettingsOut, section: str) -> str | None:
    """Why a section that is switched on does nothing in this store: lessons and promotion analyses are written by
    the maintenance pass (EXT-14, EXT-15, EXT-16), which this store may have switched off."""
    if settings.maintenance.enabled or section not in ("lessons", "promotion"):
        return None
    if not getattr(settings, section).enabled:
        return None
    what = "no lesson is written" if section == "lessons" else "no proposal is made"
    return (f"`{section}` is on, but the maintenance pass that acts on it is off in this store: {what} until "
            "`maintenance.enabled` is switched on.")


def section_values(settings: StoreSettingsOut, section: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A section's effective values and its defaults, as plain dicts."""
    return (msgspec.to_builtins(getattr(settings, section)), msgspec.to_builtins(getattr(settings.defaults, section)))


def stored_values(settings: StoreSettingsOut, section: str, effective: dict[str, Any]) -> dict[str, Any]:
    """The section as the store holds it, as far as the API tells: a `budget_tokens` the API reports at the
    ceiling is taken as unset (INJ-10: only an unset budget follows the ceiling), so an untouched one is sent as
    `null` rather than pinned at today's ceiling."""
    stored = dict(effective)
    if section == "injection" and stored.get("budget_tokens") == settings.max_budget_tokens:
        stored["budget_tokens"] = None
    return stored


def unpinned(after: dict[str, Any], effective: dict[str, Any], stored: dict[str, Any]) -> dict[str, Any]:
    """The editor's section with an unset budget left unset unless the administrator changed the value shown (the
    effective one, the ceiling)."""
    name = "budget_tokens"
    if name in after and stored.get(name) is None and after[name] == effective.get(name):
        return {**after, name: None}
    return after


def section_frame(settings: StoreSettingsOut, section: str) -> pl.DataFrame:
    """One row per setting: effective value, default, and whether they differ (shown as text, JSON for maps)."""
    effective, defaults = section_values(settings, section)
    rows = []
    for name, value in effective.items():
        default = defaults.get(name)
        shown = _shown(default)
        if section == "injection" and name == "budget_tokens" and default is None:
            # No budget of its own means the installation's ceiling, which is what the API reports as effective.
            default, shown = settings.max_budget_tokens, f"none (the ceiling, {settings.max_budget_tokens})"
        rows.append({"setting": setting_text(section, name)[0], "effective": _shown(value), "default": shown,
                     "differs": value != default, "name": name})
    return pl.DataFrame(rows, schema={"setting": pl.String, "effective": pl.String, "default": pl.String,
                                      "differs": pl.Boolean, "name": pl.String})


def _shown(value: Any) -> str:
    if value is None or value == {}:
        return "none"
    if isinstance(value, dict | list | bool):
        return json.dumps(value, sort_keys=True)
    return str(value)


def section_diff(before: dict[str, Any], after: dict[str, Any], section: str) -> pl.DataFrame:
    """The settings a save would change: label, before, after."""
    rows = [{"setting": setting_text(section, name)[0], "before": _shown(before.get(name)),
             "after": _shown(after.get(name))} for name in after if after.get(name) != before.get(name)]
    return pl.DataFrame(rows, schema={"setting": pl.String, "before": pl.String, "after": pl.String})


def save_section(client: CoreClient, index_id: str, section: str, value: dict[str, Any]) -> StoreSettingsOut:
    """Replace one section whole; the API judges the values (its 422 names `section.field`)."""
    try:
        return client.update_store_settings(index_id, {section: value})
    finally:
        store_settings.clear()
        settings_history.clear()


@_cached
def settings_history(client: CoreClient, index_id: str, limit: int, tz: str) -> pl.DataFrame:
    """The store's `store.settings_changed` events, newest first."""
    page = client.audit(AuditQuery(action=[SETTINGS_CHANGED], object_id=index_id), limit=limit)
    return events_frame(page.data, tz)
