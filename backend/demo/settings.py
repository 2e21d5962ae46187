"""The demo organisation's settings: time zone, vocabulary, its three stores and its keys with their policies."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from shared.schemas.platform import (
    EmbeddingConfig,
    HalfLife,
    Improvements,
    InjectionBlock,
    KeyCreate,
    KeyMemoryConfig,
    OrgMemory,
    OrgPatch,
)
from shared.schemas.stores import (
    CommitmentsSettings,
    InjectionSettings,
    LessonsSettings,
    MaintenanceSettings,
    PromotionSettings,
    StoreSettingsPatch,
)

TIMEZONE = "Europe/Amsterdam"
VOCABULARY: dict[str, Any] = {
    "memory_record": {"department": {"attribute": True}, "audience": {}},
    "thread": {"department": {"attribute": True}},
}


def org_patch() -> OrgPatch:
    return OrgPatch(timezone=TIMEZONE, capabilities=["improvements"], improvements=Improvements(enabled=True),
                    memory=OrgMemory(decay={"preference": HalfLife(half_life_days=180),
                                            "fact": HalfLife(half_life_days=365)}))


# demo name -> (the store's name, its embedding, its settings)
STORES: dict[str, tuple[str, EmbeddingConfig | None, StoreSettingsPatch]] = {
    "support": ("Customer support", EmbeddingConfig(provider="hashing", model="feature-hash", dimensions=384),
                StoreSettingsPatch(
                    injection=InjectionSettings(budget_tokens=1200, rank="blend",
                                                section_budgets={"commitments": 300, "behaviour": 200}),
                    commitments=CommitmentsSettings(inject_limit=3),
                    promotion=PromotionSettings(enabled=True, labels={"department": "support"}))),
    "people": ("People and payroll", None,
               StoreSettingsPatch(
                   injection=InjectionSettings(budget_tokens=800, rank="confidence"),
                   lessons=LessonsSettings(enabled=True, min_episodes=5),
                   maintenance=MaintenanceSettings(enabled=False))),
    "sales": ("Sales", EmbeddingConfig(provider="hashing", model="feature-hash", dimensions=256),
              StoreSettingsPatch(
                  injection=InjectionSettings(budget_tokens=2000, rank="relevance", episodes_limit=3),
                  commitments=CommitmentsSettings(inject_limit=8))),
}


def _rule(rule_id: str, effect: str, kind: str, **rest: Any) -> dict[str, Any]:
    return {"id": rule_id, "effect": effect, "kind": kind, **rest}


OWN = [{"atom": "subject_is_owner"}]
NOBODY = [{"atom": "no_subject"}]


def _default_rules() -> list[dict[str, Any]]:
    """The rules a key gets without a policy: her own, the shared ones to see, everything when nobody is named."""
    rules = []
    for kind, prefix in (("memory_record", "memory-record"), ("thread", "thread")):
        rules += [_rule(f"{prefix}-own", "permit", kind, when=OWN),
                  _rule(f"{prefix}-shared" + ("-see" if kind == "thread" else ""), "permit", kind, actions=["see"],
                        match={"labels": {"subject": ""}}),
                  _rule(f"{prefix}-nobody-named", "permit", kind, when=NOBODY)]
    return rules


KEYS = ["support", "sales", "people", "analytics", "operations", "old-mobile-app", "pilot-partner"]


def key_body(name: str, stores: dict[str, str], soon: datetime) -> KeyCreate:
    """The key called `name`; `stores` maps demo store names to index ids, `soon` is when the pilot key ends."""
    support, people, sales = stores["support"], stores["people"], stores["sales"]
    if name == "support":  # the support chat assistant: both customer stores, never payroll records
        return KeyCreate(
            name="Support assistant", capabilities=["knowledge", "memory", "threads", "tooling"],
            memory=KeyMemoryConfig(write_tool=True, injection=InjectionBlock(index_id=support, budget_tokens=1200)),
            policy={"indexes": [support, sales], "settings": {}, "rules": [
                *_default_rules(), _rule("memory-write-all", "permit", "memory_write"),
                _rule("no-payroll", "deny", "memory_record", match={"labels": {"department": "payroll"}})]})
    if name == "sales":  # the sales assistant: the sales store only, writes allowed
        return KeyCreate(
            name="Sales assistant", capabilities=["knowledge", "memory", "threads"],
            memory=KeyMemoryConfig(injection=InjectionBlock(index_id=sales, limit=30, budget_tokens=2000)),
            policy={"indexes": [sales], "settings": {}, "rules": [
                *_default_rules(), _rule("memory-write-all", "permit", "memory_write")]})
    if name == "people":  # the HR assistant: always for one employee; shared records of her own department
        return KeyCreate(
            name="People assistant", capabilities=["knowledge", "memory", "threads"],
            memory=KeyMemoryConfig(injection=InjectionBlock(index_id=people, budget_tokens=800)),
            policy={"indexes": [people], "settings": {"subjects_required": True}, "rules": [
                _rule("own-records", "permit", "memory_record", when=OWN),
                _rule("department-records", "permit", "memory_record", actions=["see"],
                      match={"labels": {"subject": ""}},
                      when=[{"atom": "label_among", "label": "department", "attribute": "department"}]),
                _rule("everyone-records", "permit", "memory_record", actions=["see"],
                      match={"labels": {"subject": "", "audience": "everyone"}}),
                _rule("write-own", "permit", "memory_write", when=OWN),
                _rule("own-threads", "permit", "thread", when=OWN)]})
    if name == "analytics":  # reads every store, writes nothing (no memory_write rule), search tool only
        return KeyCreate(name="Analytics (read only)", capabilities=["knowledge", "memory"],
                         memory=KeyMemoryConfig(retrieval_tool=True, write_tool=False))
    if name == "operations":  # the operations team: manages keys, previews injection, reviews threads
        return KeyCreate(name="Operations console", capabilities=["knowledge", "memory", "threads", "management"])
    if name == "old-mobile-app":  # revoked right after it is made: shows a revoked key
        return KeyCreate(name="Old mobile app", capabilities=["knowledge", "memory"])
    if name == "pilot-partner":  # a partner's trial key that ends in two weeks
        return KeyCreate(name="Pilot partner (trial)", capabilities=["knowledge", "memory"], expires_at=soon,
                         policy={"indexes": [sales], "settings": {}, "rules": _default_rules()})
    raise KeyError(name)
