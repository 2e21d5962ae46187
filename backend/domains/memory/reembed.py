"""Re-embedding (PLT-13): records of an embedding index without a vector of its current model get one.

A write embeds its records in the request; when the provider fails, the record is kept without a vector and is
found by its words only. When an index's embedding setting changes (another model), its records' vectors are of
the old model: search leaves them out (it compares only vectors whose `embedding_model` is the index's current
setting), and re-embedding replaces them. `coremem memory reembed` does both once the provider answers.
Each batch is one transaction: its rows are locked (`SKIP LOCKED`, so two runs never embed the same record
twice), embedded, and written back unless their text changed meanwhile. Only the vector changes: no
history version, no new `updated_at` (so decay does not restart), no change a reader of the record sees.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pgvector.sqlalchemy import Vector
from sqlalchemy import ColumnElement, Text, and_, bindparam, cast, func, or_, select, update
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from backend.access.actor import CLI_ACTOR, Actor
from backend.db.models import KnowledgeIndex, table_of
from backend.db.tenant import every_org_id, use_org
from backend.domains.audit.service import record as audit_record
from backend.domains.memory.expressions import R
from backend.providers.embeddings import EmbeddingError, fingerprint, provider_for

IDX = table_of(KnowledgeIndex)
log = logging.getLogger("coremem.memory")
BATCH = 256


@dataclass
class Outcome:
    org_id: str
    index_id: str
    embedded: int = 0
    left: int = 0  # still without a vector after this run
    error: str | None = None  # what the provider said when it failed


def _current_model() -> ColumnElement[str]:
    """The index's setting as `embeddings.fingerprint` writes it: provider/model/dimensions."""
    setting = IDX.c.embedding
    return cast(func.concat_ws("/", setting.op("->>")("provider"), setting.op("->>")("model"),
                               setting.op("->>")("dimensions")), Text)


def _stale(model: ColumnElement[str] | str) -> ColumnElement[bool]:
    """A record without a vector, or with one of another model than `model`."""
    return or_(R.c.embedding.is_(None), R.c.embedding_model.is_distinct_from(model))


async def pending(db: AsyncSession, org_id: str | None = None,
                  index_id: str | None = None) -> list[dict[str, Any]]:
    """Embedding indexes with records lacking a vector of the current model: org_id, id, embedding (the setting)
    and `missing`."""
    missing = func.count(R.c.id).label("missing")
    query = (select(IDX.c.org_id, IDX.c.id, IDX.c.embedding, missing)
             .join(R, and_(R.c.org_id == IDX.c.org_id, R.c.index_id == IDX.c.id))
             # An index without embeddings may hold JSON null rather than SQL NULL: only objects are settings.
             .where(func.jsonb_typeof(IDX.c.embedding) == "object", _stale(_current_model()))
             .group_by(IDX.c.org_id, IDX.c.id, IDX.c.embedding).order_by(IDX.c.org_id, IDX.c.id))
    if index_id is not None:
        query = query.where(IDX.c.id == index_id)
    found = []
    for org in [org_id] if org_id is not None else await every_org_id(db):  # row-level security: one at a time
        await use_org(db, org)
        found += [dict(r._mapping) for r in (await db.execute(query.where(IDX.c.org_id == org))).all()]
    return found


async def embed_batch(db: AsyncSession, index: Mapping[str, Any], after_id: str, batch: int = BATCH, *,
                      ids: Sequence[str] | None = None) -> tuple[int, str | None, str | None]:
    """Embed up to `batch` records of the index without a vector of its model, ids above `after_id` (and among
    `ids` when given), in this transaction.

    Returns (records embedded, the last id read or None when there was none left, the provider's error)."""
    model = str(fingerprint(index["embedding"]))
    which = [R.c.org_id == index["org_id"], R.c.index_id == index["id"], _stale(model), R.c.id > after_id]
    if ids is not None:
        which.append(R.c.id == func.any(bindparam("ids", list(ids), type_=ARRAY(Text))))
    rows = (await db.execute(
        select(R.c.id, R.c.text).where(*which).order_by(R.c.id).limit(batch).with_for_update(skip_locked=True))
    ).all()
    if not rows:
        return 0, None, None
    provider = provider_for(index["embedding"])
    assert provider is not None  # `pending` lists embedding indexes only
    try:
        vectors = await provider.embed([r.text for r in rows])
    except EmbeddingError as exc:
        return 0, rows[-1].id, str(exc)
    statement = (update(R).where(R.c.org_id == index["org_id"], R.c.id == bindparam("record_id"),
                                 R.c.text == bindparam("seen_text"), _stale(model))
                 .values(embedding=bindparam("vector", type_=Vector()), embedding_model=model))
    result = await db.execute(statement, [{"record_id": r.id, "seen_text": r.text, "vector": v}
                                          for r, v in zip(rows, vectors, strict=True)])
    return int(result.rowcount or 0), rows[-1].id, None  # type: ignore[attr-defined]


async def run(sessions: async_sessionmaker[AsyncSession], secret: str, *, org_id: str | None = None,
              index_id: str | None = None, batch: int = BATCH,
              advance: Callable[[int], None] | None = None, actor: Actor = CLI_ACTOR) -> list[Outcome]:
    """Every pending index, batch by batch; an index whose provider fails is left after its first failure (the
    next run tries again). Each index that got vectors records one `memory.embedded` audit event."""
    async with sessions() as db:
        indexes = await pending(db, org_id, index_id)
    outcomes = []
    for index in indexes:
        outcome = Outcome(index["org_id"], index["id"])
        after = ""
        while True:
            try:
                async with sessions() as db:
                    await use_org(db, index["org_id"])
                    async with db.begin():
                        done, last, error = await embed_batch(db, index, after, batch)
            except Exception as exc:  # one index's failure (its batch rolled back) must not stop the others
                log.exception("re-embedding index %s of %s failed", index["id"], index["org_id"])
                done, last, error = 0, None, f"{type(exc).__name__}: {exc}"
            outcome.embedded += done
            if advance is not None:
                advance(done)
            if error is not None:
                outcome.error = error
                break
            if last is None:
                break
            after = last
        async with sessions() as db, db.begin():  # `pending` sets the organisation
            outcome.left = next((p["missing"] for p in await pending(db, index["org_id"], index["id"])), 0)
            if outcome.embedded:
                await audit_record(db, org_id=outcome.org_id, actor=actor, action="memory.embedded",
                                   secret=secret, object_type="index", object_id=outcome.index_id,
                                   detail={"embedded": outcome.embedded, "left": outcome.left})
        outcomes.append(outcome)
    return outcomes
