"""Knowledge indexes (PLT-13). An index the key's policy does not name is absent: 404."""

from __future__ import annotations

from typing import Any

import msgspec
from sqlalchemy.ext.asyncio import AsyncSession

from backend.access.principal import Principal
from backend.access.scope import Scope
from backend.domains.audit import service as audit
from backend.domains.indexes import repository as repo
from backend.errors import Conflict, Forbidden, NotFound
from backend.ids import new_id
from shared.schemas.platform import IndexCreate


def index_document(row: dict[str, Any]) -> dict[str, Any]:
    return {"id": row["id"], "name": row["name"], "embedding": row["embedding"], "created_at": row["created_at"]}


def _no_subject_token(principal: Principal) -> None:
    if principal.kind == "subject_token":
        raise Forbidden("A subject token cannot create or delete indexes.", code="subject_token_forbidden")


async def reachable(db: AsyncSession, scope: Scope, index_id: str, param: str = "index_id") -> dict[str, Any]:
    row = await repo.get(db, scope, index_id)
    if row is None:
        raise NotFound(f"No index {index_id!r} is reachable with this credential.", param=param)
    return row


async def embedding_indexes(db: AsyncSession, scope: Scope) -> list[dict[str, Any]]:
    """Every index the scope reaches whose records are embedded."""
    return await repo.embedding_indexes(db, scope)


async def create(db: AsyncSession, principal: Principal, scope: Scope, body: IndexCreate,
                 secret: str) -> dict[str, Any]:
    principal.require("knowledge")
    _no_subject_token(principal)
    if await repo.name_taken(db, scope.org_id, body.name):
        raise Conflict(f"An index named {body.name!r} exists already.", param="name", code="name_taken")
    row = await repo.insert_index(db, {"org_id": scope.org_id, "id": new_id("idx"), "name": body.name,
                                       "embedding": msgspec.to_builtins(body.embedding)})
    await audit.record(db, org_id=scope.org_id, actor=principal.actor, action="index.created", secret=secret,
                       object_type="index", object_id=row["id"], detail={"name": body.name})
    return row


async def delete(db: AsyncSession, principal: Principal, scope: Scope, index_id: str, secret: str) -> None:
    principal.require("knowledge")
    _no_subject_token(principal)
    row = await reachable(db, scope, index_id)
    await repo.delete_index(db, scope.org_id, index_id)
    await audit.record(db, org_id=scope.org_id, actor=principal.actor, action="index.deleted", secret=secret,
                       object_type="index", object_id=index_id, detail={"name": row["name"]})
