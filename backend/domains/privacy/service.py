"""Pseudonymisation for turns and extraction (TRN-10, EXT-11): open a thread's pseudonymizer, store what a
turn added, mark the thread.

The calling code (a turn, an extraction window) follows one order, so that nothing unhidden leaves and every
placeholder a model saw is the stored one:

    pz = await open_pseudonymizer(ctx, thread_id)          # thread_id None: a new or unstored conversation
    hidden = [pz.hide(text) for text in texts]             # hide_json for tool arguments and outputs
    if stored and await store(ctx, thread_id, pz):         # a concurrent turn numbered a value first:
        hidden = [pz.hide(text) for text in texts]         #   hide again with the stored placeholders
    ... send `hidden` to the model ...
    answer = pz.restore(model_text)                        # restore_json for tool-call arguments

A turn that stores nothing (`store: false`) never calls `store`: its mapping lives in memory only.
"""

from __future__ import annotations

from types import EllipsisType

from backend.access.context import RequestContext
from backend.domains.erasure.guard import refuse_if_erased
from backend.domains.privacy import repository as repo
from backend.providers.pii import Pseudonymizer, detector_for, known_from_attributes


def wanted(ctx: RequestContext) -> bool:
    """A key with `privacy.pseudonymize` hides personal data from its models (its turns, and extraction and
    summaries of the threads it writes in)."""
    privacy = (ctx.principal.key or {}).get("privacy") or {}
    return bool(privacy.get("pseudonymize"))


async def open_pseudonymizer(ctx: RequestContext, thread_id: str | None, *,
                             subject: str | EllipsisType | None = ...) -> Pseudonymizer:
    """The thread's stored placeholders (none for `thread_id` None) with the configured detector; the request's
    person's name, e-mail address and phone number from her attributes are hidden wherever they appear.
    `subject` overrides whom new values are attributed to (default: the request's person)."""
    person = ctx.principal.subject
    detector = detector_for(ctx.settings.pii_detector)
    entries = await repo.load(ctx.db, ctx.org_id, thread_id) if thread_id is not None else []
    known = known_from_attributes(person.attributes if person else None, ctx.person)
    who = ctx.person if isinstance(subject, EllipsisType) else subject
    return Pseudonymizer(detector, entries, known=known, subject=who)


async def store(ctx: RequestContext, thread_id: str, pz: Pseudonymizer) -> bool:
    """Save the placeholders this turn added and mark the thread (EXT-11), in the caller's transaction.
    True when a concurrent turn of the same thread had stored one of the values (or taken its number) first:
    `pz` now holds the stored placeholders, and text hidden before must be hidden again."""
    new = pz.new_entries()
    await repo.mark_pseudonymized(ctx.db, ctx.org_id, thread_id)
    if not new:
        return False
    # The rows name people (who wrote the value, whose attribute it is): an erasure in flight must win.
    people = {e.subject for e in new} | {e.belongs_to for e in new}
    await refuse_if_erased(ctx.db, ctx.org_id, ctx.settings.secret, people)
    return pz.adopt(await repo.save_new(ctx.db, ctx.org_id, thread_id, new))
