"""Conversation threads (THR-1 … THR-13): rules and documents; SQL lives in repository.py."""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from datetime import date, datetime, timedelta
from typing import Any

import msgspec
from sqlalchemy.ext.asyncio import AsyncSession

from backend.access.labels import check_labels
from backend.access.principal import Principal
from backend.access.scope import Scope, build_scope
from backend.config import Settings
from backend.domains.audit import service as audit
from backend.domains.erasure import guard as erasure
from backend.domains.orgs import repository as orgs_repo
from backend.domains.threads import repository as repo
from backend.domains.threads import search as search_mod
from backend.domains.threads import state as state_mod
from backend.errors import BadRequest, NotFound, ThreadsCapabilityMissing, ValidationFailed
from backend.http import deny
from backend.ids import new_id
from shared.schemas.threads import (
    InputAudio,
    ItemIn,
    MessageIn,
    RefusalIn,
    ThreadCreate,
    ThreadPatch,
)

MAX_METADATA_PAIRS = 16
MAX_METADATA_KEY = 64
MAX_METADATA_VALUE = 512
GROUP_ATOM = "label_is_subject"


@dataclasses.dataclass(frozen=True)
class Ctx:
    """One thread request: who calls, what it reaches, the organisation's row and the deployment settings."""

    principal: Principal
    scope: Scope
    org: dict[str, Any]
    settings: Settings
    # False when `org` is this process's copy from an earlier request rather than read in this transaction:
    # only search takes such a context, and its statement checks the policy in SQL (see `search_context`).
    org_read: bool = True

    @property
    def subject_id(self) -> str | None:
        return self.scope.subject_id

    @property
    def is_subject_token(self) -> bool:
        return self.principal.kind == "subject_token"


async def context(db: AsyncSession, principal: Principal, settings: Settings) -> Ctx:
    """PLT-6 first (no `threads`: the exact 404), then the scope; group reach only where the deployment allows."""
    if "threads" not in principal.capabilities:
        raise ThreadsCapabilityMissing()
    org = await orgs_repo.get(db, principal.org_id)
    assert org is not None
    _remember_org(org)
    return Ctx(principal, _scope(principal, org, settings), org, settings)


def _scope(principal: Principal, org: dict[str, Any], settings: Settings) -> Scope:
    scope = build_scope(principal, org["policy"])
    if not settings.threads_group_reach_by_rule:
        # THR-9: without the setting, a rule that opens threads to the people a label names opens nothing.
        rules = tuple(r for r in scope.rules if not (
            r.kind == "thread" and r.effect == "permit" and any(a.atom == GROUP_ATOM for a in r.when)))
        scope = dataclasses.replace(scope, rules=rules)
    return scope


# The organisation rows this process has read, for search_context; bounded, and never trusted without a check.
_orgs_seen: OrderedDict[str, dict[str, Any]] = OrderedDict()
_ORGS_SEEN_SIZE = 1024


def _remember_org(org: dict[str, Any]) -> None:
    _orgs_seen[org["id"]] = org
    _orgs_seen.move_to_end(org["id"])
    if len(_orgs_seen) > _ORGS_SEEN_SIZE:
        _orgs_seen.popitem(last=False)


async def search_context(db: AsyncSession, principal: Principal, settings: Settings) -> Ctx:
    """`context` for GET /thread-items without a round trip for the organisation's row when this process has
    read it before. The scope is then built from that remembered policy, and the search statement checks in
    SQL, in its own snapshot, that it is still the organisation's policy: if not, `search` reads the row and
    searches again, so a changed policy applies from the next request on, exactly as with `context`."""
    if "threads" not in principal.capabilities:
        raise ThreadsCapabilityMissing()
    org = _orgs_seen.get(principal.org_id)
    if org is None:
        return await context(db, principal, settings)
    return Ctx(principal, _scope(principal, org, settings), org, settings, org_read=False)


# ---------------------------------------------------------------- documents

def thread_document(ctx: Ctx, row: dict[str, Any]) -> dict[str, Any]:
    owner = row["subject"]
    if ctx.is_subject_token and owner != ctx.subject_id:
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


