"""Memory records (MEM-1 … MEM-18): the rules. SQL lives in the repository; the request owns the transaction."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
from sqlalchemy.ext.asyncio import AsyncSession

from backend.access.labels import check_labels
from backend.access.principal import Principal
from backend.access.scope import Scope, build_scope
from backend.domains.audit import service as audit
from backend.domains.erasure import guard as erasure
from backend.domains.indexes import service as indexes
from backend.domains.keys import repository as keys_repo
from backend.domains.memory import decay
from backend.domains.memory import repository as repo
from backend.domains.memory.repository import Filters
from backend.domains.orgs import repository as orgs_repo
from backend.errors import BadRequest, Conflict, Forbidden, NotFound, ValidationFailed
from backend.http import NUL_MESSAGE, deny
from backend.ids import new_id
from backend.providers.embeddings import EmbeddingError, provider_for
from shared.schemas.memory import MAX_METADATA_BYTES, Commitment, MemoryCreate, MemoryPatch

log = logging.getLogger("coremem.memory")

DEFAULT_CONFIDENCE = {"api": 1.0, "admin": 1.0, "model": 0.7, "extraction": 0.7, "maintenance": 0.7}
DEFAULT_STORE_TYPES = ("fact", "preference", "commitment", "behaviour")
NOT_WRITABLE_TYPES = frozenset({"episode"})  # only extraction writes episodes (EXT-12)
OPTIONAL_FIELDS = ("metadata", "labels", "confidence", "tags", "priority", "expires_at", "commitment")


@dataclass(frozen=True)
class Reader:
    """One request's view of memory: who asks, what the policy lets them reach, and which half-lives apply."""

    principal: Principal
    scope: Scope
    org: dict[str, Any]
    half_lives: dict[str, float]
    secret: str

    @property
    def org_id(self) -> str:
        return self.scope.org_id

    @property
    def person(self) -> str | None:
        return self.scope.subject_id


async def reader(db: AsyncSession, principal: Principal, secret: str, *, key_id: str | None = None,
                 bulk: bool = False) -> Reader:
    """Every memory route starts here: the `memory` capability (PLT-6), then the scope and half-lives (MEM-9).

    A key reads with its own half-lives; administrators and bulk reads (exports) use the organisation's unless
    `key_id` names a key whose half-lives to apply."""
    principal.require("memory")
    org = await orgs_repo.get(db, principal.org_id) or {}
    scope = build_scope(principal, org.get("policy"))  # what scope_for does, with the org row we need anyway
    key = None if bulk else principal.key
    if key_id is not None:
        if not (principal.is_admin or bulk):
            raise BadRequest("Only an administrator chooses whose half-lives to apply; a key uses its own.",
                             param="key_id", code="key_id_not_allowed")
        key = await keys_repo.get(db, principal.org_id, key_id)
        if key is None:
            raise NotFound("No such key.", param="key_id")
    return Reader(principal, scope, org, decay.half_lives(org, key), secret)


# ---------------------------------------------------------------- documents

def document(row: Mapping[str, Any]) -> dict[str, Any]:
    doc = {str(k): v for k, v in row.items() if k not in ("org_id", "score")}
    doc["effective_confidence"] = float(row["effective_confidence"])
    doc["tags"] = list(row["tags"] or [])
    return doc


def confidence_pct(value: float) -> str:
    return f"{math.floor(100 * value + 0.5)}%"


def search_document(row: Mapping[str, Any]) -> dict[str, Any]:
    doc = document(row)
    doc["score"] = round(float(row["score"]), 6)
    doc["confidence_pct"] = confidence_pct(doc["effective_confidence"])
    return doc


def version_document(row: Mapping[str, Any]) -> dict[str, Any]:
    doc = {k: row[k] for k in ("version", "at", "action", "partner_id", "text", "metadata", "labels", "confidence",
                               "priority", "expires_at", "status", "verified", "commitment")}
    doc["tags"] = list(row["tags"] or [])
    doc["actor"] = {"type": row["actor_type"], "id": row["actor_id"]}
    return doc


# ---------------------------------------------------------------- validation

