"""The model registry (EXT-1): which chat models an organisation is offered, and the spec a call needs."""

from __future__ import annotations

from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from backend.access.context import RequestContext
from backend.domains.models import repository as repo
from backend.domains.orgs import repository as orgs_repo
from backend.errors import Forbidden, NotFound, ValidationFailed
from backend.providers import replay
from backend.providers.chat import ModelSpec
from backend.providers.urls import unusable_url
from shared.schemas.turns import ModelCreate


def spec_of(row: dict[str, Any]) -> ModelSpec:
    return ModelSpec(id=row["id"], provider=row["provider"], model=row["model"], base_url=row["base_url"],
                     api_key_env=row["api_key_env"], org_id=row["org_id"])


def document(row: dict[str, Any]) -> dict[str, Any]:
    return {"id": row["id"], "provider": row["provider"], "model": row["model"], "base_url": row["base_url"],
            "api_key_env": row["api_key_env"], "org_id": row["org_id"] or None, "label": spec_of(row).label,
            "created_at": row["created_at"]}


async def list_models(ctx: RequestContext) -> list[dict[str, Any]]:
    return [document(r) for r in await repo.offered(ctx.db, ctx.org_id)]


async def offered_spec(db: AsyncSession, org_id: str, model_id: str, param: str = "model") -> ModelSpec:
    """The model a request names, or 422 naming the field: it must be offered to the organisation."""
    row = await repo.find(db, org_id, model_id)
    if row is None:
        raise ValidationFailed(f"The model {model_id!r} is not offered to this organisation; GET /models lists "
                               "the ones that are.", param=param, code="model_not_offered")
    return spec_of(row)


def _check_base_url(base_url: str | None) -> None:
    """An http(s) URL the model's HTTP client can use: a stored one it refuses would fail every turn naming it."""
    if base_url is None:
        raise ValidationFailed("An openai_compatible model needs `base_url`, the server's address such as "
                               "http://127.0.0.1:11434/v1.", param="base_url")
    wrong = unusable_url(base_url)
    if wrong is not None:
        raise ValidationFailed(f"`base_url` cannot be used: {wrong}. Send the server's address, such as "
                               "http://127.0.0.1:11434/v1.", param="base_url")


def checked(body: ModelCreate) -> dict[str, Any]:
    """The row to store: an `openai_compatible` model needs an http(s) base URL; a `replay` model names a
    recording shipped with the project (its `model`, default the id)."""
    model = body.model or body.id
    base_url = body.base_url
    if body.provider == "openai_compatible":
        _check_base_url(base_url)
    else:
        if not replay.exists(model):
            raise ValidationFailed(f"A replay model answers from a recording shipped with coremem; {model!r} is not "
                                   f"one (shipped: {', '.join(replay.available())}).", param="model")
        base_url = None
    return {"id": body.id, "provider": body.provider, "base_url": base_url, "api_key_env": body.api_key_env,
            "model": model}


async def add(db: AsyncSession, body: ModelCreate, org_id: str | None) -> dict[str, Any]:
    return await repo.upsert(db, {**checked(body), "org_id": org_id or repo.EVERY_ORG})


async def existing_org(db: AsyncSession, org_id: str | None) -> str | None:
    """An operator's `org_id` must name an organisation: a row under any other id is offered to nobody, and its
    audit event would start a trail of its own. 404 as for an unknown `X-Core-Org`."""
    if org_id is not None and await orgs_repo.get(db, org_id) is None:
        raise NotFound("No such organisation.", param="org_id")
    return org_id


async def _target_org(ctx: RequestContext, org_id: str | None) -> str | None:
    """Operators offer to one organisation or (without `org_id`) to all; an administrator only to her own."""
    principal = ctx.principal
    if principal.is_operator:
        return await existing_org(ctx.db, org_id)
    ctx.require_admin()
    own = principal.org_id
    if org_id not in (None, own):
        raise Forbidden("An administrator offers models to her own organisation only.", param="org_id",
                        code="other_organisation")
    return own


async def add_for(ctx: RequestContext, body: ModelCreate) -> dict[str, Any]:
    org_id = await _target_org(ctx, body.org_id)
    if body.api_key_env is not None and not ctx.principal.is_operator:
        # EXT-1: the variable is read from the API server's environment, which holds the operator's credentials
        # (other organisations' too): whoever names it chooses which secret goes to the server at `base_url`.
        raise Forbidden("Only an operator names the environment variable holding a model server's credential; "
                        "leave out `api_key_env`, or ask the operator (`coremem models add … --api-key-env`).",
                        param="api_key_env", code="operator_required")
    row = await add(ctx.db, body, org_id)
    if org_id:
        await ctx.audit("model.offered", object_type="model", object_id=body.id, org_id=org_id,
                        detail={"provider": body.provider})
    return document(row)


async def remove_for(ctx: RequestContext, model_id: str, org_id: str | None) -> None:
    target = await _target_org(ctx, org_id)
    if not await repo.remove(ctx.db, target or repo.EVERY_ORG, model_id):
        where = f"organisation {target}" if target else "every organisation"
        raise NotFound(f"No model {model_id!r} is offered to {where}.", param="id")
    if target:
        await ctx.audit("model.withdrawn", object_type="model", object_id=model_id, org_id=target)