async def _admin_read(db: AsyncSession, ctx: Ctx, route: str, *, filters: dict[str, Any] | None = None,
                      ids: list[str] | None = None, object_id: str | None = None) -> None:
    """PLT-2: every read an administrator makes of threads is audited (ids, never text)."""
    if not ctx.principal.is_admin:
        return
    detail: dict[str, Any] = {"route": route, "filters": {k: v for k, v in (filters or {}).items() if v}}
    if ids is not None:
        detail["ids"] = ids[:200]
        detail["count"] = len(ids)
    await audit.record(db, org_id=ctx.org["id"], actor=ctx.principal.actor, action="thread.read",
                       secret=ctx.settings.secret, subject_id=ctx.subject_id, object_type="thread",
                       object_id=object_id, detail=detail)


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


def _labels(ctx: Ctx, labels: dict[str, Any] | None, before: dict[str, Any]) -> dict[str, Any]:
    checked = check_labels(labels, ctx.org.get("vocabulary"), "thread")
    _check_writable(ctx, checked, before)
    return checked


def _values(value: Any) -> set[str]:
    if isinstance(value, list):
        return {v for v in value if isinstance(v, str)}
    return {value} if isinstance(value, str) else set()


def _check_writable(ctx: Ctx, labels: dict[str, Any], before: dict[str, Any]) -> None:
    """PLT-10: under a label the policy limits, a person may add only the values she may write."""
    policy = ctx.scope.policy
    if ctx.subject_id is None or policy is None or not policy.writable_labels:
        return
    requester = ctx.scope.requester
    for name, value in labels.items():
        spec = policy.writable_labels.get(name)
        if spec is None:
            continue
        allowed = set(spec.get("values", []))
        if spec.get("self"):
            allowed.add(ctx.subject_id)
        if spec.get("attribute"):
            allowed.update(requester.attributes.get(spec["attribute"], ()))
        added = _values(value) - _values(before.get(name))
        refused = sorted(added - allowed)
        if refused:
            raise deny(ctx.principal, f"This person may not write {refused[0]!r} under the label `{name}`.",
                       action="thread.labels_refused", object_type="thread",
                       detail={"label": name, "refused_count": len(refused)})


def _message_text(content: Any) -> str:
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


def item_rows(ctx: Ctx, thread_id: str, items: list[ItemIn], first: int, at: datetime) -> list[dict[str, Any]]:
    rows = []
    for offset, item in enumerate(items):
        body = msgspec.to_builtins(item)
        kind = body.pop("type")
        role: str | None = None
        text: str | None = None
        if isinstance(item, MessageIn):
            role, text = item.role, _message_text(item.content)
        elif isinstance(item, RefusalIn):
            role, text = "assistant", item.refusal
        rows.append({"org_id": ctx.org["id"], "thread_id": thread_id, "position": first + offset,
                     "id": new_id("itm"), "type": kind, "role": role, "subject": ctx.subject_id,
                     "response_id": None, "body": body, "text": text,
                     # A microsecond apart, so time order (search) agrees with position order within a request.
                     "created_at": at + timedelta(microseconds=offset)})
    return rows


async def _not_erased(db: AsyncSession, ctx: Ctx, *people: str | None, labels: dict[str, Any] | None = None,
                      labels_before: dict[str, Any] | None = None) -> None:
    """MEM-19: the request's person, the others this write stores something of, and people it adds to
    `participants` must not have been erased since this request began."""
    named = [ctx.subject_id, *people, *erasure.people_in_labels(labels, labels_before)]
    await erasure.refuse_if_erased(db, ctx.org["id"], ctx.settings.secret, named)


# ---------------------------------------------------------------- threads

async def visible_thread(db: AsyncSession, ctx: Ctx, thread_id: str, param: str = "thread_id") -> dict[str, Any]:
    row = await repo.get_thread(db, ctx.scope, thread_id)
    if row is None:
        raise NotFound(f"No thread {thread_id!r} is reachable with this credential.", param=param)
    return row


def _require(ctx: Ctx, row: dict[str, Any], action: str) -> None:
    if not row[f"can_{action}"]:
        raise deny(ctx.principal, f"The policy does not let this request {action} this thread.",
                   action=f"thread.{action}", object_type="thread", object_id=row["id"])