def reject_nul(value: Any, param: str) -> None:
    """PostgreSQL stores no NUL character in text or jsonb: refuse it with 422 naming where it is (PLT-14)."""
    if isinstance(value, str):
        if "\x00" in value:
            raise ValidationFailed(NUL_MESSAGE, param=param or None)
    elif isinstance(value, dict):
        for key, item in value.items():
            path = f"{param}.{key}" if param else str(key)
            reject_nul(key, path)
            reject_nul(item, path)
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            reject_nul(item, f"{param}[{i}]")


def normalised_text(text: str) -> str:
    """What counts as "the same words": case, runs of white space and closing punctuation do not matter."""
    return " ".join(text.casefold().split()).rstrip(" .!?;")


def norm_hash(text: str) -> str:
    return hashlib.sha256(normalised_text(text).encode()).hexdigest()


def check_metadata(metadata: Any, param: str) -> dict[str, Any]:
    if not isinstance(metadata, dict):
        raise ValidationFailed("`metadata` is a JSON object.", param=param)
    size = len(json.dumps(metadata, separators=(",", ":"), ensure_ascii=False).encode())
    if size > MAX_METADATA_BYTES:
        raise ValidationFailed(f"`metadata` is {size} bytes serialised; at most {MAX_METADATA_BYTES}.", param=param)
    return metadata


def check_tags(tags: Sequence[str], param: str) -> list[str]:
    """Tags are stored lowercase, without duplicates (MEM-12)."""
    out: list[str] = []
    for i, tag in enumerate(tags):
        clean = tag.strip().lower()
        if not clean:
            raise ValidationFailed("A tag is 1 to 64 characters, not only white space.", param=f"{param}[{i}]")
        if clean not in out:
            out.append(clean)
    return out


def check_type(type_name: str, param: str) -> str:
    if type_name in NOT_WRITABLE_TYPES:
        raise ValidationFailed("Episodes are written by extraction only (EXT-12); POST /memory and the write tool "
                               "refuse type `episode`.", param=param, code="type_not_writable")
    return type_name


def commitment_part(type_name: str, commitment: Commitment | msgspec.UnsetType | None,
                    param: str) -> dict[str, Any] | None:
    if commitment is msgspec.UNSET or commitment is None:
        return {"status": "open", "due_at": None, "promised_to": None} if type_name == "commitment" else None
    if type_name != "commitment":
        raise ValidationFailed("`commitment` belongs to records of type `commitment` only.", param=param)
    due_at = commitment.due_at.astimezone(UTC).isoformat().replace("+00:00", "Z") if commitment.due_at else None
    return {"status": commitment.status, "due_at": due_at, "promised_to": commitment.promised_to}


# ---------------------------------------------------------------- policy

def check_write(r: Reader, owner: str | None, labels: Mapping[str, Any], *, object_id: str | None = None,
                detail: dict[str, Any] | None = None) -> None:
    """`memory_write` on the record as it will be written (PLT-8); a refusal keeps a `denied` audit event."""
    if not r.scope.may("memory_write", "write", owner, labels):
        raise deny(r.principal, "The policy does not permit writing this memory record (no `memory_write` rule "
                   "matches).", action="memory.write", object_type="memory_record", object_id=object_id,
                   detail=detail or {})


def check_change(r: Reader, current: Mapping[str, Any], action: str) -> None:
    """PATCH and DELETE: a person changes only her own records; the policy's `memory_record` action decides."""
    owner = current["subject"]
    verb = "change" if action == "write" else "delete"
    if r.person is not None and owner != r.person:
        what = "a shared record" if owner is None else "another person's record"
        raise deny(r.principal, f"A request for a person cannot {verb} {what}.", action=f"memory.{verb}",
                   object_type="memory_record", object_id=current["id"], detail={"reason": "not_owner"})
    if not r.scope.may("memory_record", action, owner, current["labels"]):
        raise deny(r.principal, f"The policy does not permit you to {verb} this record.", action=f"memory.{verb}",
                   object_type="memory_record", object_id=current["id"], detail={"reason": "policy"})


async def check_not_erased(db: AsyncSession, r: Reader, people: Iterable[str | None], started_at: datetime | None,
                           seen: set[str]) -> None:
    """Work that began before a person was erased never writes her back (MEM-19)."""
    await erasure.refuse_if_erased(db, r.org_id, r.secret, people, started_at=started_at, seen=seen)


# ---------------------------------------------------------------- embeddings

