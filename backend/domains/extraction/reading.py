"""Reading one window (EXT-8 … EXT-11), for the read job (backend/jobs/extraction.py).

Per window the job owns three transactions: `next_window` reads the window, the thread's items and the person's
current records (and parks or fails a window that cannot be read); `ask_model` calls the model with no
transaction open; `store_window` writes the records, their history and the window's `ready` mark together,
under the window's row lock. A window no longer `queued` is done: a retried job, or a second worker, writes
nothing twice. Work that began before a person was erased never writes her back (MEM-19).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

import msgspec
from sqlalchemy import exc as sa_exc

from backend.access.actor import Actor
from backend.access.context import RequestContext
from backend.access.principal import ALL_CAPABILITIES, Principal
from backend.access.subjects import Subject
from backend.domains.compaction import repository as items_repo
from backend.domains.erasure.guard import refuse_if_erased
from backend.domains.extraction import answer as prompt
from backend.domains.extraction import repository as repo
from backend.domains.extraction.apply import apply, confirm
from backend.domains.extraction.episodes import Session, session_of, write_episode, write_lessons
from backend.domains.extraction.planning import at_cap
from backend.domains.extraction.switch import state_of
from backend.domains.models import repository as models_repo
from backend.domains.models.service import spec_of
from backend.domains.privacy.messages import hide_texts_aside
from backend.domains.privacy.service import open_pseudonymizer
from backend.domains.usage import repository as usage
from backend.errors import ApiError, BadRequest, Conflict, Forbidden, NotFound
from backend.providers.chat import CallOptions, ChatAnswer, ModelError, ModelSpec, complete
from backend.providers.pii import PiiUnavailable, Pseudonymizer

JOB = "extraction"  # the usage rows' `job`
RECORDS_SENT = 50  # the person's current records the model sees, newest first
MAX_MODEL_ATTEMPTS = 5  # a window whose model call failed this often fails with the model's error code
NO_CAPABILITIES = "The switch's author may not read threads or write memory: give its key `threads` and `memory`."
SKIP = "skip"  # the window was parked, failed or forgotten while being read: go on to the next one


@dataclass(frozen=True)
class WindowWork:
    """One window to read: what the model is sent and what writing its answer needs."""

    org_id: str
    index_id: str
    window_id: str
    thread_id: str
    person: str | None
    first_item_id: str
    last_item_id: str
    model: ModelSpec
    messages: tuple[dict[str, Any], ...]
    response_format: dict[str, Any]
    types: tuple[str, ...]
    author: Principal
    pz: Pseudonymizer | None
    people: tuple[str, ...]  # whose words it holds: checked against erasure when it is written
    started_at: datetime
    session: Session | None = None  # set on the window that ends a session with `episodes` on (EXT-12)
    lessons: bool = False  # the session's lessons are asked for too (EXT-13)
    timeout_seconds: float = 60.0  # CORE_MODEL_TIMEOUT_SECONDS of the job's settings (EXT-1)

    @property
    def key_id(self) -> str | None:
        return self.author.key_id

    def restore(self, text: str | None) -> str | None:
        """Real values back in place of the placeholders the model saw (EXT-11)."""
        return self.pz.restore(text) if self.pz is not None and text is not None else text

    def provenance(self) -> dict[str, Any]:
        return {"thread_id": self.thread_id, "window_id": self.window_id, "first_item_id": self.first_item_id,
                "last_item_id": self.last_item_id}


async def author_principal(ctx: RequestContext, switch: dict[str, Any], person: str | None) -> Principal | None:
    """The switch's author acting for the thread's person (EXT-3): her records are written as that key's."""
    subject = Subject(person) if person is not None else None
    if switch["author_type"] == "admin":
        admin = await repo.admin_row(ctx.db, ctx.org_id, switch["author_id"])
        return None if admin is None else Principal("admin", ctx.org_id, Actor("admin", admin["id"]),
                                                    ALL_CAPABILITIES, subject, admin=admin)
    key = await repo.key_row(ctx.db, ctx.org_id, switch["author_id"])
    return None if key is None else Principal("key", ctx.org_id, Actor("key", key["id"]),
                                              frozenset(key["capabilities"]), subject, key=key)


