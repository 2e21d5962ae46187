"""The injection previewer (INJ-12): exactly what a turn with a key (or agent) for a person would be given,
computed by the builder a turn runs, without changing a recall count; an audited read."""

from __future__ import annotations

from typing import Any

import msgspec

from backend.access.context import RequestContext
from backend.access.granting import widening
from backend.access.policy import default_policy, parse_policy
from backend.access.principal import ALL_CAPABILITIES, Principal
from backend.access.subjects import Subject, check_attributes, check_subject_id
from backend.domains.agents.service import resolve as resolve_agent
from backend.domains.indexes.service import reachable
from backend.domains.injection.config import choose_block
from backend.domains.injection.service import Built, build
from backend.domains.keys import repository as keys_repo
from backend.domains.memory import decay
from backend.errors import Forbidden, NotFound
from backend.providers.tokens import utf8_bytes_over_four
from shared.schemas.platform import InjectionBlock
from shared.schemas.stores import PreviewIn

NOTES = {
    "capability_missing": "Nothing is injected: this key does not hold the `memory` capability.",
    "no_injection_block": "Nothing is injected: this key injects no block (its memory.injection is not set).",
    "disabled": "Nothing is injected: this key's injection block is switched off (enabled: false).",
    "index_not_named": "Nothing is injected: this key's policy does not name the store its block injects from.",
    "index_missing": "Nothing is injected: the store this key's block names does not exist any more.",
}
AGENT_NOTES = {
    "disabled": "Nothing is injected: this agent's injection block is switched off (enabled: false), which "
                "replaces the key's block.",
    "index_not_named": "Nothing is injected: this key's policy does not name the store this agent's block injects "
                       "from.",
    "index_missing": "Nothing is injected: the store this agent's block names does not exist any more.",
}


async def preview(ctx: RequestContext, index_id: str, body: PreviewIn) -> dict[str, Any]:
    """Exactly what a turn with that key (or agent) for that person would get, without changing anything.

    The block is the key's own, as a turn chooses it, or the block of the agent named by `agent_id`, which replaces
    the key's whole (INJ-2); with `store_override` (or an administrator naming neither a key nor an agent with a
    block, who has no turn to mirror) that block, else the default one, is applied to this page's store instead.
    """
    ctx.require_management()
    ctx.refuse_person_named("The previewer is the organisation's: send the request without naming a person, and name "
                            "the person to preview in the body's `subject`.")
    db, org = ctx.db, ctx.org
    await reachable(db, ctx.management_scope, index_id)
    # INJ-2: an agent's block replaces the key's whole, exactly as in the agent's turns.
    agent = None if body.agent_id is None else await resolve_agent(ctx, body.agent_id)
    agent_block = agent.memory_injection if agent else None
    key = ctx.principal.key
    if body.key_id is not None:
        key = await keys_repo.get(db, ctx.org_id, body.key_id)
        if key is None:
            raise NotFound("No such key.", param="key_id")
        _refuse_wider_key(ctx.principal, key)
    no_key = key is None
    if key is None:  # an administrator naming no key: a key with the default policy and every capability
        key = {"id": None, "org_id": ctx.org_id, "policy": default_policy(), "memory": {},
               "capabilities": sorted(ALL_CAPABILITIES)}
    subject = None
    if body.subject is not None:
        check_attributes(body.subject.attributes, "subject.attributes")
        subject = Subject(check_subject_id(body.subject.id, "subject.id"), dict(body.subject.attributes))
    acting = Principal("key", ctx.org_id, ctx.actor, frozenset(key["capabilities"]), subject, key=key)
    scope = ctx.acting_as(acting).management_scope
    # Without a key there is no turn to mirror, unless an agent brings its own block.
    override = body.store_override or (no_key and agent_block is None)
    raw = agent_block or (key.get("memory") or {}).get("injection")
    if override:
        block_cfg = msgspec.structs.replace(msgspec.convert(raw, InjectionBlock), index_id=index_id) if raw else \
            InjectionBlock(index_id=index_id)
        chosen = choose_block(acting, scope, msgspec.to_builtins(block_cfg))
    else:
        chosen = choose_block(acting, scope, agent_block)  # what a turn with this key (and agent) does
        if chosen.block is not None and chosen.block.index_id not in (None, index_id):
            # The turn reads another store: the caller must reach it too, or the preview would show it more.
            await reachable(db, ctx.management_scope, chosen.block.index_id,
                            param="agent_id" if agent_block else "key_id")
    built = await build(db, scope, decay.half_lives(org, key), chosen, turn_input=body.input,
                        max_budget=ctx.settings.injection_max_budget_tokens, at=body.at, explain=True)
    records = [{"id": c.id, "section": c.section, "type": c.type, "owner": c.owner, "line": line,
                "tokens": utf8_bytes_over_four(line)} for line, c in (built.block.lines if built.block else [])]
    await ctx.audit("injection.preview", subject_id=subject.id if subject else None, object_type="store",
                    object_id=index_id, detail={"key_id": key.get("id"), "agent_id": body.agent_id,
                                                "agent_version": agent.version if agent else None,
                                                "injected": len(records), "input_given": bool(body.input),
                                                "store_override": override})
    return {"block": built.text, "trace": built.trace(), "records": records, "store_override": override,
            "note": _note(built, index_id, no_key, agent_block is not None)}


