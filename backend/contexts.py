"""Building the one request context (house rule 11) for every way work arrives: an HTTP request's credential,
or the platform itself (the CLI, jobs). Turns, jobs and the MCP server call these too; nothing else builds one."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from backend.access import principal as principals
from backend.access.actor import Actor
from backend.access.context import RequestContext
from backend.config import Settings
from backend.db.tenant import use_org
from backend.domains.audit.service import record


async def for_credential(db: AsyncSession, settings: Settings, *, authorization: str | None,
                         subject_header: str | None = None, org_header: str | None = None,
                         path_org_id: str | None = None) -> RequestContext:
    """The context of a request made with a key, a subject token or an administrator token (one round trip for
    the credential and its organisation's row)."""
    principal, org = await principals.resolve(db, secret=settings.secret, authorization=authorization,
                                              subject_header=subject_header, org_header=org_header,
                                              path_org_id=path_org_id)
    if org is not None:  # row-level security: the tenant tables show this organisation's rows from here on
        await use_org(db, org["id"])
    return RequestContext(db, principal, org, settings, record)


async def for_system(db: AsyncSession, settings: Settings, org: Mapping[str, Any], actor: Actor) -> RequestContext:
    """The context of work the platform does for an organisation itself: every object, nobody named (and, for
    row-level security, that organisation's rows only)."""
    await use_org(db, org["id"])
    return RequestContext(db, principals.system_principal(org["id"], actor), org, settings, record)
