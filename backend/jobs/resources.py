"""What a worker's tasks share: the deployment settings and a database engine, handed to them in the job
context; `system` opens one transaction with a system context for an organisation (house rules 3 and 11)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from procrastinate import JobContext
from sqlalchemy.ext.asyncio import async_sessionmaker

from backend import contexts
from backend.access.actor import Actor
from backend.access.context import RequestContext
from backend.config import Settings
from backend.domains.orgs import repository as orgs

KEY = "coremem"  # the worker's additional_context entry


@dataclass(frozen=True)
class Resources:
    settings: Settings
    sessionmaker: async_sessionmaker

    @asynccontextmanager
    async def system(self, org_id: str, actor: Actor) -> AsyncIterator[RequestContext | None]:
        """A transaction with the organisation's system context, committed when the block ends; None when the
        organisation no longer exists."""
        async with self.sessionmaker() as db, db.begin():
            org = await orgs.get(db, org_id)
            yield await contexts.for_system(db, self.settings, org, actor) if org is not None else None


def resources(context: JobContext) -> Resources:
    found: Resources = context.additional_context[KEY]
    return found