async def next_window(ctx: RequestContext, index_id: str, thread_id: str) -> WindowWork | str | None:
    """The thread's oldest queued window, ready to send; SKIP when it could not be read (it was parked, failed or
    its thread is gone), None when nothing is to be read now (none queued, or the switch cannot run)."""
    db, org_id = ctx.db, ctx.org_id
    switch = await repo.get_switch(db, org_id, index_id)
    if switch is None or await state_of(ctx, switch) != "active":
        return None
    window = await repo.next_queued(db, org_id, index_id, thread_id)
    if window is None:
        return None
    thread = await repo.thread_row(db, org_id, thread_id)
    if thread is None:
        await repo.forget_thread(db, org_id, thread_id)
        return SKIP
    if await at_cap(ctx):
        await repo.park_thread(db, org_id, index_id, thread_id)
        return SKIP
    person = thread["subject"]
    author = await author_principal(ctx, switch, person)
    acting = ctx.acting_as(author) if author is not None else None  # the window is read and written as its author
    refusal = NO_CAPABILITIES if acting is None else author_refusal(acting, index_id)
    if acting is None or refusal is not None:  # known before the model is asked: no tokens spent for nothing
        await fail(ctx, window["id"], "permission_denied", refusal or NO_CAPABILITIES)
        return SKIP
    model = await models_repo.find(db, org_id, switch["model"])
    assert model is not None  # state_of checked it in this transaction
    items = await items_repo.items_between(db, org_id, thread_id, window["first_position"], window["last_position"])
    lines = [text for text in (prompt.line(item) for item in items) if text is not None]
    records = await repo.current_records(db, acting.scope, index_id, person, switch["types"], RECORDS_SENT)
    pz = None
    if thread["pseudonymized"]:
        try:
            pz = await open_pseudonymizer(acting, thread_id)
            hidden = await hide_texts_aside(pz, [*lines, *(r["text"] for r in records)])  # off the worker's loop
            lines, records = hidden[:len(lines)], [{**r, "text": t} for r, t in zip(records, hidden[len(lines):],
                                                                                   strict=True)]
        except PiiUnavailable as exc:
            await fail(ctx, window["id"], "pii_unavailable", str(exc))
            return SKIP
    today = datetime.now(ZoneInfo(ctx.org.get("timezone") or "UTC")).date()
    session = None
    if switch["episodes"] and window["session_first_position"] is not None:
        session = await session_of(ctx, thread_id, window["session_first_position"], window["last_position"])
    episodes, lessons = session is not None, session is not None and switch["lessons"] and person is not None
    messages = prompt.messages(instructions=switch["instructions"], types=switch["types"], today=today, lines=lines,
                               records=records, episodes=episodes, lessons=lessons)
    people = {person, *(item["subject"] for item in items)} - {None}
    return WindowWork(org_id, index_id, window["id"], thread_id, person, items[0]["id"] if items else "",
                      items[-1]["id"] if items else "", spec_of(model), tuple(messages),
                      prompt.schema(switch["types"], episodes=episodes, lessons=lessons),
                      tuple(switch["types"]), acting.principal, pz, tuple(sorted(people)), thread["now"], session,
                      lessons, ctx.settings.model_timeout_seconds)


def author_refusal(acting: RequestContext, index_id: str) -> str | None:
    """Why the switch's author (`acting`: the request as its author) can no longer write this store's records
    (EXT-3, EXT-5), or None. What its policy says of each record is judged when the record is written."""
    if not {"threads", "memory"} <= acting.principal.capabilities:
        return NO_CAPABILITIES
    if not acting.management_scope.reaches_index(index_id):
        return (f"The switch's author key's policy no longer reaches index {index_id!r}: add it to the policy's "
                "`indexes`, or send the switch again with a key that reaches it.")
    try:
        acting.scope  # noqa: B018 - a policy requiring a person refuses a thread that names nobody
    except ApiError as refused:
        return refused.message
    return None


async def ask_model(work: WindowWork) -> ChatAnswer:
    """The model's answer; ModelError when the call fails (retried by the job queue with backoff). No retries in
    the SDK: a failed call counts an attempt on the window, which has its own limit (EXT-8)."""
    options = CallOptions(timeout_seconds=work.timeout_seconds, max_retries=0, response_format=work.response_format,
                          temperature=0.0)
    return await complete(work.model, work.messages, options=options)


async def fail(ctx: RequestContext, window_id: str, code: str, message: str) -> None:
    await repo.finish_window(ctx.db, ctx.org_id, window_id, {"state": "failed", "error_code": code,
                                                             "error": message[:1000]})


async def meter(ctx: RequestContext, work: WindowWork, input_tokens: int, output_tokens: int) -> None:
    """Tokens are metered to the switch's author (EXT-3, PLT-18), spent whatever came of the call."""
    if input_tokens or output_tokens:
        await usage.record(ctx.db, org_id=ctx.org_id, model=work.model.id, input_tokens=input_tokens,
                           output_tokens=output_tokens, key_id=work.key_id, job=JOB)


async def model_failed(ctx: RequestContext, work: WindowWork, error: ModelError) -> bool:
    """Count a failed call on its window; True when the window failed for good (a malformed answer, or too many
    attempts), False when the job should be retried later."""
    window = await repo.window(ctx.db, ctx.org_id, work.window_id, lock=True)
    await meter(ctx, work, error.input_tokens, error.output_tokens)
    if window is None or window["state"] != "queued":
        return True
    attempts = window["attempts"] + 1
    if error.code == "invalid_model_output" or attempts >= MAX_MODEL_ATTEMPTS:
        await repo.finish_window(ctx.db, ctx.org_id, work.window_id, {
            "state": "failed", "attempts": attempts, "error_code": error.code, "error": error.message[:1000]})
        return True
    await repo.finish_window(ctx.db, ctx.org_id, work.window_id, {"attempts": attempts, "error": error.message[:1000]})
    return False


