"""Conversation threads (THR-1 … THR-13): threads, items, notes, working state and summaries. The rules and
documents are in rules.py, message search in searching.py, SQL in the repositories."""

from __future__ import annotations

import dataclasses
from typing import Any

import msgspec

from backend.access.context import RequestContext
from backend.db.plan_mode import let_key_checks_keep_plans
from backend.domains.privacy import repository as privacy_repo
from backend.domains.privacy import service as privacy
from backend.domains.threads import repository as repo
from backend.domains.threads import rules
from backend.domains.threads import state as state_mod
from backend.errors import BadRequest, NotFound, ValidationFailed
from backend.ids import new_id
from backend.params import Page, pairs
from shared.schemas.threads import ItemIn, ThreadCreate, ThreadPatch, ThreadQuery

# ---------------------------------------------------------------- threads

async def visible_thread(ctx: RequestContext, thread_id: str, param: str = "thread_id") -> dict[str, Any]:
    row = await repo.get_thread(ctx.db, rules.threads_scope(ctx), thread_id)
    if row is None:
        raise rules.unreachable(thread_id, param)
    return row


def _require(ctx: RequestContext, row: dict[str, Any], action: str) -> None:
    if not row[f"can_{action}"]:
        raise ctx.deny(f"The policy does not let this request {action} this thread.",
                   action=f"thread.{action}", object_type="thread", object_id=row["id"])


async def create_thread(ctx: RequestContext, body: ThreadCreate) -> dict[str, Any]:
    scope = rules.threads_scope(ctx)
    metadata = rules.check_metadata(body.metadata)
    labels = rules.checked_labels(ctx, body.labels, {})
    rules.refuse_audio(list(body.items or []))
    owner = ctx.person
    source: dict[str, Any] | None = None
    if body.working_state_from is not None:
        source = await state_source(ctx, body.working_state_from)
    if not scope.may("thread", "write", owner, labels):
        raise ctx.deny("The policy does not let this request open a thread with these labels.",
                   action="thread.write", object_type="thread")
    await rules.not_erased(ctx, labels=labels)
    thread_id = new_id("thr")
    await repo.insert_thread(ctx.db, {"org_id": ctx.org_id, "id": thread_id, "subject": owner, "labels": labels,
                                  "metadata": metadata})
    if source is not None:
        await let_key_checks_keep_plans(ctx.db)  # the state's key check against `threads` (backend/db/plan_mode.py)
        await repo.write_state(ctx.db, ctx.org_id, thread_id, source["state"], 1, source["size"])
    items = await _append(ctx, thread_id, list(body.items or []))
    row = await repo.get_thread(ctx.db, ctx.scope, thread_id)
    if row is None:  # a policy may permit writing what it does not show; answer with what was written
        row = await repo.get_thread(ctx.db, dataclasses.replace(ctx.scope, unrestricted=True), thread_id)
        assert row is not None
    return {**rules.thread_document(ctx, row), "items": [rules.item_document(i) for i in items]}


async def state_source(ctx: RequestContext, source_id: str) -> dict[str, Any]:
    """THR-12: the source must be the named person's own thread that the key may read."""
    if ctx.person is None:
        raise BadRequest("`working_state_from` carries a person's working state; name her (X-Core-Subject or a "
                         "subject token).", param="working_state_from", code="subject_required")
    source = await repo.get_thread(ctx.db, ctx.scope, source_id)
    if source is None or source["subject"] != ctx.person:
        raise NotFound(f"No thread {source_id!r} of this person is reachable with this credential.",
                       param="working_state_from")
    state = await repo.get_state(ctx.db, ctx.org_id, source_id)
    return state or {"state": {}, "size": 2}


def _owner_filter(ctx: RequestContext, subject: str | None) -> str | bool | None:
    if subject is None:
        return False
    if ctx.person is not None:
        raise BadRequest("`subject` filters threads by owner for requests that name nobody; this request is "
                         "for a person already.", param="subject", code="invalid_filter")
    return subject or None


async def thread_stats(ctx: RequestContext, f: ThreadQuery) -> dict[str, Any]:
    """Counts over every page of `GET /threads` with these filters (administrators and `management` keys).

    For a request that names a person the number of owners is left out: threads others opened to her through a
    group rule would tell her how many other people she shares threads with."""
    ctx.require_threads()
    ctx.require_management()
    scope = ctx.management_scope  # a management route: a key's `subjects_required` does not apply (PLT-7)
    counted = await repo.thread_counts(ctx.db, scope, _checked(f), _owner_filter(ctx, f.subject))
    await rules.admin_read(ctx, "GET /threads/stats", filters=_described(f), count=counted["threads"])
    return {"threads": counted["threads"], "shared": counted["shared"],
            "people": counted["people"] if ctx.person is None else None,
            "messages": {role: counted[role] for role in ("user", "assistant", "developer")}}