async def embed(index: Mapping[str, Any], texts: Sequence[str]) -> list[list[float] | None]:
    """Vectors for an embedding index; a failing provider leaves records without one (found by words)."""
    provider = provider_for(index.get("embedding"))
    if provider is None or not texts:
        return [None] * len(texts)
    try:
        return list(await provider.embed(list(texts)))
    except EmbeddingError as exc:
        log.warning("embedding failed for index %s: %s", index.get("id"), exc)
        return [None] * len(texts)


# ---------------------------------------------------------------- writing

@dataclass
class Prepared:
    """A validated record to write: the row and which optional fields the client gave (for key upserts)."""

    index: dict[str, Any]
    values: dict[str, Any]
    given: set[str] = field(default_factory=set)
    vector: list[float] | None = None


async def prepare(db: AsyncSession, r: Reader, body: MemoryCreate, *, source: str, prefix: str = "",
                  index_cache: dict[str, dict[str, Any]] | None = None,
                  provenance: dict[str, Any] | None = None) -> Prepared:
    cache = index_cache if index_cache is not None else {}
    reject_nul(msgspec.to_builtins(body), prefix.rstrip("."))
    type_name = check_type(body.type, f"{prefix}type")
    metadata = check_metadata(body.metadata, f"{prefix}metadata") if body.metadata is not msgspec.UNSET else {}
    labels = check_labels(body.labels if body.labels is not msgspec.UNSET else None, r.org.get("vocabulary"),
                          "memory_record", param=f"{prefix}labels")
    tags = check_tags(body.tags, f"{prefix}tags") if body.tags is not msgspec.UNSET else []
    commitment = commitment_part(type_name, body.commitment, f"{prefix}commitment")
    if body.index_id not in cache:
        cache[body.index_id] = await indexes.reachable(db, r.scope, body.index_id, param=f"{prefix}index_id")
    given = {name for name in OPTIONAL_FIELDS if getattr(body, name) is not msgspec.UNSET}
    confidence = body.confidence if body.confidence is not msgspec.UNSET else DEFAULT_CONFIDENCE[source]
    values = {
        "org_id": r.org_id, "index_id": body.index_id,
        "subject": r.person,
        "type": type_name, "text": body.text, "norm_hash": norm_hash(body.text), "metadata": metadata,
        "labels": labels, "confidence": float(confidence), "source": source, "verified": source == "admin",
        "key": body.key if body.key is not msgspec.UNSET else None, "tags": tags,
        "priority": body.priority if body.priority is not msgspec.UNSET else "normal",
        "expires_at": body.expires_at if body.expires_at is not msgspec.UNSET else None,
        "commitment": commitment, "provenance": provenance,
    }
    return Prepared(cache[body.index_id], values, given)


async def write(db: AsyncSession, r: Reader, items: list[Prepared], *, started_at: datetime | None = None,
                ) -> tuple[list[str], list[bool]]:
    """Write prepared records in this transaction; a `key` updates its record in place (MEM-4).

    Returns the ids in input order and whether each was created (False: an existing keyed record changed).
    """
    seen: set[str] = set()
    for i, item in enumerate(items):
        if item.values["key"] is None:  # a keyed write is judged once its record's current labels are known
            check_write(r, item.values["subject"], item.values["labels"],
                        detail={"index_id": item.values["index_id"], "type": item.values["type"], "position": i})
        await check_not_erased(db, r, [item.values["subject"], *erasure.people_in_labels(item.values["labels"])],
                               started_at, seen)
    by_index: dict[str, list[int]] = {}
    for i, item in enumerate(items):
        by_index.setdefault(item.index["id"], []).append(i)
    for positions in by_index.values():
        vectors = await embed(items[positions[0]].index, [items[i].values["text"] for i in positions])
        for i, vector in zip(positions, vectors, strict=True):
            items[i].vector = vector
    actor = r.principal.actor
    ids: list[str] = []
    created: list[bool] = []
    fresh: list[dict[str, Any]] = []
    for item in items:
        if item.values["key"] is not None:
            record_id, was_created = await _upsert_keyed(db, r, item)
        else:
            record_id, was_created = new_id("mem"), True
            fresh.append({**item.values, "id": record_id, "embedding": item.vector})
        ids.append(record_id)
        created.append(was_created)
    await repo.insert_records(db, fresh)
    await repo.snapshot_versions(db, r.org_id, [row["id"] for row in fresh], action="created",
                                 actor_type=actor.type, actor_id=actor.id)
    return ids, created