async def create_thread(db: AsyncSession, ctx: Ctx, body: ThreadCreate) -> dict[str, Any]:
    metadata = check_metadata(body.metadata)
    labels = _labels(ctx, body.labels, {})
    refuse_audio(list(body.items or []))
    owner = ctx.subject_id
    source: dict[str, Any] | None = None
    if body.working_state_from is not None:
        source = await _state_source(db, ctx, body.working_state_from)
    if not ctx.scope.may("thread", "write", owner, labels):
        raise deny(ctx.principal, "The policy does not let this request open a thread with these labels.",
                   action="thread.write", object_type="thread")
    await _not_erased(db, ctx, labels=labels)
    thread_id = new_id("thr")
    await repo.insert_thread(db, {"org_id": ctx.org["id"], "id": thread_id, "subject": owner, "labels": labels,
                                  "metadata": metadata})
    if source is not None:
        await repo.write_state(db, ctx.org["id"], thread_id, source["state"], 1, source["size"])
    items = await _append(db, ctx, thread_id, list(body.items or []))
    row = await repo.get_thread(db, ctx.scope, thread_id)
    if row is None:  # a policy may permit writing what it does not show; answer with what was written
        row = await repo.get_thread(db, dataclasses.replace(ctx.scope, unrestricted=True), thread_id)
        assert row is not None
    return {**thread_document(ctx, row), "items": [item_document(i) for i in items]}


async def _state_source(db: AsyncSession, ctx: Ctx, source_id: str) -> dict[str, Any]:
    """THR-12: the source must be the named person's own thread that the key may read."""
    if ctx.subject_id is None:
        raise BadRequest("`working_state_from` carries a person's working state; name her (X-Core-Subject or a "
                         "subject token).", param="working_state_from", code="subject_required")
    source = await repo.get_thread(db, ctx.scope, source_id)
    if source is None or source["subject"] != ctx.subject_id:
        raise NotFound(f"No thread {source_id!r} of this person is reachable with this credential.",
                       param="working_state_from")
    state = await repo.get_state(db, ctx.org["id"], source_id)
    return state or {"state": {}, "size": 2}


def _owner_filter(ctx: Ctx, subject: str | None) -> str | bool | None:
    if subject is None:
        return False
    if ctx.subject_id is not None:
        raise BadRequest("`subject` filters threads by owner for requests that name nobody; this request is "
                         "for a person already.", param="subject", code="invalid_filter")
    return subject or None


async def thread_stats(db: AsyncSession, ctx: Ctx, *, metadata: list[tuple[str, str]],
                       labels: list[tuple[str, str]], subject: str | None) -> dict[str, Any]:
    """Counts over every page of `GET /threads` with these filters (administrators and `management` keys).

    For a request that names a person the number of owners is left out: threads others opened to her through a
    group rule would tell her how many other people she shares threads with."""
    ctx.principal.require_management()
    counted = await repo.thread_counts(db, ctx.scope, metadata=metadata, labels=labels,
                                       owner=_owner_filter(ctx, subject))
    await _admin_read(db, ctx, "GET /threads/stats",
                      filters={"metadata": [k for k, _ in metadata], "label": [k for k, _ in labels],
                               "subject": subject is not None})
    return {"threads": counted["threads"], "shared": counted["shared"],
            "people": counted["people"] if ctx.subject_id is None else None,
            "messages": {role: counted[role] for role in ("user", "assistant", "developer")}}


async def list_threads(db: AsyncSession, ctx: Ctx, *, metadata: list[tuple[str, str]],
                       labels: list[tuple[str, str]], subject: str | None, cursor: Any, descending: bool,
                       limit: int) -> tuple[list[dict[str, Any]], str | None]:
    owner = _owner_filter(ctx, subject)
    if cursor is not None and not isinstance(cursor, str):
        raise BadRequest("This cursor is not one the API handed out.", param="cursor", code="invalid_cursor")
    rows = await repo.list_threads(db, ctx.scope, metadata=metadata, labels=labels, owner=owner, after_id=cursor,
                                   descending=descending, limit=limit + 1)
    more = len(rows) > limit
    rows = rows[:limit]
    await _admin_read(db, ctx, "GET /threads", ids=[r["id"] for r in rows],
                      filters={"metadata": [k for k, _ in metadata], "label": [k for k, _ in labels],
                               "subject": subject is not None})
    return [thread_document(ctx, r) for r in rows], rows[-1]["id"] if more and rows else None


async def get_thread(db: AsyncSession, ctx: Ctx, thread_id: str) -> dict[str, Any]:
    row = await visible_thread(db, ctx, thread_id)
    await _admin_read(db, ctx, "GET /threads/{id}", object_id=thread_id)
    return thread_document(ctx, row)


