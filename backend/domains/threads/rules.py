"""Threads (THR-1 … THR-13): who reaches them, what items and labels may hold, and how they read as documents."""

from __future__ import annotations

from typing import Any

import msgspec

from backend.access.context import RequestContext
from backend.access.labels import check_labels
from backend.access.scope import Scope
from backend.domains.erasure import guard as erasure
from backend.errors import NotFound, ValidationFailed
from backend.ids import new_id
from shared.schemas.threads import InputAudio, ItemIn, MessageIn, RefusalIn

MAX_METADATA_PAIRS = 16
MAX_METADATA_KEY = 64
MAX_METADATA_VALUE = 512


def threads_scope(ctx: RequestContext) -> Scope:
    """PLT-6 first (without `threads`: the exact 404), then what the request reaches."""
    ctx.require_threads()
    return ctx.scope


def unreachable(thread_id: str, param: str = "thread_id") -> NotFound:
    """PLT-9: a thread that does not exist and one the request may not read answer the same 404."""
    return NotFound(f"No thread {thread_id!r} is reachable with this credential.", param=param)


# ---------------------------------------------------------------- documents

def thread_document(ctx: RequestContext, row: dict[str, Any]) -> dict[str, Any]:
    owner = row["subject"]
    if ctx.is_subject_token and owner != ctx.person:
        owner = None  # THR-2: a subject token sees her own id on her threads and null on any other
    return {"id": row["id"], "subject": owner, "metadata": row["metadata"], "labels": row["labels"],
            "message_counts": {"user": row["count_user"], "assistant": row["count_assistant"],
                               "developer": row["count_developer"]},
            "created_at": row["created_at"], "updated_at": row["updated_at"]}


def item_document(row: dict[str, Any]) -> dict[str, Any]:
    return {**row["body"], "id": row["id"], "type": row["type"], "position": row["position"],
            "response_id": row["response_id"], "subject": row["subject"], "created_at": row["created_at"]}


def note_document(row: dict[str, Any]) -> dict[str, Any]:
    return {"item_id": row["item_id"], "by": row["author"] or None, "metadata": row["metadata"],
            "updated_at": row["updated_at"]}


async def admin_read(ctx: RequestContext, route: str, *, filters: dict[str, Any] | None = None,
                      ids: list[str] | None = None, object_id: str | None = None, count: int | None = None) -> None:
    """PLT-2: every read an administrator makes of threads is audited with the ids returned or, for a read that
    returns counts, `count` (what it counted); never text."""
    if not ctx.principal.is_admin:
        return
    detail: dict[str, Any] = {"route": route, "filters": {k: v for k, v in (filters or {}).items() if v}}
    if ids is not None:
        detail["ids"] = ids[:200]
        detail["count"] = len(ids)
    if count is not None:
        detail["count"] = count
    await ctx.audit("thread.read", subject_id=ctx.person, object_type="thread", object_id=object_id,
                    detail=detail)


# ---------------------------------------------------------------- validation

def check_metadata(metadata: dict[str, str] | None, param: str = "metadata") -> dict[str, str]:
    """THR-5: at most 16 string pairs, key at most 64 characters, value at most 512."""
    if not metadata:
        return {}
    if len(metadata) > MAX_METADATA_PAIRS:
        raise ValidationFailed(f"At most {MAX_METADATA_PAIRS} metadata pairs.", param=param)
    for key, value in metadata.items():
        if not key or len(key) > MAX_METADATA_KEY:
            raise ValidationFailed(f"A metadata key is 1 to {MAX_METADATA_KEY} characters.", param=f"{param}.{key}")
        if len(value) > MAX_METADATA_VALUE:
            raise ValidationFailed(f"A metadata value is at most {MAX_METADATA_VALUE} characters.",
                                   param=f"{param}.{key}")
    return dict(metadata)


def checked_labels(ctx: RequestContext, labels: dict[str, Any] | None, before: dict[str, Any]) -> dict[str, Any]:
    checked = check_labels(labels, ctx.org.get("vocabulary"), "thread")
    _check_writable(ctx, checked, before)
    return checked


def _values(value: Any) -> set[str]:
    if isinstance(value, list):
        return {v for v in value if isinstance(v, str)}
    return {value} if isinstance(value, str) else set()


def _check_writable(ctx: RequestContext, labels: dict[str, Any], before: dict[str, Any]) -> None:
    """PLT-10: under a label the policy limits, a person may add only the values she may write."""
    policy = ctx.scope.policy
    if ctx.person is None or policy is None or not policy.writable_labels:
        return
    requester = ctx.scope.requester
    for name, value in labels.items():
        spec = policy.writable_labels.get(name)
        if spec is None:
            continue
        allowed = set(spec.get("values", []))
        if spec.get("self"):
            allowed.add(ctx.person)
        if spec.get("attribute"):
            allowed.update(requester.attributes.get(spec["attribute"], ()))
        added = _values(value) - _values(before.get(name))
        refused = sorted(added - allowed)
        if refused:
            raise ctx.deny(f"This person may not write {refused[0]!r} under the label `{name}`.",
                       action="thread.labels_refused", object_type="thread",
                       detail={"label": name, "refused_count": len(refused)})


def message_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = [getattr(p, "text", None) or getattr(p, "refusal", None) for p in content]
    return "\n".join(p for p in parts if p)


def refuse_audio(items: list[ItemIn]) -> None:
    """THR-3: `input_audio` is refused on `items`; only a turn transcribes audio."""
    for item in items:
        if isinstance(item, MessageIn) and isinstance(item.content, list) and any(
                isinstance(part, InputAudio) for part in item.content):
            raise ValidationFailed("An item with `input_audio` content is refused here: only a turn "
                                   "(POST /responses) transcribes audio.", param="items", code="input_audio_refused")


def item_rows(ctx: RequestContext, items: list[ItemIn]) -> list[dict[str, Any]]:
    """The rows of `items` as `repository.append_items` inserts them (it gives them their positions and times)."""
    rows = []
    for item in items:
        body = msgspec.to_builtins(item)
        kind = body.pop("type")
        role: str | None = None
        text: str | None = None
        if isinstance(item, MessageIn):
            role, text = item.role, message_text(item.content)
        elif isinstance(item, RefusalIn):
            role, text = "assistant", item.refusal
        rows.append({"id": new_id("itm"), "type": kind, "role": role, "subject": ctx.person, "response_id": None,
                     "body": body, "text": text})
    return rows


async def not_erased(ctx: RequestContext, *people: str | None, labels: dict[str, Any] | None = None,
                      labels_before: dict[str, Any] | None = None) -> None:
    """MEM-19: the request's person, the others this write stores something of, and people it adds to
    `participants` must not have been erased since this request began."""
    named = [ctx.person, *people, *erasure.people_in_labels(labels, labels_before)]
    await erasure.refuse_if_erased(ctx.db, ctx.org_id, ctx.settings.secret, named)