def transient(error: BaseException) -> bool:
    """A database error that may pass (connection lost, deadlock, serialization failure, pool timeout): the job is
    retried for it, as for a failed model call, rather than the window failed."""
    return isinstance(error, sa_exc.OperationalError | sa_exc.InterfaceError | sa_exc.TimeoutError)


def _causes(error: BaseException) -> list[BaseException]:
    found: list[BaseException] = []
    at: BaseException | None = error
    while at is not None and at not in found:
        found.append(at)
        at = at.__cause__ or at.__context__
    return found


async def unexpected(ctx: RequestContext, work: WindowWork, error: Exception, answer: ChatAnswer | None) -> str:
    """Fail the window on an error nothing else handled while it was asked or stored (the transaction that raised
    it is gone), metering the answer's tokens with it in this one transaction; the code it failed with. Retrying
    would only repeat it until the job dies with the window `queued` and nothing in the health data (EXT-4)."""
    window = await repo.window(ctx.db, ctx.org_id, work.window_id, lock=True)
    if window is None or window["state"] != "queued":
        return "done"
    if answer is not None:
        try:
            async with ctx.db.begin_nested():
                await meter(ctx, work, answer.input_tokens, answer.output_tokens)
        except sa_exc.DataError:  # counts no integer column holds (what failed the store): the window fails still
            pass
    causes = _causes(error)
    if isinstance(error, ApiError):
        code, message = _error_code(error), error.message
    elif any(isinstance(e, sa_exc.DataError | UnicodeError | msgspec.MsgspecError) for e in causes):
        # the database refused a value the answer holds (or it has no UTF-8 form): the answer cannot be stored
        code, message = "invalid_model_output", f"The model's answer holds what cannot be stored: {causes[-1]}"
    else:
        code, message = "internal_error", (f"Reading the window stopped on an unexpected error on our side "
                                           f"({type(error).__name__}); the worker's log has it.")
    await fail(ctx, work.window_id, code, message)
    return code


def _error_code(error: ApiError) -> str:
    if isinstance(error, Conflict) and error.code == "subject_erased":
        return "subject_erased"
    if isinstance(error, Forbidden | BadRequest):  # the policy, a capability, or a person the key must name
        return "permission_denied"
    if isinstance(error, NotFound):
        # Every target_id was found among the person's current records before writing (store_window), so what
        # the author cannot find now is out of its reach, not something the model made up.
        return "permission_denied"
    return "invalid_model_output"


async def store_window(ctx: RequestContext, work: WindowWork, answer: ChatAnswer) -> str:
    """Write the window's records and mark it `ready` in this one transaction (or fail it); the window's state
    after, or "done" when another attempt had finished it already."""
    db, org_id = ctx.db, ctx.org_id
    try:  # the erasure lock before any row lock, in the erasure's own order (the other order deadlocks with it)
        await refuse_if_erased(db, org_id, ctx.settings.secret, work.people, started_at=work.started_at)
        erased = None
    except Conflict as error:
        erased = error
    window = await repo.window(db, org_id, work.window_id, lock=True)
    if window is None or window["state"] != "queued":
        return "done"
    await meter(ctx, work, answer.input_tokens, answer.output_tokens)
    if await repo.thread_row(db, org_id, work.thread_id, share_lock=True) is None:
        await repo.forget_thread(db, org_id, work.thread_id)
        return "forgotten"
    if erased is not None:
        await fail(ctx, work.window_id, "subject_erased", erased.message)
        return "failed"
    try:
        parsed = prompt.parse(answer.content, episodes=work.session is not None, lessons=work.lessons)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        await fail(ctx, work.window_id, "invalid_model_output", f"The model's answer is not the asked shape: {exc}")
        return "failed"
    targets = [m.target_id for m in parsed.memories if m.action != "new"]
    if None in targets:
        await fail(ctx, work.window_id, "invalid_model_output", "A confirmation or correction names no target_id.")
        return "failed"
    owned = await repo.owned_active(db, org_id, work.index_id, work.person, [t for t in targets if t])
    strange = sorted({t for t in targets if t and t not in owned})
    if strange:
        await fail(ctx, work.window_id, "invalid_model_output",
                   f"target_id {strange[0]!r} is not a current record of the thread's person.")
        return "failed"
    try:
        async with db.begin_nested():
            acting = ctx.acting_as(work.author)
            counts = await apply(acting, work, parsed)
            if work.session is not None:
                await write_episode(acting, work, work.session, parsed.episode)
                counts["written"] += 1
            if work.lessons and parsed.lessons:
                for name, n in (await write_lessons(acting, work, parsed.lessons, confirm)).items():
                    counts[name] += n
    except ApiError as error:
        await fail(ctx, work.window_id, _error_code(error), error.message)
        return "failed"
    await repo.finish_window(db, org_id, work.window_id, {"state": "ready", "error_code": None, "error": None,
                                                          **counts})
    return "ready"