async def patch_thread(db: AsyncSession, ctx: Ctx, thread_id: str, body: ThreadPatch) -> dict[str, Any]:
    row = await visible_thread(db, ctx, thread_id)
    _require(ctx, row, "write")
    values: dict[str, Any] = {}
    if body.metadata is not msgspec.UNSET:
        values["metadata"] = check_metadata(body.metadata)
    if body.labels is not msgspec.UNSET:
        values["labels"] = _labels(ctx, body.labels, row["labels"])
        await _not_erased(db, ctx, row["subject"], labels=values["labels"], labels_before=row["labels"])
    if values:
        updated_at = await repo.update_thread(db, ctx.org["id"], thread_id, values)
        row = {**row, **values, "updated_at": updated_at}
    return thread_document(ctx, row)


async def delete_thread(db: AsyncSession, ctx: Ctx, thread_id: str) -> None:
    row = await visible_thread(db, ctx, thread_id)
    _require(ctx, row, "delete")
    await repo.tombstone(db, ctx.org["id"], thread_id)
    await audit.record(db, org_id=ctx.org["id"], actor=ctx.principal.actor, action="thread.deleted",
                       secret=ctx.settings.secret, subject_id=ctx.subject_id, object_type="thread",
                       object_id=thread_id)


# ---------------------------------------------------------------- items

async def _append(db: AsyncSession, ctx: Ctx, thread_id: str, items: list[ItemIn]) -> list[dict[str, Any]]:
    if not items:
        return []
    refuse_audio(items)  # before taking positions
    reserved = await repo.reserve_positions(db, ctx.org["id"], thread_id, len(items))
    if reserved is None:
        raise NotFound(f"The thread {thread_id!r} was deleted while this request ran.", param="thread_id")
    first, at = reserved
    return await repo.insert_items(db, item_rows(ctx, thread_id, items, first, at))


async def append_items(db: AsyncSession, ctx: Ctx, thread_id: str, items: list[ItemIn]) -> list[dict[str, Any]]:
    row = await visible_thread(db, ctx, thread_id)
    _require(ctx, row, "write")
    await _not_erased(db, ctx, row["subject"])
    return [item_document(i) for i in await _append(db, ctx, thread_id, items)]


async def list_items(db: AsyncSession, ctx: Ctx, thread_id: str, *, cursor: Any, descending: bool,
                     limit: int) -> tuple[list[dict[str, Any]], int | None]:
    await visible_thread(db, ctx, thread_id)
    if cursor is not None and not isinstance(cursor, int):
        raise BadRequest("This cursor is not one the API handed out.", param="cursor", code="invalid_cursor")
    rows = await repo.list_items(db, ctx.org["id"], thread_id, after=cursor, descending=descending,
                                 limit=limit + 1)
    more = len(rows) > limit
    rows = rows[:limit]
    await _admin_read(db, ctx, "GET /threads/{id}/items", object_id=thread_id, ids=[r["id"] for r in rows])
    return [item_document(r) for r in rows], rows[-1]["position"] if more and rows else None


async def get_item(db: AsyncSession, ctx: Ctx, thread_id: str, item_id: str) -> dict[str, Any]:
    await visible_thread(db, ctx, thread_id)
    row = await repo.get_item(db, ctx.org["id"], thread_id, item_id)
    if row is None:
        raise NotFound(f"Thread {thread_id!r} has no item {item_id!r}.", param="item_id")
    await _admin_read(db, ctx, "GET /threads/{id}/items/{item_id}", object_id=thread_id, ids=[item_id])
    return item_document(row)


# ---------------------------------------------------------------- notes (THR-8)

MAX_NOTE_KEYS = 16
MAX_NOTE_KEY = 64
MAX_NOTE_STRING = 512


def check_note(metadata: dict[str, Any]) -> dict[str, Any]:
    if len(metadata) > MAX_NOTE_KEYS:
        raise ValidationFailed(f"A note has at most {MAX_NOTE_KEYS} keys.", param="metadata")
    for key, value in metadata.items():
        path = f"metadata.{key}"
        if not key or len(key) > MAX_NOTE_KEY:
            raise ValidationFailed(f"A note key is 1 to {MAX_NOTE_KEY} characters.", param=path)
        if isinstance(value, str) and len(value) > MAX_NOTE_STRING:
            raise ValidationFailed(f"A note string is at most {MAX_NOTE_STRING} characters.", param=path)
    return dict(metadata)


