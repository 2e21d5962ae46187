"""SQL of responses (TRN-1, TRN-7, TRN-8)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from sqlalchemy import Interval, bindparam, func, null, select, text, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from backend.db.models import table_of
from backend.db.models_threads import Thread
from backend.db.models_turns import Response
from backend.db.plan_mode import keep_plans_column
from backend.db.prepared import Prepared
from backend.domains.threads import item_writes
from backend.domains.usage import repository as usage

R = table_of(Response)
T = table_of(Thread)
_INSERTED = ("org_id", "id", "thread_id", "key_id", "subject", "model", "agent_id", "agent_version", "status",
             "metadata", "labels", "idempotency_owner", "idempotency_key", "request_digest", "created_at")
_FINISHED = ("status", "output", "usage", "error", "trace", "completed_at")
# What a deleted thread or an erased person leaves of a response: id, status and usage (THR-6, MEM-19, PLT-18),
# with org_id and the times (the row's key and NOT NULL columns; times say nothing of her). Everything else is SQL
# NULL (not JSON null in the JSONB columns), also the key, agent and model that served her: the usage report
# reads them from the usage rows (usage_events), which keep them. The idempotency owner names the person too
# (idempotency.owner), so it goes with the rest.
_FORGET = {column: null() for column in (R.c.thread_id, R.c.key_id, R.c.subject, R.c.agent_id, R.c.agent_version,
                                         R.c.model, R.c.output, R.c.error, R.c.trace, R.c.metadata, R.c.labels,
                                         R.c.request_digest, R.c.idempotency_owner, R.c.idempotency_key)}


# Its RETURNING also lets the accepting transaction's later writes (the input items' key checks among them) keep
# generic plans (db/plan_mode.py), a round trip fewer than a statement of its own.
_INSERT_RESPONSE = (pg_insert(R).values({c: bindparam(c) for c in _INSERTED})
                    .on_conflict_do_nothing(index_elements=[R.c.org_id, R.c.idempotency_owner, R.c.idempotency_key],
                                            index_where=R.c.idempotency_key.is_not(None))
                    .returning(func.now().label("accepted_at"), keep_plans_column().label("plans")))
_INSERT = Prepared(_INSERT_RESPONSE)  # a continued thread's turn without input items to keep


def _accepting(new_thread: bool) -> Prepared:
    """The response with the input items, appended to its thread (with `new_thread`, the thread inserted too) in
    the same statement: a round trip fewer, two for a new thread. Its first and last positions, or NULLs when the
    thread was deleted."""
    response_in = _INSERT_RESPONSE.cte("response_in")
    taken, items_in = item_writes.append_ctes(new_thread=new_thread)
    first = select(func.min(items_in.c.position)).scalar_subquery().label("first")
    last = select(func.max(items_in.c.position)).scalar_subquery().label("last")
    return Prepared(select(response_in.c.accepted_at, first, last).add_cte(taken).add_cte(items_in))


_ACCEPT = {new_thread: _accepting(new_thread) for new_thread in (False, True)}
# With the turn's usage rows (PLT-18) in the same statement, and (_FINISH_APPENDING) its output items. Only a
# response still `in_progress` is finished: one failed as abandoned meanwhile (abandoned.py) stays failed, and the
# row lock makes the later of the two see the other's write.
_FINISH_UPDATE = (update(R).where(R.c.org_id == bindparam("org_id"), R.c.id == bindparam("response_id"),
                                  R.c.status == "in_progress")
                  .values({c: bindparam(c) for c in _FINISHED}).add_cte(usage.record_many_cte()))
_FINISH = Prepared(_FINISH_UPDATE.returning(R.c.id))
_TAKEN, _APPENDED = item_writes.append_ctes()
_FINISH_APPENDING = Prepared(_FINISH_UPDATE.add_cte(_TAKEN).add_cte(_APPENDED).returning(
    select(func.count()).select_from(_APPENDED).scalar_subquery().label("appended")))


@dataclass(frozen=True)
class Accepted:
    at: datetime  # the accepting transaction's start
    positions: tuple[int, int] | None  # the input's first and last positions; None without items or a thread


async def accept(db: AsyncSession, values: dict[str, Any], items: list[dict[str, Any]],
                 new_thread: dict[str, Any] | None = None) -> Accepted | None:
    """The response (`values`) with its input `items` (rows as `item_writes.append_items` takes them) appended to
    its thread, or with `new_thread` (subject, labels, metadata) the thread opened with them: one statement. None
    when a response with the same Idempotency-Key exists or is being inserted (TRN-8). Lets the transaction keep
    plans (`_INSERT_RESPONSE`)."""
    if new_thread is None and not items:
        row = await _INSERT.first(db, values)
        return Accepted(row["accepted_at"], None) if row else None
    params = {**values, **item_writes.append_params(values["org_id"], values["thread_id"], items)}
    if new_thread is not None:
        params.update(thread_owner=new_thread["subject"], thread_labels=new_thread["labels"],
                      thread_metadata=new_thread["metadata"])
    row = await _ACCEPT[new_thread is not None].first(db, params)
    if row is None:
        return None
    return Accepted(row["accepted_at"], None if row["first"] is None else (row["first"], row["last"]))


Finished = Literal["kept", "thread_deleted", "settled"]


async def finish(db: AsyncSession, org_id: str, response_id: str, values: dict[str, Any],
                 usage_rows: list[dict[str, Any]], *, thread_id: str | None = None,
                 items: list[dict[str, Any]] | None = None) -> Finished:
    """A turn's end: status, output, usage, error, trace and completion time, and the usage rows of its model
    calls (`usage.repository.record_many`'s). With `items` (rows as `item_writes.append_items` takes them), they
    are appended to `thread_id` in the same statement. "kept"; "thread_deleted" when that thread was deleted
    meanwhile (nothing was appended); "settled" when the response is no longer `in_progress` (it was left as it
    is, but the usage rows and items may have been written). Unless "kept", the caller rolls the rest back."""
    params = {"org_id": org_id, "response_id": response_id, **values, **usage.carried_params(usage_rows)}
    if not items:
        return "kept" if await _FINISH.all(db, params) else "settled"
    assert thread_id is not None
    rows = await _FINISH_APPENDING.all(db, {**params, **item_writes.append_params(org_id, thread_id, items)})
    if not rows:
        return "settled"
    return "kept" if rows[0]["appended"] == len(items) else "thread_deleted"


async def add_usage(db: AsyncSession, org_id: str, response_id: str, spent: dict[str, int]) -> dict[str, Any] | None:
    """TRN-11: what a turn that finished after its response was settled (failed as abandoned) cost, on that
    response; the row as it is now."""
    row = (await db.execute(update(R).where(R.c.org_id == org_id, R.c.id == response_id).values(usage=spent)
                            .returning(*R.c))).mappings().first()
    return dict(row) if row else None


async def mark_failed(db: AsyncSession, org_id: str, response_id: str, values: dict[str, Any]) -> None:
    await db.execute(update(R).where(R.c.org_id == org_id, R.c.id == response_id)
                     .values({"completed_at": func.now(), **values}))


# The row lock makes a turn finishing right now win: the WHERE is checked again once it has committed.
_FAIL_ABANDONED = (update(R).where(R.c.org_id == bindparam("in_org"), R.c.id == bindparam("response_id"),
                                   R.c.status == "in_progress",
                                   R.c.created_at < func.now() - bindparam("longest", type_=Interval()))
                   .values(status="failed", error=bindparam("failure", type_=R.c.error.type), completed_at=func.now())
                   .returning(*R.c))


async def fail_abandoned(db: AsyncSession, org_id: str, response_id: str, longest: timedelta,
                         error: dict[str, Any]) -> dict[str, Any] | None:
    """TRN-11: the response failed with `error` when it is still `in_progress` though accepted longer than
    `longest` ago (its process stopped); the row as it is now, or None when it was not."""
    row = (await db.execute(_FAIL_ABANDONED, {"in_org": org_id, "response_id": response_id, "longest": longest,
                                              "failure": error})).mappings().first()
    return dict(row) if row else None


async def get(db: AsyncSession, org_id: str, response_id: str) -> dict[str, Any] | None:
    row = (await db.execute(select(R).where(R.c.org_id == org_id, R.c.id == response_id))).mappings().first()
    return dict(row) if row else None


async def by_idempotency_key(db: AsyncSession, org_id: str, owner: str, key: str, *, lock: bool = False
                             ) -> dict[str, Any] | None:
    query = select(R).where(R.c.org_id == org_id, R.c.idempotency_owner == owner, R.c.idempotency_key == key)
    if lock:
        query = query.with_for_update()
    row = (await db.execute(query)).mappings().first()
    return dict(row) if row else None


async def forget_thread(db: AsyncSession, org_id: str, thread_id: str) -> None:
    await db.execute(update(R).where(R.c.org_id == org_id, R.c.thread_id == thread_id)
                     .values(_FORGET))


# Her id as a label value of other responses (THR-5 copied their thread's labels, a `participants` list, say) is
# personal data too: taken out as the threads eraser takes it out of thread labels (a list loses her id, and is
# dropped once empty; a label whose value is her id is dropped).
_UNLABEL = text("""
UPDATE responses SET labels = (
    SELECT coalesce(jsonb_object_agg(e.name, CASE WHEN jsonb_typeof(e.value) = 'array'
                                                  THEN e.value - CAST(:who AS text) ELSE e.value END), '{}'::jsonb)
    FROM jsonb_each(responses.labels) AS e(name, value)
    WHERE e.value <> to_jsonb(CAST(:who AS text))
      AND NOT (jsonb_typeof(e.value) = 'array' AND e.value - CAST(:who AS text) = '[]'::jsonb))
WHERE org_id = :org_id AND EXISTS (
    SELECT 1 FROM jsonb_each(responses.labels) AS e(name, value)
    WHERE e.value = to_jsonb(CAST(:who AS text)) OR e.value @> jsonb_build_array(CAST(:who AS text)))
RETURNING id""")


async def erase_subject(db: AsyncSession, org_id: str, subject_id: str) -> dict[str, int]:
    """MEM-19: her turns and the turns of her threads keep only id, status and usage; other turns lose her id
    from their labels."""
    her_threads = select(T.c.id).where(T.c.org_id == org_id, T.c.subject == subject_id)
    # Every one of them, also a turn still running (its row holds her id before it holds any output).
    result = await db.execute(update(R).where(R.c.org_id == org_id,
                                              (R.c.subject == subject_id) | R.c.thread_id.in_(her_threads))
                              .values(_FORGET).returning(R.c.id))
    unlabelled = await db.execute(_UNLABEL, {"org_id": org_id, "who": subject_id})
    return {"responses": len(result.all()), "labelled_responses": len(unlabelled.all())}