async def _upsert_keyed(db: AsyncSession, r: Reader, item: Prepared) -> tuple[str, bool]:
    v = item.values
    actor = r.principal.actor
    for _ in range(2):
        existing = await repo.find_by_key(db, r.org_id, v["index_id"], v["subject"], v["type"], v["key"])
        if existing is not None:
            check_change(r, existing, "write")
            # The record as it will be written: the labels sent, else the ones it keeps (PLT-8).
            labels = v["labels"] if "labels" in item.given else existing["labels"]
            check_write(r, existing["subject"], labels, object_id=existing["id"],
                        detail={"index_id": v["index_id"], "type": v["type"], "reason": "key"})
            changes = {"text": v["text"], "norm_hash": v["norm_hash"], "source": v["source"]}
            changes.update({name: v[name] for name in item.given})
            if item.index.get("embedding"):
                changes["embedding"] = item.vector
            await repo.update_record(db, r.org_id, existing["id"], changes, touch=True, bump=True)
            await repo.snapshot_versions(db, r.org_id, [existing["id"]], action="updated", actor_type=actor.type,
                                         actor_id=actor.id)
            return existing["id"], False
        check_write(r, v["subject"], v["labels"],
                    detail={"index_id": v["index_id"], "type": v["type"], "reason": "key"})
        record_id = new_id("mem")
        if await repo.insert_keyed(db, {**v, "id": record_id, "embedding": item.vector}):
            await repo.snapshot_versions(db, r.org_id, [record_id], action="created", actor_type=actor.type,
                                         actor_id=actor.id)
            return record_id, True
    raise Conflict("Another request wrote a record with this key at the same moment; try again.", param="key",
                   code="key_conflict")


async def create(db: AsyncSession, r: Reader, body: MemoryCreate) -> tuple[dict[str, Any], bool]:
    source = "admin" if r.principal.is_admin else "api"
    item = await prepare(db, r, body, source=source)
    ids, created = await write(db, r, [item])
    return (await repo.get_many(db, r.scope, r.half_lives, ids))[0], created[0]


async def create_batch(db: AsyncSession, r: Reader, bodies: Sequence[MemoryCreate]) -> tuple[list[dict[str, Any]],
                                                                                                list[bool]]:
    source = "admin" if r.principal.is_admin else "api"
    cache: dict[str, dict[str, Any]] = {}
    items = [await prepare(db, r, body, source=source, prefix=f"records[{i}].", index_cache=cache)
             for i, body in enumerate(bodies)]
    ids, created = await write(db, r, items)
    return await repo.get_many(db, r.scope, r.half_lives, ids), created


async def _reachable(db: AsyncSession, r: Reader, record_id: str, *, for_update: bool = False) -> dict[str, Any]:
    row = await repo.get(db, r.scope, r.half_lives, record_id, for_update=for_update)
    if row is None:
        raise NotFound(f"No memory record {record_id!r} is reachable with this credential.", param="id")
    return row


async def patch(db: AsyncSession, r: Reader, record_id: str, body: MemoryPatch) -> dict[str, Any]:
    """MEM-7: every PATCH writes a history version and restarts the decay age."""
    reject_nul(msgspec.to_builtins(body), "")
    changes: dict[str, Any] = {}
    if body.text is not msgspec.UNSET:
        changes["text"], changes["norm_hash"] = body.text, norm_hash(body.text)
    if body.metadata is not msgspec.UNSET:
        changes["metadata"] = check_metadata(body.metadata, "metadata")
    if body.labels is not msgspec.UNSET:
        changes["labels"] = check_labels(body.labels, r.org.get("vocabulary"), "memory_record")
    if body.confidence is not msgspec.UNSET:
        changes["confidence"] = float(body.confidence)
    if body.tags is not msgspec.UNSET:
        changes["tags"] = check_tags(body.tags, "tags")
    if body.priority is not msgspec.UNSET:
        changes["priority"] = body.priority
    if body.expires_at is not msgspec.UNSET:
        changes["expires_at"] = body.expires_at
    current = await _reachable(db, r, record_id, for_update=True)
    if body.commitment is not msgspec.UNSET:
        changes["commitment"] = commitment_part(current["type"], body.commitment, "commitment")
    check_change(r, current, "write")
    check_write(r, current["subject"], changes.get("labels", current["labels"]), object_id=record_id,
                detail={"index_id": current["index_id"], "type": current["type"]})
    if "labels" in changes:
        await check_not_erased(db, r, erasure.people_in_labels(changes["labels"], current["labels"]), None, set())
    if "text" in changes:
        index = await indexes.reachable(db, r.scope, current["index_id"])
        if index.get("embedding"):
            changes["embedding"] = (await embed(index, [changes["text"]]))[0]
    await repo.update_record(db, r.org_id, record_id, changes, touch=True, bump=True)
    actor = r.principal.actor
    await repo.snapshot_versions(db, r.org_id, [record_id], action="updated", actor_type=actor.type,
                                 actor_id=actor.id)
    return (await repo.get_many(db, r.scope, r.half_lives, [record_id]))[0]