async def _noted_message(db: AsyncSession, ctx: Ctx, thread_id: str, item_id: str) -> dict[str, Any]:
    await visible_thread(db, ctx, thread_id)  # reading the thread is enough to write one's own note
    item = await repo.get_item(db, ctx.org["id"], thread_id, item_id)
    if item is None:
        raise NotFound(f"Thread {thread_id!r} has no item {item_id!r}.", param="item_id")
    if item["type"] != "message":
        raise ValidationFailed("Notes are kept on messages only.", param="item_id", code="not_a_message")
    return item


async def put_note(db: AsyncSession, ctx: Ctx, thread_id: str, item_id: str, metadata: dict[str, Any]
                   ) -> dict[str, Any]:
    note = check_note(metadata)
    await _noted_message(db, ctx, thread_id, item_id)
    await _not_erased(db, ctx)
    row = await repo.put_note(db, ctx.org["id"], thread_id, item_id, ctx.subject_id or "", note)
    return note_document(row)


async def list_notes(db: AsyncSession, ctx: Ctx, thread_id: str, item_id: str) -> list[dict[str, Any]]:
    await _noted_message(db, ctx, thread_id, item_id)
    # A subject token sees only her own note; a key sees every person's and the organisation's.
    author = (ctx.subject_id or "") if ctx.is_subject_token else None
    rows = await repo.list_notes(db, ctx.org["id"], item_id, author)
    await _admin_read(db, ctx, "GET /threads/{id}/items/{item_id}/metadata", object_id=thread_id, ids=[item_id])
    return [note_document(r) for r in rows]


async def delete_note(db: AsyncSession, ctx: Ctx, thread_id: str, item_id: str) -> None:
    await _noted_message(db, ctx, thread_id, item_id)
    if not await repo.delete_note(db, ctx.org["id"], item_id, ctx.subject_id or ""):
        raise NotFound("This request's person keeps no note on this item.", param="item_id")


# ---------------------------------------------------------------- search (THR-7, THR-8)

async def search(db: AsyncSession, ctx: Ctx, *, q: str | None, thread_id: str | None,
                 thread_metadata: list[tuple[str, str]], role: str | None, from_: datetime | None,
                 to: datetime | None, metadata: list[tuple[str, str]], metadata_by: str | None, cursor: Any,
                 limit: int) -> dict[str, Any]:
    if q is None and not metadata and metadata_by is None:
        raise BadRequest("Give `q`, or `metadata` (with `metadata_by`) to find messages by note.", param="q",
                         code="query_required")
    if q is not None:
        search_mod.check_query(q)
    for name, instant in (("from", from_), ("to", to)):
        if instant is not None and instant.tzinfo is None:  # PLT-15; query parameters skip msgspec's check
            raise ValidationFailed(f"`{name}` needs an offset, such as 2026-01-01T00:00:00Z.", param=name)
    if from_ is not None and to is not None and from_ >= to:
        raise BadRequest("`from` must be before `to`.", param="from", code="invalid_range")
    note_author: str | None = None
    if metadata or metadata_by is not None:
        own = ctx.subject_id or ""
        note_author = own if metadata_by is None else metadata_by
        if ctx.is_subject_token and note_author != own:
            return {"data": [], "next_cursor": None, "searched_to": None}  # her own notes only (THR-8)
    upper, upper_id, fixed_lower = to, None, None
    if cursor is not None:
        try:
            upper = datetime.fromisoformat(cursor["u"])
            upper_id = cursor.get("i")
            fixed_lower = datetime.fromisoformat(cursor["l"]) if cursor.get("l") else None
        except (TypeError, KeyError, ValueError, AttributeError):
            raise BadRequest("This cursor is not one the API handed out.", param="cursor",
                             code="invalid_cursor") from None
    async def page(ctx: Ctx) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
        return await repo.search_items(
            db, ctx.scope, query=q, headline_options=search_mod.HEADLINE_OPTIONS, upper=upper, upper_id=upper_id,
            fixed_lower=fixed_lower, from_=from_, window_days=search_mod.WINDOW_DAYS, thread_id=thread_id,
            thread_metadata=thread_metadata, role=role, note_author=note_author, note_pairs=metadata,
            limit=limit + 1, built_from_policy=None if ctx.org_read else ctx.org["policy"])

    window, rows = await page(ctx)
    if window is None:  # the remembered policy has changed: read the organisation's row and search again
        ctx = await context(db, ctx.principal, ctx.settings)
        window, rows = await page(ctx)
        assert window is not None
    tz = window["tz"] or "UTC"
    next_cursor: dict[str, Any] | None = None
    searched_to: date | None
    if len(rows) > limit:
        rows = rows[:limit]
        last = rows[-1]
        next_cursor = {"u": last["created_at"].isoformat(), "i": last["id"], "l": window["lower"].isoformat()}
        searched_to = search_mod.local_date(last["created_at"], tz)
    elif window["lower"] is not None:
        searched_to = search_mod.local_date(window["lower"], tz)
        if window["older"]:
            next_cursor = {"u": window["lower"].isoformat()}
    else:
        searched_to = search_mod.local_date(from_, tz) if from_ is not None else None
    hits = [search_mod.hit_document(r, note_author is not None) for r in rows]
    await _admin_read(db, ctx, "GET /thread-items", ids=[h["item_id"] for h in hits],
                      filters={"q": q is not None, "thread_id": thread_id, "role": role,
                               "metadata": [k for k, _ in metadata], "metadata_by": metadata_by is not None})
    return {"data": hits, "next_cursor": next_cursor, "searched_to": searched_to}