def _checked(f: ThreadQuery) -> ThreadQuery:
    pairs(f.metadata, "metadata")
    pairs(f.label, "label")
    return f


def _described(f: ThreadQuery) -> dict[str, Any]:
    return {"metadata": [k for k, _ in pairs(f.metadata, "metadata")],
            "label": [k for k, _ in pairs(f.label, "label")], "subject": f.subject is not None}


async def list_threads(ctx: RequestContext, f: ThreadQuery, page: Page, *, descending: bool
                       ) -> tuple[list[dict[str, Any]], str | None]:
    scope = rules.threads_scope(ctx)
    owner = _owner_filter(ctx, f.subject)
    rows = await repo.list_threads(ctx.db, scope, _checked(f), owner=owner, after_id=page.after(str),
                                   descending=descending, limit=page.fetch())
    rows, next_cursor = page.cut(rows, lambda row: row["id"])
    await rules.admin_read(ctx, "GET /threads", ids=[r["id"] for r in rows], filters=_described(f))
    return [rules.thread_document(ctx, r) for r in rows], next_cursor


async def get_thread(ctx: RequestContext, thread_id: str) -> dict[str, Any]:
    row = await visible_thread(ctx, thread_id)
    await rules.admin_read(ctx, "GET /threads/{id}", object_id=thread_id)
    return rules.thread_document(ctx, row)


async def patch_thread(ctx: RequestContext, thread_id: str, body: ThreadPatch) -> dict[str, Any]:
    row = await visible_thread(ctx, thread_id)
    _require(ctx, row, "write")
    values: dict[str, Any] = {}
    if body.metadata is not msgspec.UNSET:
        values["metadata"] = rules.check_metadata(body.metadata)
    if body.labels is not msgspec.UNSET:
        values["labels"] = rules.checked_labels(ctx, body.labels, row["labels"])
        await rules.not_erased(ctx, row["subject"], labels=values["labels"], labels_before=row["labels"])
    if values:
        updated_at = await repo.update_thread(ctx.db, ctx.org_id, thread_id, values)
        if updated_at is None:  # deleted (or its owner erased) since it was read: as GET answers now
            raise rules.unreachable(thread_id)
        row = {**row, **values, "updated_at": updated_at}
    return rules.thread_document(ctx, row)


async def delete_thread(ctx: RequestContext, thread_id: str) -> None:
    row = await visible_thread(ctx, thread_id)
    _require(ctx, row, "delete")
    if not await repo.tombstone(ctx.db, ctx.org_id, thread_id):  # another request deleted it meanwhile
        raise rules.unreachable(thread_id)
    await ctx.audit("thread.deleted", subject_id=ctx.person, object_type="thread", object_id=thread_id)


# ---------------------------------------------------------------- items

async def _append(ctx: RequestContext, thread_id: str, items: list[ItemIn]) -> list[dict[str, Any]]:
    if not items:
        return []
    rules.refuse_audio(items)  # before taking positions
    await let_key_checks_keep_plans(ctx.db)  # each item's key check against `threads` (backend/db/plan_mode.py)
    written = await repo.append_items(ctx.db, ctx.org_id, thread_id, rules.item_rows(ctx, items))
    if written is None:
        raise NotFound(f"The thread {thread_id!r} was deleted while this request ran.", param="thread_id")
    if privacy.wanted(ctx):
        # EXT-11: as a turn of this key would, so extraction and summaries hide the thread's personal data too.
        await privacy_repo.mark_pseudonymized(ctx.db, ctx.org_id, thread_id)
    return written


async def append_items(ctx: RequestContext, thread_id: str, items: list[ItemIn]) -> list[dict[str, Any]]:
    row = await visible_thread(ctx, thread_id)
    _require(ctx, row, "write")
    await rules.not_erased(ctx, row["subject"])
    return [rules.item_document(i) for i in await _append(ctx, thread_id, items)]


async def list_items(ctx: RequestContext, thread_id: str, page: Page, *, descending: bool
                     ) -> tuple[list[dict[str, Any]], str | None]:
    await visible_thread(ctx, thread_id)
    rows = await repo.list_items(ctx.db, ctx.org_id, thread_id, after=page.after(int), descending=descending,
                                 limit=page.fetch(100))
    rows, next_cursor = page.cut(rows, lambda row: row["position"])
    await rules.admin_read(ctx, "GET /threads/{id}/items", object_id=thread_id, ids=[r["id"] for r in rows])
    return [rules.item_document(r) for r in rows], next_cursor


async def get_item(ctx: RequestContext, thread_id: str, item_id: str) -> dict[str, Any]:
    await visible_thread(ctx, thread_id)
    row = await repo.get_item(ctx.db, ctx.org_id, thread_id, item_id)
    if row is None:
        raise NotFound(f"Thread {thread_id!r} has no item {item_id!r}.", param="item_id")
    await rules.admin_read(ctx, "GET /threads/{id}/items/{item_id}", object_id=thread_id, ids=[item_id])
    return rules.item_document(row)


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


