"""Memory records (MEM-1 … MEM-19): what a record may be, who may write it, and how it reads as a document."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

import msgspec

from backend.access.context import RequestContext
from backend.access.scope import Scope
from backend.domains.erasure import guard as erasure
from backend.errors import NUL_MESSAGE, ValidationFailed, msgspec_error_parts
from shared.schemas.memory import MAX_METADATA_BYTES, Commitment

DEFAULT_CONFIDENCE = {"api": 1.0, "admin": 1.0, "model": 0.7, "extraction": 0.7, "maintenance": 0.7}
DEFAULT_STORE_TYPES = ("fact", "preference", "commitment", "behaviour")
NOT_WRITABLE_TYPES = frozenset({"episode"})  # only extraction writes episodes (EXT-12)
T = TypeVar("T")


def memory_scope(ctx: RequestContext) -> Scope:
    """Every memory route needs `memory` (PLT-6); then it reaches what the request's scope reaches."""
    ctx.require("memory")
    return ctx.scope


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


def converted(value: Any, model: type[T], param: str) -> T:
    """`value` (decoded JSON) as `model`, strictly as a route's body is decoded (`params.refuse_loose_body`: `"0.9"`
    is no number); a refusal is the 422 Litestar would give, naming the field under `param` (`records[3]` +
    `.text`), so a batch checks its records in order (MEM-5)."""
    try:
        return msgspec.convert(value, model, strict=True)
    except msgspec.ValidationError as exc:
        text, path, name = msgspec_error_parts(str(exc))
        where = f"{param}{path or ''}" + (f".{name}" if name else "")
        raise ValidationFailed(text, param=where.lstrip(".") or None) from None


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
        clean = tag.strip().lower()  # lowercasing may lengthen a tag: "İ" becomes "i̇", two characters
        if not clean or len(clean) > 64:
            raise ValidationFailed("A tag is 1 to 64 characters once lowercased, not only white space.",
                                   param=f"{param}[{i}]")
        if clean not in out:
            out.append(clean)
    return out


def check_type(type_name: str, param: str) -> str:
    if type_name in NOT_WRITABLE_TYPES:
        raise ValidationFailed("Episodes are written by extraction only (EXT-12); POST /memory and the write tool "
                               "refuse type `episode`.", param=param, code="type_not_writable")
    return type_name


NEW_COMMITMENT: dict[str, Any] = {"status": "open", "due_at": None, "promised_to": None}


def _sent_fields(commitment: Commitment) -> dict[str, Any]:
    """The fields of a commitment part the client sent; `due_at` in UTC with `Z`, the form INJ-13 indexes."""
    sent = {name: getattr(commitment, name) for name in NEW_COMMITMENT
            if getattr(commitment, name) is not msgspec.UNSET}
    if sent.get("due_at") is not None:
        sent["due_at"] = sent["due_at"].astimezone(UTC).isoformat().replace("+00:00", "Z")
    return sent


def commitment_part(type_name: str, commitment: Commitment | msgspec.UnsetType | None,
                    param: str) -> dict[str, Any] | None:
    """A new record's part: a commitment always has one, what is not sent taking `NEW_COMMITMENT`'s values."""
    if commitment is msgspec.UNSET or commitment is None:
        return dict(NEW_COMMITMENT) if type_name == "commitment" else None
    if type_name != "commitment":
        raise ValidationFailed("`commitment` belongs to records of type `commitment` only.", param=param)
    return {**NEW_COMMITMENT, **_sent_fields(commitment)}


def changed_commitment(type_name: str, stored: Mapping[str, Any] | None,
                       commitment: Commitment | msgspec.UnsetType | None, param: str) -> dict[str, Any] | None:
    """The part of a record a PATCH or a key upsert changes (MEM-7, MEM-4): only the fields sent replace the stored
    ones, so marking a commitment done keeps its due time and a new due time does not reopen it (MEM-14)."""
    if commitment is msgspec.UNSET:
        return dict(stored) if stored is not None else None
    if type_name != "commitment":
        return commitment_part(type_name, commitment, param)  # null: still no part; a part: 422
    if commitment is None:
        raise ValidationFailed("A commitment keeps its `commitment` part: send only the fields to change "
                               '(`{"status": "done"}`), or null inside it to clear `due_at` or `promised_to`.',
                               param=param)
    return {**NEW_COMMITMENT, **(stored or {}), **_sent_fields(commitment)}


def store_types(index: Mapping[str, Any]) -> tuple[str, ...]:
    """Types the write tool takes (MEM-21): the extraction switch's when the store has one (the tools domain puts
    them on the index row as `store_types`), else the defaults; never `episode`."""
    types = index.get("store_types") or DEFAULT_STORE_TYPES
    return tuple(t for t in types if t not in NOT_WRITABLE_TYPES)


# ---------------------------------------------------------------- policy

def check_write(ctx: RequestContext, owner: str | None, labels: Mapping[str, Any], *, object_id: str | None = None,
                detail: dict[str, Any] | None = None, param: str | None = None) -> None:
    """`memory_write` on the record as it will be written (PLT-8); a refusal keeps a `denied` audit event. `param`
    names the record in a batch (`records[3]`)."""
    if not ctx.scope.may("memory_write", "write", owner, labels):
        raise ctx.deny("The policy does not permit writing this memory record, with its owner and labels (no "
                       "`memory_write` rule permits it, or a deny rule refuses it).", action="memory.write",
                       object_type="memory_record", object_id=object_id, detail=detail or {}, param=param)


def check_change(ctx: RequestContext, current: Mapping[str, Any], action: str, param: str | None = None) -> None:
    """PATCH and DELETE: a person changes only her own records; the policy's `memory_record` action decides.
    `param` names the field that chose the record (`replaces`, `key`), where there is one."""
    owner = current["subject"]
    verb = "change" if action == "write" else "delete"
    if ctx.person is not None and owner != ctx.person:
        what = "a shared record" if owner is None else "another person's record"
        raise ctx.deny(f"A request for a person cannot {verb} {what}.", action=f"memory.{verb}",
                       object_type="memory_record", object_id=current["id"], detail={"reason": "not_owner"},
                       param=param)
    if not ctx.scope.may("memory_record", action, owner, current["labels"]):
        raise ctx.deny(f"The policy does not permit you to {verb} this record.", action=f"memory.{verb}",
                       object_type="memory_record", object_id=current["id"], detail={"reason": "policy"},
                       param=param)


async def check_not_erased(ctx: RequestContext, people: Iterable[str | None], started_at: datetime | None = None,
                           seen: set[str] | None = None) -> None:
    """Work that began before a person was erased never writes her back (MEM-19)."""
    await erasure.refuse_if_erased(ctx.db, ctx.org_id, ctx.settings.secret, people, started_at=started_at, seen=seen)