# ---------------------------------------------------------------- working state (THR-11, THR-12)

async def get_state(db: AsyncSession, ctx: Ctx, thread_id: str) -> dict[str, Any]:
    await visible_thread(db, ctx, thread_id)
    row = await repo.get_state(db, ctx.org["id"], thread_id)
    await _admin_read(db, ctx, "GET /threads/{id}/state", object_id=thread_id)
    return state_mod.document(row)


async def write_state(db: AsyncSession, ctx: Ctx, thread_id: str, *, replace: dict[str, Any] | None = None,
                      patch: Any = None, if_match: str | None = None,
                      schema: dict[str, Any] | None = None) -> dict[str, Any]:
    """PUT replaces, PATCH merges (RFC 7386); both under the row lock, so no write is lost."""
    row = await visible_thread(db, ctx, thread_id)
    _require(ctx, row, "write")
    await _not_erased(db, ctx, row["subject"])
    expected = state_mod.parse_if_match(if_match)
    current = await repo.lock_state(db, ctx.org["id"], thread_id)
    if expected is not None and expected != current["version"]:
        raise state_mod.stale(expected, current["version"])
    new_state = replace if replace is not None else state_mod.merge_patch(current["state"], patch)
    size = state_mod.check_state(new_state, ctx.settings.working_state_max_bytes, schema)
    written = await repo.write_state(db, ctx.org["id"], thread_id, new_state, current["version"] + 1, size)
    return state_mod.document(written)


# ---------------------------------------------------------------- summaries (THR-13)

async def list_summaries(db: AsyncSession, ctx: Ctx, thread_id: str, *, cursor: Any, limit: int
                         ) -> tuple[list[dict[str, Any]], str | None]:
    await visible_thread(db, ctx, thread_id)
    if cursor is not None and not isinstance(cursor, str):
        raise BadRequest("This cursor is not one the API handed out.", param="cursor", code="invalid_cursor")
    rows = await repo.list_summaries(db, ctx.org["id"], thread_id, cursor, limit + 1)
    more = len(rows) > limit
    rows = rows[:limit]
    await _admin_read(db, ctx, "GET /threads/{id}/summaries", object_id=thread_id, ids=[r["id"] for r in rows])
    docs = [{"id": r["id"], "from_position": r["from_position"], "to_position": r["to_position"],
             "level": r["level"], "model": r["model"], "text": r["text"], "created_at": r["created_at"]}
            for r in rows]
    return docs, rows[-1]["id"] if more and rows else None


# ---------------------------------------------------------------- erasure of a person

async def erase_subject_threads(db: AsyncSession, org_id: str, subject_id: str) -> dict[str, int]:
    """Remove a person from threads: her threads, her items in others' threads, every note she wrote, the
    working states of her threads, and her id in thread labels. Runs in the caller's transaction; the caller
    (DELETE /subjects/{id}) records the erasure in the audit trail."""
    return await repo.erase_subject(db, org_id, subject_id)

