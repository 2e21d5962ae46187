"""Erasing a person (MEM-19): every domain that keeps something of hers contributes an eraser and its counts.

Memory's, pseudonymisation's and the threads' erasers are listed in ERASERS below (other domains add theirs with
`register_eraser`), and each eraser runs in the same transaction, under the person's exclusive lock.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from sqlalchemy.ext.asyncio import AsyncSession

from backend.access.context import RequestContext
from backend.access.subjects import check_subject_id
from backend.domains.audit import service as audit
from backend.domains.erasure import repository as erasure_repo
from backend.domains.extraction.repository import erase_subject as erase_subject_extraction
from backend.domains.memory import repository as memory_repo
from backend.domains.privacy import repository as privacy_repo
from backend.domains.proposals.repository import erase_subject as erase_subject_proposals
from backend.domains.threads.repository import erase_subject as erase_subject_threads
from backend.domains.turns.repository import erase_subject as erase_subject_turns

log = logging.getLogger(__name__)
Eraser = Callable[[AsyncSession, str, str], Awaitable[dict[str, int]]]
# Placeholders before threads: the rows of her threads would otherwise go by cascade, uncounted. Proposals before
# her records: their evidence rows go with the records by cascade, and tell whose records a proposal rests on.
# Turns and extraction windows before threads: they are found through her threads, which the threads' eraser
# deletes (windows have no foreign key to their thread).
ERASERS: list[Eraser] = [erase_subject_proposals, memory_repo.erase_subject, privacy_repo.erase_subject,
                         erase_subject_turns, erase_subject_extraction, erase_subject_threads]


def register_eraser(eraser: Eraser) -> None:
    if eraser not in ERASERS:
        ERASERS.append(eraser)


def check_may_erase(ctx: RequestContext) -> None:
    """Administrators, or a key holding `management` that names nobody; never a subject token (PLT-7)."""
    ctx.require_management()
    ctx.refuse_person_named("Erasing a person is an organisation's act: send it without naming a person.")


async def erase(ctx: RequestContext, subject_id: str) -> dict[str, int]:
    check_may_erase(ctx)
    check_subject_id(subject_id, "subject_id")
    hashed = audit.subject_hash(ctx.settings.secret, ctx.org_id, subject_id)
    assert hashed is not None
    # Writes for her hold the shared side of this lock; once we hold it, none is half done, and the
    # tombstone below turns away any work that started before this moment.
    await erasure_repo.lock_exclusive(ctx.db, ctx.org_id, hashed)
    counts: dict[str, int] = {}
    for eraser in ERASERS:
        counts.update(await eraser(ctx.db, ctx.org_id, subject_id))
    await erasure_repo.mark_erased(ctx.db, ctx.org_id, hashed)
    await ctx.audit("subject.erased", subject_id=subject_id, object_type="subject", detail={"counts": counts})
    return counts


async def erase_and_settle(ctx: RequestContext, subject_id: str) -> dict[str, int]:
    """`erase`, committed here; then the erasure's recorded time becomes the moment after its commit (see
    `erasure_repo.mark_erased`), in a transaction of its own. Needs a context whose route may commit."""
    counts = await erase(ctx, subject_id)
    await ctx.db.commit()
    hashed = audit.subject_hash(ctx.settings.secret, ctx.org_id, subject_id)
    assert hashed is not None
    try:
        await erasure_repo.settle_erased_at(ctx.db, ctx.org_id, hashed)
        await ctx.db.commit()
    except Exception:  # she is erased; only writes naming her in the next minute are refused in vain
        await ctx.db.rollback()
        log.exception("the time of an erasure that committed could not be settled")
    return counts