async def delete(db: AsyncSession, r: Reader, record_id: str) -> None:
    """MEM-8: the record goes; a record it replaced stays replaced."""
    current = await _reachable(db, r, record_id, for_update=True)
    check_change(r, current, "delete")
    check_write(r, current["subject"], current["labels"], object_id=record_id,
                detail={"index_id": current["index_id"], "type": current["type"], "reason": "delete"})
    await repo.delete_record(db, r.org_id, record_id)


async def verify(db: AsyncSession, r: Reader, record_id: str) -> dict[str, Any]:
    """MEM-18: administrators only; verification neither restarts the decay age nor changes the text."""
    r.principal.require_admin()
    current = await _reachable(db, r, record_id, for_update=True)
    if not current["verified"]:
        await repo.update_record(db, r.org_id, record_id, {"verified": True}, touch=False, bump=True)
        actor = r.principal.actor
        await repo.snapshot_versions(db, r.org_id, [record_id], action="verified", actor_type=actor.type,
                                     actor_id=actor.id)
        await audit.record(db, org_id=r.org_id, actor=actor, action="memory.verified", secret=r.secret,
                           object_type="memory_record", object_id=record_id, detail={})
    return (await repo.get_many(db, r.scope, r.half_lives, [record_id]))[0]


# ---------------------------------------------------------------- confirmations and corrections (MEM-21, EXT-10)

async def confirm_same_words(db: AsyncSession, r: Reader, item: Prepared) -> dict[str, Any] | None:
    """A fact the owner already has in the same words is confirmed, never written twice (MEM-21, EXT-10).

    Confirming restarts the decay age and adds a history version; the record keeps its id, so deleting it
    later deletes the one record there is (MEM-8).
    """
    v = item.values
    found = await repo.find_same_words(db, r.org_id, v["index_id"], v["subject"], v["type"], v["norm_hash"])
    current = await repo.get(db, r.scope, r.half_lives, found) if found else None
    if current is None:
        return None
    check_write(r, current["subject"], current["labels"], object_id=current["id"],
                detail={"index_id": current["index_id"], "type": current["type"], "reason": "confirm"})
    await check_not_erased(db, r, [current["subject"]], None, set())
    await repo.confirm(db, r.org_id, current["id"])
    actor = r.principal.actor
    await repo.snapshot_versions(db, r.org_id, [current["id"]], action="confirmed", actor_type=actor.type,
                                 actor_id=actor.id)
    return current


async def replace(db: AsyncSession, r: Reader, old_id: str, item: Prepared, *, param: str = "replaces") -> str:
    """A correction: a new record with the old one's owner; the old one becomes `replaced` (MEM-7, EXT-10)."""
    old = await repo.get(db, r.scope, r.half_lives, old_id, for_update=True)
    if old is None or old["index_id"] != item.values["index_id"]:
        raise NotFound(f"No memory record {old_id!r} in this index is reachable with this credential.", param=param)
    if old["status"] != "active":
        raise Conflict(f"The record {old_id!r} was already replaced.", param=param, code="already_replaced")
    check_change(r, old, "write")
    # The correction keeps the corrected record's owner and labels, so it reaches the same readers.
    item.values["subject"] = old["subject"]
    item.values["labels"] = old["labels"]
    ids, _ = await write(db, r, [item])
    new_id_ = ids[0]
    await repo.update_record(db, r.org_id, new_id_, {"replaces": old_id}, touch=False, bump=False)
    await repo.update_record(db, r.org_id, old_id, {"status": "replaced", "replaced_by": new_id_}, touch=False,
                             bump=True)
    actor = r.principal.actor
    await repo.snapshot_versions(db, r.org_id, [old_id], action="replaced", actor_type=actor.type,
                                 actor_id=actor.id, partner_id=new_id_)
    return new_id_


