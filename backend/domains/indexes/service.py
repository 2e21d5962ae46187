"""Knowledge indexes (PLT-13). An index the key's policy does not name is absent: 404."""

from __future__ import annotations

import time
from typing import Any

import msgspec
from sqlalchemy.ext.asyncio import AsyncSession

from backend.access.context import RequestContext
from backend.access.scope import Scope
from backend.domains.extraction.queue import queue_reembed
from backend.domains.indexes import repository as repo
from backend.errors import Conflict, Forbidden, NotFound, ValidationFailed
from backend.ids import new_id
from backend.providers import local_embeddings
from backend.providers.urls import unusable_url
from shared.schemas.platform import UNSET, EmbeddingConfig, IndexCreate, IndexPatch


def index_document(row: dict[str, Any]) -> dict[str, Any]:
    return {"id": row["id"], "name": row["name"], "embedding": row["embedding"], "created_at": row["created_at"]}


async def reachable(db: AsyncSession, scope: Scope, index_id: str, param: str = "index_id") -> dict[str, Any]:
    row = await repo.get(db, scope, index_id)
    if row is None:
        raise NotFound(f"No index {index_id!r} is reachable with this credential.", param=param)
    return row


async def reachable_with_store_types(db: AsyncSession, scope: Scope, index_id: str, param: str = "index_id"
                                     ) -> dict[str, Any]:
    """`reachable`, with the types its write tool takes when the store has an extraction switch (`store_types`)."""
    row = await repo.get_with_store_types(db, scope, index_id)
    if row is None:
        raise NotFound(f"No index {index_id!r} is reachable with this credential.", param=param)
    return row


def check_base_url(url: str) -> None:
    """An embedding server's address: http or https with a host, no spaces or control characters (the SDK refuses
    those only when a search first calls it, which would fail every search of the index)."""
    wrong = unusable_url(url)
    if wrong is not None:
        raise ValidationFailed(f"The embedding server's address cannot be used: {wrong}. Send an http(s) URL such "
                               "as http://127.0.0.1:11434/v1.", param="embedding.base_url")


async def embedding_indexes(db: AsyncSession, scope: Scope) -> list[dict[str, Any]]:
    """Every index the scope reaches whose records are embedded."""
    return await repo.embedding_indexes(db, scope)


def check_embedding(setting: EmbeddingConfig | None) -> None:
    """A `local` setting names a model this installation has, with that model's dimensions; a `base_url` is a plain
    http(s) address (PLT-13)."""
    if setting is None:
        return
    if setting.base_url is not None:
        check_base_url(setting.base_url)
    if setting.provider != "local":
        return
    model = local_embeddings.MODELS.get(setting.model)
    if model is None:
        known = ", ".join(sorted(local_embeddings.MODELS))
        raise ValidationFailed(f"No local embedding model {setting.model!r}; the local models are: {known}.",
                               param="embedding.model")
    if setting.dimensions != model.dimensions:
        raise ValidationFailed(f"The local model {model.name!r} makes {model.dimensions}-dimensional vectors.",
                               param="embedding.dimensions")
    if not local_embeddings.installed(model.name):
        raise ValidationFailed(local_embeddings.missing_extra_message(model.name), param="embedding.provider",
                               code="embedding_extra_missing")


async def check_name_free(ctx: RequestContext, name: str) -> None:
    """Names are unique across the organisation, so only a credential that reaches every index may give one: for a
    key whose policy lists indexes, a clash would reveal an index that must stay absent to it (PLT-10)."""
    if ctx.scope.indexes is not None:
        raise Forbidden("This key's policy names only some indexes, and an index's name must differ from every "
                        "index of the organisation: create or rename indexes as an administrator or with a key "
                        'whose policy has `"indexes": ["*"]`.', param="name", code="index_naming_needs_every_index")
    if await repo.name_taken(ctx.db, ctx.org_id, name):
        raise name_taken(name)


def name_taken(name: str) -> Conflict:
    return Conflict(f"An index named {name!r} exists already; choose another name.", param="name", code="name_taken")


async def create(ctx: RequestContext, body: IndexCreate) -> dict[str, Any]:
    ctx.require("knowledge")
    ctx.principal.refuse_subject_token("create or delete indexes")
    check_embedding(body.embedding)
    scope = ctx.scope
    await check_name_free(ctx, body.name)
    row = await repo.insert_index(ctx.db, {"org_id": scope.org_id, "id": new_id("idx"), "name": body.name,
                                           "embedding": msgspec.to_builtins(body.embedding)})
    if row is None:  # created by another request since the check
        raise name_taken(body.name)
    await ctx.audit("index.created", object_type="index", object_id=row["id"], detail={"name": body.name})
    return row


async def update(ctx: RequestContext, index_id: str, body: IndexPatch) -> dict[str, Any]:
    """Rename an index or change its embedding setting (PLT-13). A new setting is validated as at creation; the
    records keep their vectors of the old setting, which search and injection no longer compare (their words
    still find them), and the periodic re-embedding job is queued in this transaction to replace them."""
    ctx.require("knowledge")
    ctx.principal.refuse_subject_token("change indexes")
    row = await reachable(ctx.db, ctx.scope, index_id)
    values: dict[str, Any] = {}
    if body.name is not UNSET and body.name != row["name"]:
        await check_name_free(ctx, body.name)
        values["name"] = body.name
    if body.embedding is not UNSET:
        check_embedding(body.embedding)
        setting = msgspec.to_builtins(body.embedding)
        if setting != row["embedding"]:
            values["embedding"] = setting
    if not values:
        return row
    updated = await repo.update_index(ctx.db, ctx.org_id, index_id, values)
    if updated is None:  # the name was taken by another request since the check
        raise name_taken(values["name"])
    detail: dict[str, Any] = {"fields": sorted(values)}
    if "embedding" in values:
        detail["embedding"] = {"from": _setting_name(row["embedding"]), "to": _setting_name(updated["embedding"])}
        if updated["embedding"] is not None:
            # One waiting run at most (the periodic one shares the lock): it embeds every record of the new setting.
            await queue_reembed(ctx.db, int(time.time()))
    await ctx.audit("index.updated", object_type="index", object_id=index_id, detail=detail)
    return updated


def _setting_name(setting: Any) -> str | None:
    """provider/model/dimensions, as the audit trail names a setting (no server address)."""
    if not isinstance(setting, dict):
        return None
    return "/".join(str(setting.get(k)) for k in ("provider", "model", "dimensions"))


async def delete(ctx: RequestContext, index_id: str) -> None:
    ctx.require("knowledge")
    ctx.principal.refuse_subject_token("create or delete indexes")
    row = await reachable(ctx.db, ctx.scope, index_id)
    await repo.delete_index(ctx.db, ctx.org_id, index_id)
    await ctx.audit("index.deleted", object_type="index", object_id=index_id, detail={"name": row["name"]})
