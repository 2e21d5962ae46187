"""Writing memory records (MEM-4 … MEM-8, MEM-18, MEM-21): create, key upserts, batches, PATCH, DELETE, verify,
confirmations and corrections. SQL lives in the repository; the request owns the transaction."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import msgspec

from backend.access.context import RequestContext
from backend.access.labels import check_labels
from backend.db.plan_mode import let_key_checks_keep_plans
from backend.domains.audit.service import subject_hash
from backend.domains.erasure import guard as erasure
from backend.domains.indexes import repository as indexes
from backend.domains.memory import decay, keyed, same_words
from backend.domains.memory import repository as repo
from backend.domains.memory.rules import (
    DEFAULT_CONFIDENCE,
    changed_commitment,
    check_change,
    check_metadata,
    check_not_erased,
    check_tags,
    check_type,
    check_write,
    commitment_part,
    converted,
    memory_scope,
    norm_hash,
    reject_nul,
)
from backend.domains.memory.vectors import embed, model_of
from backend.errors import Conflict, NotFound
from backend.ids import new_id
from backend.providers.embeddings import made_at_once
from shared.schemas.memory import Commitment, MemoryCreate, MemoryPatch

OPTIONAL_FIELDS = ("metadata", "labels", "confidence", "tags", "priority", "expires_at", "commitment")


@dataclass
class Draft:
    """A validated record to write: the row and which optional fields the client gave (for key upserts)."""

    index: dict[str, Any]
    values: dict[str, Any]
    given: set[str] = field(default_factory=set)
    vector: list[float] | None = None
    locked: list[str] = field(default_factory=list)  # people whose erasure locks `prepare(lock=True)` took
    plans_kept: bool = False  # `prepare(lock=True)` let this transaction's key checks keep their plans
    # Written without its vector, which the caller has made after its commit (`embed_later`; PLT-13 allows it).
    embed_later: bool = False
    # The commitment part as sent, for a key upsert to change only the fields sent (MEM-4), and where it was sent.
    commitment_sent: Commitment | msgspec.UnsetType | None = msgspec.UNSET
    prefix: str = ""


def _source(ctx: RequestContext) -> str:
    return "admin" if ctx.is_admin else "api"


def _people(ctx: RequestContext, values: dict[str, Any]) -> list[str]:
    """The keyed hashes of the people a record names (its owner, its `participants`), sorted: the locks a write
    of it takes (MEM-19)."""
    people = {values["subject"], *erasure.people_in_labels(values["labels"])} - {None}
    return sorted(h for h in (subject_hash(ctx.settings.secret, ctx.org_id, p) for p in people) if h)


async def prepare(ctx: RequestContext, body: MemoryCreate, *, source: str, prefix: str = "",
                  index_cache: dict[str, dict[str, Any]] | None = None,
                  provenance: dict[str, Any] | None = None, lock: bool = False,
                  episode: dict[str, Any] | None = None) -> Draft:
    """A validated draft of the record `body` asks for. With `lock`, the index is read together with the erasure
    locks of the people the record names (`create`'s one round trip before its insert). Only extraction passes
    `episode`, the part of an `episode` record (EXT-12), which no other write may make."""
    scope = memory_scope(ctx)
    cache = index_cache if index_cache is not None else {}
    reject_nul(msgspec.to_builtins(body), prefix.rstrip("."))
    type_name = body.type if episode is not None and body.type == "episode" else check_type(body.type,
                                                                                              f"{prefix}type")
    metadata = check_metadata(body.metadata, f"{prefix}metadata") if body.metadata is not msgspec.UNSET else {}
    labels = check_labels(body.labels if body.labels is not msgspec.UNSET else None, ctx.org.get("vocabulary"),
                          "memory_record", param=f"{prefix}labels")
    tags = check_tags(body.tags, f"{prefix}tags") if body.tags is not msgspec.UNSET else []
    commitment = commitment_part(type_name, body.commitment, f"{prefix}commitment")
    given = {name for name in OPTIONAL_FIELDS if getattr(body, name) is not msgspec.UNSET}
    confidence = body.confidence if body.confidence is not msgspec.UNSET else DEFAULT_CONFIDENCE[source]
    values = {
        "org_id": ctx.org_id, "index_id": body.index_id, "subject": ctx.person,
        "type": type_name, "text": body.text, "norm_hash": norm_hash(body.text), "metadata": metadata,
        "labels": labels, "confidence": float(confidence), "source": source, "verified": source == "admin",
        "key": body.key if body.key is not msgspec.UNSET else None, "tags": tags,
        "priority": body.priority if body.priority is not msgspec.UNSET else "normal",
        "expires_at": body.expires_at if body.expires_at is not msgspec.UNSET else None,
        "commitment": commitment, "provenance": provenance, "episode": episode,
    }
    locked = _people(ctx, values) if lock else []
    if body.index_id not in cache:
        found = (await repo.index_for_write(ctx.db, scope, body.index_id, locked) if lock else
                 await indexes.get(ctx.db, scope, body.index_id))
        if found is None:
            raise NotFound(f"No index {body.index_id!r} is reachable with this credential.",
                           param=f"{prefix}index_id")
        cache[body.index_id] = found
    return Draft(cache[body.index_id], values, given, locked=locked, plans_kept=lock,
                 commitment_sent=body.commitment, prefix=prefix)


async def write(ctx: RequestContext, items: list[Draft], *, started_at: datetime | None = None,
                ) -> tuple[list[str], list[bool]]:
    """Write drafts in this transaction; a `key` updates its record in place (MEM-4).

    Returns the ids in input order and whether each was created (False: an existing keyed record changed).
    """
    seen: set[str] = set()
    for i, item in enumerate(items):
        if item.values["key"] is None:  # a keyed write is judged once its record's current labels are known
            check_write(ctx, item.values["subject"], item.values["labels"],
                        detail={"index_id": item.values["index_id"], "type": item.values["type"], "position": i},
                        param=item.prefix.rstrip(".") or None)
        await check_not_erased(ctx, [item.values["subject"], *erasure.people_in_labels(item.values["labels"])],
                               started_at, seen)
    by_index: dict[str, list[int]] = {}
    for i, item in enumerate(items):
        by_index.setdefault(item.index["id"], []).append(i)
    for positions in by_index.values():
        now = [i for i in positions if not items[i].embed_later]
        if not now:
            continue
        vectors = await embed(items[now[0]].index, [items[i].values["text"] for i in now])
        for i, vector in zip(now, vectors, strict=True):
            items[i].vector = vector
    await let_key_checks_keep_plans(ctx.db)
    ids: list[str] = []
    created: list[bool] = []
    fresh: list[dict[str, Any]] = []
    for item in items:
        if item.values["key"] is not None:
            record_id, was_created = await keyed.upsert(ctx, item)
        else:
            record_id, was_created = new_id("mem"), True
            fresh.append({**item.values, "id": record_id, "embedding": item.vector,
                          "embedding_model": model_of(item.index, item.vector)})
        ids.append(record_id)
        created.append(was_created)
    await repo.insert_records(ctx.db, fresh)
    await repo.snapshot_versions(ctx.db, ctx.org_id, [row["id"] for row in fresh], action="created",
                                 actor_type=ctx.actor.type, actor_id=ctx.actor.id)
    return ids, created


async def written(ctx: RequestContext, ids: Sequence[str]) -> list[dict[str, Any]]:
    """The records this request just wrote, as the request's reads would show them."""
    return await repo.get_many(ctx.db, ctx.scope, decay.half_lives(ctx.org, ctx.principal.key), ids)


async def create(ctx: RequestContext, body: MemoryCreate) -> tuple[dict[str, Any], bool]:
    """MEM-4. A new record without a key (the common write) takes two statements: the index with the people's
    locks, then the record, its vector when made at once, its history version and the erasure check in one."""
    item = await prepare(ctx, body, source=_source(ctx), lock=True)
    if in_one_statement(item):
        return await insert_fresh(ctx, item), True
    ids, created = await write(ctx, [item])
    return (await written(ctx, ids))[0], created[0]


def in_one_statement(item: Draft) -> bool:
    """Whether `insert_fresh` can write the draft: a new record without a key, whose vector is none, made later
    (`embed_later`) or made at once in this process (`hashing`)."""
    setting = item.index.get("embedding")
    return item.values["key"] is None and (item.embed_later or not setting or made_at_once(setting))


async def insert_fresh(ctx: RequestContext, item: Draft) -> dict[str, Any]:
    """A draft of `prepare(lock=True)` that is `in_one_statement`: the record, its history version and the check
    that nobody it names was erased meanwhile (under the locks `prepare` took) in one statement."""
    return await insert_checked(ctx, item, await checked_row(ctx, item))


async def checked_row(ctx: RequestContext, item: Draft) -> dict[str, Any]:
    """`insert_fresh`'s first half: the policy's judgement (which may refuse) and the row to insert, with its new
    id and its vector. A caller that must answer before the insert (a turn's write tool) inserts it later in the
    same transaction with `insert_checked`."""
    v = item.values
    assert item.locked == _people(ctx, v), "the people's erasure locks are taken by prepare(lock=True)"
    check_write(ctx, v["subject"], v["labels"], detail={"index_id": v["index_id"], "type": v["type"], "position": 0})
    vector = None if item.embed_later else (await embed(item.index, [v["text"]]))[0]
    if not item.plans_kept:
        await let_key_checks_keep_plans(ctx.db)
    return {**v, "id": new_id("mem"), "embedding": vector, "embedding_model": model_of(item.index, vector)}


async def insert_checked(ctx: RequestContext, item: Draft, row: dict[str, Any]) -> dict[str, Any]:
    """`insert_fresh`'s second half: the statement. Refused (409) only if a person it names was erased since the
    transaction began."""
    written = await repo.insert_fresh(ctx.db, row, actor_type=ctx.actor.type, actor_id=ctx.actor.id,
                                      people_hashes=item.locked)
    if written is None:
        raise erasure.erased_meanwhile()
    return written


async def create_batch(ctx: RequestContext, records: Sequence[MemoryCreate | Any],
                       ) -> tuple[list[dict[str, Any]], list[bool]]:
    """MEM-5: every record is checked, in position order, before any is written, so the error names the first invalid
    one: a record as sent (decoded JSON) is converted to `MemoryCreate` at its turn, then `prepare` checks the rest."""
    memory_scope(ctx)
    cache: dict[str, dict[str, Any]] = {}
    items = []
    for i, record in enumerate(records):
        body = record if isinstance(record, MemoryCreate) else converted(record, MemoryCreate, f"records[{i}]")
        items.append(await prepare(ctx, body, source=_source(ctx), prefix=f"records[{i}].", index_cache=cache))
    ids, created = await write(ctx, items)
    return await written(ctx, ids), created


async def reachable_record(ctx: RequestContext, record_id: str, *, for_update: bool = False,
                           half_lives: dict[str, float] | None = None) -> dict[str, Any]:
    lives = half_lives if half_lives is not None else decay.half_lives(ctx.org, ctx.principal.key)
    row = await repo.get(ctx.db, memory_scope(ctx), lives, record_id, for_update=for_update)
    if row is None:
        raise NotFound(f"No memory record {record_id!r} is reachable with this credential.", param="id")
    return row


async def patch(ctx: RequestContext, record_id: str, body: MemoryPatch) -> dict[str, Any]:
    """MEM-7: every PATCH writes a history version and restarts the decay age."""
    reject_nul(msgspec.to_builtins(body), "")
    changes: dict[str, Any] = {}
    if body.text is not msgspec.UNSET:
        changes["text"], changes["norm_hash"] = body.text, norm_hash(body.text)
        if not ctx.is_admin:  # a verification vouches for the words (MEM-18): a key's new words drop it
            changes["verified"] = False
    if body.metadata is not msgspec.UNSET:
        changes["metadata"] = check_metadata(body.metadata, "metadata")
    if body.labels is not msgspec.UNSET:
        changes["labels"] = check_labels(body.labels, ctx.org.get("vocabulary"), "memory_record")
    if body.confidence is not msgspec.UNSET:
        changes["confidence"] = float(body.confidence)
    if body.tags is not msgspec.UNSET:
        changes["tags"] = check_tags(body.tags, "tags")
    if body.priority is not msgspec.UNSET:
        changes["priority"] = body.priority
    if body.expires_at is not msgspec.UNSET:
        changes["expires_at"] = body.expires_at
    current = await reachable_record(ctx, record_id, for_update=True)
    if body.commitment is not msgspec.UNSET:
        changes["commitment"] = changed_commitment(current["type"], current["commitment"], body.commitment,
                                                   "commitment")
    check_change(ctx, current, "write")
    check_write(ctx, current["subject"], changes.get("labels", current["labels"]), object_id=record_id,
                detail={"index_id": current["index_id"], "type": current["type"]})
    if "labels" in changes:
        await check_not_erased(ctx, erasure.people_in_labels(changes["labels"], current["labels"]))
    if "text" in changes:
        index = await indexes.get(ctx.db, ctx.scope, current["index_id"]) or {}
        if index.get("embedding"):
            changes["embedding"] = (await embed(index, [changes["text"]]))[0]
            changes["embedding_model"] = model_of(index, changes["embedding"])
    await repo.update_record(ctx.db, ctx.org_id, record_id, changes, touch=True, bump=True)
    await repo.snapshot_versions(ctx.db, ctx.org_id, [record_id], action="updated", actor_type=ctx.actor.type,
                                 actor_id=ctx.actor.id)
    return (await written(ctx, [record_id]))[0]


async def delete(ctx: RequestContext, record_id: str) -> None:
    """MEM-8: the record goes; a record it replaced stays replaced."""
    current = await reachable_record(ctx, record_id, for_update=True)
    check_change(ctx, current, "delete")
    check_write(ctx, current["subject"], current["labels"], object_id=record_id,
                detail={"index_id": current["index_id"], "type": current["type"], "reason": "delete"})
    await repo.delete_record(ctx.db, ctx.org_id, record_id)


async def verify(ctx: RequestContext, record_id: str) -> dict[str, Any]:
    """MEM-18: administrators only; verification neither restarts the decay age nor changes the text."""
    memory_scope(ctx)
    ctx.require_admin()
    current = await reachable_record(ctx, record_id, for_update=True)
    if current["type"] == "lesson" and current["source"] == "maintenance":
        raise Conflict("A lesson maintenance drew from a person's episodes is never verified (EXT-14).", param="id",
                       code="maintenance_lesson")
    if not current["verified"]:
        await repo.update_record(ctx.db, ctx.org_id, record_id, {"verified": True}, touch=False, bump=True)
        await repo.snapshot_versions(ctx.db, ctx.org_id, [record_id], action="verified", actor_type=ctx.actor.type,
                                     actor_id=ctx.actor.id)
        await ctx.audit("memory.verified", object_type="memory_record", object_id=record_id, detail={})
    return (await written(ctx, [record_id]))[0]


# ---------------------------------------------------------------- confirmations and corrections (MEM-21, EXT-10)

def _words(item: Draft) -> same_words.Words:
    v = item.values
    return v["index_id"], v["subject"], v["type"], v["norm_hash"]


async def lock_same_words(ctx: RequestContext, items: Iterable[Draft]) -> None:
    """Lock the words of records about to be checked by `confirm_same_words`, all before the first check: a writer
    of several records must not hold the words of one while it waits for another's (EXT-10)."""
    await same_words.lock(ctx.db, ctx.org_id, map(_words, items))


async def confirm_same_words(ctx: RequestContext, item: Draft) -> dict[str, Any] | None:
    """A fact the owner already has in the same words is confirmed, never written twice (MEM-21, EXT-10).

    Confirming restarts the decay age and adds a history version; the record keeps its id, so deleting it
    later deletes the one record there is (MEM-8). Two writers of the same words at once: the find first takes a
    lock on (index, owner, type, words), so the second finds the first's record. Callers hold the owner's erasure
    lock already (the write tool's `prepare(lock=True)`, extraction's `store_window`), so this lock comes after it,
    as house rule 8 orders. Per words rather than per owner: a window that confirmed a record by id (its row lock)
    and then checks other words must not wait for a writer that holds the owner's lock and waits for that row.
    """
    found = await same_words.find(ctx.db, ctx.org_id, _words(item))
    current = await repo.get(ctx.db, ctx.scope, decay.half_lives(ctx.org, ctx.principal.key), found) if found \
        else None
    if current is None:
        return None
    check_write(ctx, current["subject"], current["labels"], object_id=current["id"],
                detail={"index_id": current["index_id"], "type": current["type"], "reason": "confirm"})
    await check_not_erased(ctx, [current["subject"]])
    await repo.confirm(ctx.db, ctx.org_id, current["id"])
    await repo.snapshot_versions(ctx.db, ctx.org_id, [current["id"]], action="confirmed", actor_type=ctx.actor.type,
                                 actor_id=ctx.actor.id)
    return current


async def replace(ctx: RequestContext, old_id: str, item: Draft, *, param: str = "replaces") -> str:
    """A correction: a new record with the old one's owner; the old one becomes `replaced` (MEM-7, EXT-10)."""
    old = await repo.get(ctx.db, ctx.scope, decay.half_lives(ctx.org, ctx.principal.key), old_id, for_update=True)
    if old is None or old["index_id"] != item.values["index_id"]:
        raise NotFound(f"No memory record {old_id!r} in this index is reachable with this credential.", param=param)
    if old["status"] != "active":
        raise Conflict(f"The record {old_id!r} was already replaced.", param=param, code="already_replaced")
    check_change(ctx, old, "write", param)
    # The correction keeps the corrected record's owner and labels, so it reaches the same readers.
    item.values["subject"] = old["subject"]
    item.values["labels"] = old["labels"]
    ids, _ = await write(ctx, [item])
    new_record = ids[0]
    await repo.update_record(ctx.db, ctx.org_id, new_record, {"replaces": old_id}, touch=False, bump=False)
    await repo.update_record(ctx.db, ctx.org_id, old_id, {"status": "replaced", "replaced_by": new_record},
                             touch=False, bump=True)
    await repo.snapshot_versions(ctx.db, ctx.org_id, [old_id], action="replaced", actor_type=ctx.actor.type,
                                 actor_id=ctx.actor.id, partner_id=new_record)
    return new_record