def store_types(index: Mapping[str, Any]) -> tuple[str, ...]:
    """Types the write tool takes (MEM-21): the extraction switch's when the store has one, else the defaults.

    Extraction switches do not exist yet in this code base, so every store takes the defaults for now.
    """
    return DEFAULT_STORE_TYPES


# ---------------------------------------------------------------- reading

def describe_filters(r: Reader, f: Filters, **extra: Any) -> dict[str, Any]:
    """What an administrator's read asked for, for the audit trail: never a person's id or free text."""
    out: dict[str, Any] = {
        "index_id": f.index_id, "type": f.types or None,
        "subject_hash": audit.subject_hash(r.secret, r.org_id, f.subject) if f.subject else None,
        "shared": f.shared or None,
        "metadata": [k for k, _ in f.metadata] or None,
        "label": [k for k, _ in f.labels] or None, "tag": f.tags or None, "min_confidence": f.min_confidence,
        "after": f.after.isoformat() if f.after else None, "before": f.before.isoformat() if f.before else None,
        "include_expired": f.include_expired or None, "include_replaced": f.include_replaced or None,
        "q": True if f.q else None,
    }
    out.update(extra)
    return {k: v for k, v in out.items() if v is not None}


async def audit_read(db: AsyncSession, r: Reader, route: str, ids: Sequence[str], filters: dict[str, Any] | None = None,
                     ) -> None:
    """PLT-2: every administrator read of memory records is written to the audit trail."""
    if not r.principal.is_admin:
        return
    await audit.record(db, org_id=r.org_id, actor=r.principal.actor, action="memory.read", secret=r.secret,
                       object_type="memory_record", object_id=ids[0] if len(ids) == 1 else None,
                       detail={"route": route, "filters": filters or {}, "ids": list(ids), "count": len(ids)})


def check_owner_filters(f: Filters) -> None:
    if f.subject is not None and f.shared:
        raise ValidationFailed("Choose `subject` (one person's records) or `shared` (nobody's), not both.",
                               param="shared", code="subject_and_shared")


async def check_filters(db: AsyncSession, r: Reader, f: Filters) -> dict[str, Any] | None:
    """A read's filters: `subject` only for requests naming nobody and administrators; a named index must be
    reachable (404 otherwise). Returns that index."""
    check_owner_filters(f)
    if f.subject is not None and r.person is not None and not r.principal.is_admin:
        raise Forbidden("The `subject` filter is for requests that name nobody and for administrators.",
                        param="subject", code="subject_filter_forbidden")
    return await indexes.reachable(db, r.scope, f.index_id) if f.index_id is not None else None


async def get(db: AsyncSession, r: Reader, record_id: str) -> dict[str, Any]:
    row = await _reachable(db, r, record_id)
    await audit_read(db, r, "GET /memory/{id}", [record_id])
    return row


async def list_records(db: AsyncSession, r: Reader, f: Filters, after_id: str | None, limit: int,
                       route: str = "GET /memory") -> tuple[list[dict[str, Any]], bool]:
    await check_filters(db, r, f)
    rows = await repo.list_page(db, r.scope, r.half_lives, f, after_id, limit + 1)
    more = len(rows) > limit
    rows = rows[:limit]
    await audit_read(db, r, route, [row["id"] for row in rows], describe_filters(r, f))
    return rows, more


async def stats(db: AsyncSession, r: Reader, f: Filters) -> dict[str, Any]:
    """Counts over every page of `GET /memory` with these filters; an administrator's is audited like a list
    (the filters and the number counted, no ids)."""
    await check_filters(db, r, f)
    groups, people = await repo.counts(db, r.scope, r.half_lives, f)
    total = sum(g["records"] for g in groups)
    if r.principal.is_admin:
        await audit.record(db, org_id=r.org_id, actor=r.principal.actor, action="memory.read", secret=r.secret,
                           object_type="memory_record",
                           detail={"route": "GET /memory/stats", "filters": describe_filters(r, f), "ids": [],
                                   "count": total})
    return {"records": total, "shared": sum(g["records"] for g in groups if g["shared"]), "people": people,
            "groups": groups}


