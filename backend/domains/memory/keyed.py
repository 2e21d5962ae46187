"""MEM-4's keyed write: the record of (index, owner, type, key) is changed in place, never written twice."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from backend.access.context import RequestContext
from backend.domains.memory import decay
from backend.domains.memory import repository as repo
from backend.domains.memory.rules import changed_commitment, check_change, check_write
from backend.domains.memory.vectors import model_of
from backend.errors import Conflict
from backend.ids import new_id

if TYPE_CHECKING:
    from backend.domains.memory.writes import Draft

# Corrections of corrections a keyed write follows to the record readers see; a longer chain is refused.
MAX_CORRECTIONS = 64


async def upsert(ctx: RequestContext, item: Draft) -> tuple[str, bool]:
    """(record id, created): the key's record changed, or a new record holding the key."""
    v = item.values
    actor = ctx.actor
    for _ in range(2):
        found = await repo.find_by_key(ctx.db, ctx.scope, v["index_id"], v["subject"], v["type"], v["key"])
        if found is not None:
            target = await _live(ctx, item, found)
            check_change(ctx, target, "write", f"{item.prefix}key")
            # The record as it will be written: the labels sent, else the ones it keeps (PLT-8).
            labels = v["labels"] if "labels" in item.given else target["labels"]
            check_write(ctx, target["subject"], labels, object_id=target["id"],
                        detail={"index_id": v["index_id"], "type": v["type"], "reason": "key"},
                        param=item.prefix.rstrip(".") or None)
            await _change(ctx, item, target)
            return target["id"], False
        check_write(ctx, v["subject"], v["labels"],
                    detail={"index_id": v["index_id"], "type": v["type"], "reason": "key"},
                    param=item.prefix.rstrip(".") or None)
        record_id = new_id("mem")
        if await repo.insert_keyed(ctx.db, {**v, "id": record_id, "embedding": item.vector,
                                            "embedding_model": model_of(item.index, item.vector)}):
            await repo.snapshot_versions(ctx.db, ctx.org_id, [record_id], action="created", actor_type=actor.type,
                                         actor_id=actor.id)
            return record_id, True
    raise Conflict("Another request wrote a record with this key at the same moment; try again.", param="key",
                   code="key_conflict")


async def _live(ctx: RequestContext, item: Draft, found: dict[str, Any]) -> dict[str, Any]:
    """The record the write changes: the key's own, or, once a correction replaced it (MEM-7), the correction
    readers see in its place. Changing the replaced record would hide the write from every reader."""
    param = f"{item.prefix}key"
    if not found["seen"]:  # MEM-6/PLT-8: changing a record, and answering with it, needs seeing it
        raise ctx.deny("The policy does not let you see the record this key names, so you cannot change it; write "
                       "under another key.", action="memory.change", object_type="memory_record",
                       object_id=found["id"], detail={"reason": "policy"}, param=param)
    current = found
    for _ in range(MAX_CORRECTIONS):
        if current["status"] == "active":
            return current
        later = current["replaced_by"]
        correction = await repo.get(ctx.db, ctx.scope, decay.half_lives(ctx.org, ctx.principal.key), later,
                                    for_update=True) if later else None
        if correction is None:
            raise Conflict("The record of this key was replaced by a correction this credential cannot reach; write "
                           "under another key.", param=param, code="key_replaced")
        if correction["type"] != item.values["type"]:
            raise Conflict(f"The record of this key was replaced by {later!r}, a record of type "
                           f"{correction['type']!r}; change that record, or write under another key.", param=param,
                           code="key_replaced")
        current = correction
    raise Conflict(f"The record of this key was corrected more than {MAX_CORRECTIONS} times; write under another "
                   "key.", param=param, code="key_replaced")


async def _change(ctx: RequestContext, item: Draft, target: dict[str, Any]) -> None:
    v = item.values
    # Source and verification as this writer's new record would have them (MEM-3): an administrator's upsert is
    # verified, anyone else's rewrite of the text is not.
    changes = {"text": v["text"], "norm_hash": v["norm_hash"], "source": v["source"], "verified": v["verified"]}
    changes.update({name: v[name] for name in item.given})
    if "commitment" in item.given:
        changes["commitment"] = changed_commitment(v["type"], target["commitment"], item.commitment_sent,
                                                   f"{item.prefix}commitment")
    if item.index.get("embedding"):
        changes["embedding"] = item.vector
        changes["embedding_model"] = model_of(item.index, item.vector)
    await repo.update_record(ctx.db, ctx.org_id, target["id"], changes, touch=True, bump=True)
    await repo.snapshot_versions(ctx.db, ctx.org_id, [target["id"]], action="updated", actor_type=ctx.actor.type,
                                 actor_id=ctx.actor.id)