def _refuse_wider_key(caller: Principal, named: dict[str, Any]) -> None:
    """A management key previews only keys whose policy permits no more than its own, the rule by which it grants
    policies (PLT-4): the preview shows the named key's records, so a wider key's would show the caller records its
    own policy hides. Administrators preview any key."""
    if caller.key is None or caller.key["id"] == named["id"]:
        return
    wider = widening(parse_policy(named["policy"], "policy"), parse_policy(caller.key["policy"], "policy"))
    if wider is not None:
        _, reason = wider
        raise Forbidden(f"This key may preview only keys that see no more than it does, and the key {named['id']} "
                        f"does: {reason} Ask an administrator, or preview with a key whose policy is within this "
                        "key's.", param="key_id", code="key_wider_than_caller")


def _note(built: Built, index_id: str, no_key: bool, agent_block: bool) -> str | None:
    """Why nothing is injected, or where the block comes from, or both: an empty default block still says why."""
    if agent_block and built.reason in AGENT_NOTES:
        return AGENT_NOTES[built.reason]
    if built.reason in NOTES:
        return NOTES[built.reason]
    where = None
    if no_key and not agent_block:
        where = "No key chosen: this store's default block under the default policy, as a key without settings of " \
                "its own would get it."
    elif built.index_id is not None and built.index_id != index_id:
        who = "agent" if agent_block else "key"
        where = f"This {who} injects from the store {built.index_id}, not from {index_id}; shown is what its turns get."
    return " ".join(part for part in (where, _why_empty(built)) if part) or None


def _why_empty(built: Built) -> str | None:
    """An empty block's cause in words, naming the setting to raise (only the one that really left lines out)."""
    if built.reason == "nothing_fits_budget":
        return f"Nothing is injected: no line fits the budget of {built.budget_tokens} tokens, the smallest of the " \
               "block's `budget_tokens`, the store's `injection.budget_tokens` and the server's ceiling; raise the " \
               "one that binds (a section budget or the 40% shared share may also leave lines out)."
    if built.reason == "limit_reached":
        return f"Nothing is injected: every candidate was left out by a count; raise {_counts_reached(built)}."
    return None


def _counts_reached(built: Built) -> str:
    """The settings whose count left candidates out, so the note names what to raise and nothing else."""
    settings = {"about_this_person": "the block's `limit`", "organisation": "the block's `limit`",
                "commitments": "the store's `commitments.inject_limit`",
                "past_sessions": "the store's `injection.episodes_limit`"}
    left = built.block.left_out if built.block else []
    named = dict.fromkeys(settings[x.section] for x in left if x.reason == "dropped_by_count" and x.section in settings)
    return " and ".join(named) or "the block's `limit`"