async def history(db: AsyncSession, r: Reader, record_id: str) -> dict[str, Any]:
    current = await _reachable(db, r, record_id)
    versions = await repo.versions(db, r.org_id, record_id)
    partners: dict[str, dict[str, Any] | None] = {}
    for name in ("replaces", "replaced_by"):
        partner_id = current[name]
        partners[name] = await repo.get(db, r.scope, r.half_lives, partner_id) if partner_id else None
    # A history version may name a partner the reader cannot see; it is hidden like the record's own link.
    visible_partners = {p["id"] for p in partners.values() if p}
    docs = []
    for v in versions:
        doc = version_document(v)
        if doc["partner_id"] is not None and doc["partner_id"] not in visible_partners:
            doc["partner_id"] = None
        docs.append(doc)
    ids = [record_id, *sorted(visible_partners)]
    await audit_read(db, r, "GET /memory/{id}/history", ids)
    return {"id": record_id, "versions": docs,
            "replaces": document(partners["replaces"]) if partners["replaces"] else None,
            "replaced_by": document(partners["replaced_by"]) if partners["replaced_by"] else None}


async def expiring(db: AsyncSession, r: Reader, f: Filters, window: timedelta, cursor: Any,
                   limit: int) -> tuple[list[dict[str, Any]], bool]:
    await check_filters(db, r, f)
    after = None
    if cursor is not None:
        try:
            after = (datetime.fromisoformat(cursor[0]), str(cursor[1]))
        except (TypeError, ValueError, IndexError, KeyError):
            raise BadRequest("This cursor is not one the API handed out.", param="cursor",
                             code="invalid_cursor") from None
    rows = await repo.expiring(db, r.scope, r.half_lives, f, window, after, limit + 1)
    more = len(rows) > limit
    rows = rows[:limit]
    await audit_read(db, r, "GET /memory/expiring", [row["id"] for row in rows],
                     describe_filters(r, f, within_seconds=int(window.total_seconds())))
    return rows, more


async def recall(db: AsyncSession, r: Reader, f: Filters, limit: int) -> tuple[list[dict[str, Any]], int, int]:
    await check_filters(db, r, f)
    rows, total, verified = await repo.recall(db, r.scope, r.half_lives, f, limit)
    await count_recalls(db, r, [row["id"] for row in rows])
    await audit_read(db, r, "GET /memory/recall", [row["id"] for row in rows], describe_filters(r, f))
    return rows, total, verified


async def count_recalls(db: AsyncSession, r: Reader, ids: Sequence[str]) -> None:
    """Recall text and search-tool results put records before a model; an administrator's reading does not."""
    if not r.principal.is_admin:
        await repo.bump_recall(db, r.org_id, ids)


def query_for_embedding(q: str) -> str:
    """The words of a web-search query without its operators, for the query vector."""
    words = [w for w in q.replace('"', " ").split() if not w.startswith("-") and w.lower() != "or"]
    return " ".join(words)


async def query_vectors(db: AsyncSession, r: Reader, index: dict[str, Any] | None, q: str
                        ) -> list[repo.QueryVector]:
    """The query embedded once per embedding setting among the searched indexes: the named index, else every
    index the request reaches (indexes that share a setting share one provider call and one vector scan)."""
    words = query_for_embedding(q)
    if not words:
        return []
    searched = [index] if index is not None else await indexes.embedding_indexes(db, r.scope)
    by_setting: dict[str, list[dict[str, Any]]] = {}
    for found in searched:
        if found.get("embedding"):
            by_setting.setdefault(json.dumps(found["embedding"], sort_keys=True), []).append(found)
    groups = list(by_setting.values())
    embedded = await asyncio.gather(*[embed(group[0], [words]) for group in groups])
    return [repo.QueryVector(tuple(i["id"] for i in group), vectors[0])
            for group, vectors in zip(groups, embedded, strict=True) if vectors[0] is not None]


async def search(db: AsyncSession, r: Reader, f: Filters, q: str, limit: int, *,
                 route: str = "GET /memory/search") -> list[dict[str, Any]]:
    """MEM-13: full text (web-search syntax) blended with vector similarity in every index that embeds."""
    index = await check_filters(db, r, f)
    vectors = await query_vectors(db, r, index, q)
    rows = await repo.search(db, r.scope, r.half_lives, f, q, vectors, limit)
    await audit_read(db, r, route, [row["id"] for row in rows], describe_filters(r, f, q=True))
    return rows