async def _noted_message(ctx: RequestContext, thread_id: str, item_id: str) -> dict[str, Any]:
    await visible_thread(ctx, thread_id)  # reading the thread is enough to write one's own note
    item = await repo.get_item(ctx.db, ctx.org_id, thread_id, item_id)
    if item is None:
        raise NotFound(f"Thread {thread_id!r} has no item {item_id!r}.", param="item_id")
    if item["type"] != "message":
        raise ValidationFailed("Notes are kept on messages only.", param="item_id", code="not_a_message")
    return item


async def put_note(ctx: RequestContext, thread_id: str, item_id: str, metadata: dict[str, Any]
                   ) -> dict[str, Any]:
    note = check_note(metadata)
    await _noted_message(ctx, thread_id, item_id)
    await rules.not_erased(ctx)
    await let_key_checks_keep_plans(ctx.db)  # the note's key check against `thread_items` (backend/db/plan_mode.py)
    row = await repo.put_note(ctx.db, ctx.org_id, thread_id, item_id, ctx.person or "", note)
    if row is None:  # the thread or the item went since it was read: the 404 a read now answers
        await _noted_message(ctx, thread_id, item_id)
        raise rules.unreachable(thread_id)
    return rules.note_document(row)


async def list_notes(ctx: RequestContext, thread_id: str, item_id: str) -> list[dict[str, Any]]:
    await _noted_message(ctx, thread_id, item_id)
    # A subject token sees only her own note; a key sees every person's and the organisation's.
    author = (ctx.person or "") if ctx.is_subject_token else None
    rows = await repo.list_notes(ctx.db, ctx.org_id, item_id, author)
    await rules.admin_read(ctx, "GET /threads/{id}/items/{item_id}/metadata", object_id=thread_id, ids=[item_id])
    return [rules.note_document(r) for r in rows]


async def delete_note(ctx: RequestContext, thread_id: str, item_id: str) -> None:
    await _noted_message(ctx, thread_id, item_id)
    if not await repo.delete_note(ctx.db, ctx.org_id, item_id, ctx.person or ""):
        await _noted_message(ctx, thread_id, item_id)  # a deletion meanwhile took the note: its 404 first
        raise NotFound("This request's person keeps no note on this item.", param="item_id")


# ---------------------------------------------------------------- working state (THR-11, THR-12)

async def get_state(ctx: RequestContext, thread_id: str) -> dict[str, Any]:
    await visible_thread(ctx, thread_id)
    row = await repo.get_state(ctx.db, ctx.org_id, thread_id)
    await rules.admin_read(ctx, "GET /threads/{id}/state", object_id=thread_id)
    return state_mod.document(row)


async def write_state(ctx: RequestContext, thread_id: str, *, replace: dict[str, Any] | None = None,
                      patch: Any = None, if_match: str | None = None,
                      schema: dict[str, Any] | None = None) -> dict[str, Any]:
    """PUT replaces, PATCH merges (RFC 7386); both under the row lock, so no write is lost. The result must fit
    `schema`, by default the `working_state_schema` of the thread's agent (the latest turn's that named one)."""
    row = await visible_thread(ctx, thread_id)
    _require(ctx, row, "write")
    await rules.not_erased(ctx, row["subject"])
    expected = state_mod.parse_if_match(if_match)
    current = await repo.lock_live_state(ctx.db, ctx.org_id, thread_id)
    if current is None:  # deleted (or its owner erased) since it was read
        raise rules.unreachable(thread_id)
    if expected is not None and expected != current["version"]:
        raise state_mod.stale(expected, current["version"])
    new_state = replace if replace is not None else state_mod.merge_patch(current["state"], patch)
    if schema is None:
        schema = await repo.agent_state_schema(ctx.db, ctx.org_id, thread_id)
    size = state_mod.check_state(new_state, ctx.settings.working_state_max_bytes, schema)
    written = await repo.write_state(ctx.db, ctx.org_id, thread_id, new_state, current["version"] + 1, size)
    return state_mod.document(written)


# ---------------------------------------------------------------- summaries (THR-13)

async def list_summaries(ctx: RequestContext, thread_id: str, page: Page
                         ) -> tuple[list[dict[str, Any]], str | None]:
    await visible_thread(ctx, thread_id)
    rows = await repo.list_summaries(ctx.db, ctx.org_id, thread_id, page.after(str), page.fetch())
    rows, next_cursor = page.cut(rows, lambda row: row["id"])
    await rules.admin_read(ctx, "GET /threads/{id}/summaries", object_id=thread_id, ids=[r["id"] for r in rows])
    docs = [{"id": r["id"], "from_position": r["from_position"], "to_position": r["to_position"],
             "level": r["level"], "model": r["model"], "text": r["text"], "created_at": r["created_at"]}
            for r in rows]
    return docs, next_cursor
