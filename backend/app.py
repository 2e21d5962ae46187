"""create_app(): routes, dependencies, error handlers and the database lifecycle."""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager

from litestar import Litestar, get
from litestar.datastructures import State
from litestar.di import Provide
from litestar.exceptions import HTTPException, ValidationException
from litestar.openapi import OpenAPIConfig, ResponseSpec
from sqlalchemy import text

from backend import openapi
from backend.access.ratelimit import RateLimiter
from backend.config import Settings, get_settings
from backend.db import migrate
from backend.db.embedded import resolve_database_url
from backend.db.engine import make_engine, make_sessionmaker
from backend.domains.activity.controller import ActivityController
from backend.domains.agents.controller import AgentController
from backend.domains.audit.controller import AuditController
from backend.domains.exports.controller import ExportController
from backend.domains.extraction.controller import ExtractionController
from backend.domains.indexes.controller import IndexController
from backend.domains.keys.controller import KeyController, OwnKeyController
from backend.domains.memory import embed_later, recall_tally
from backend.domains.memory.controller import MemoryController
from backend.domains.models.controller import AdminModelController, ModelController
from backend.domains.orgs.controller import AdminController, OrgController
from backend.domains.proposals.controller import ProposalController
from backend.domains.stores.controller import StoreController
from backend.domains.subjects.controller import SubjectController
from backend.domains.threads.controller import ThreadController, ThreadItemSearchController
from backend.domains.tools.controller import ToolController
from backend.domains.turns.controller import MessagesController, ResponseController
from backend.domains.usage.controller import UsageController
from backend.errors import ApiError
from backend.http import (
    check_query_and_path,
    handle_api_error,
    handle_http,
    handle_internal,
    handle_validation,
    provide_arguments_checked,
    provide_context,
    provide_db,
    provide_turn_context,
)
from backend.mcp.http import McpEndpoint
from backend.params import provide_page
from shared.schemas.common import ErrorBody
from shared.schemas.platform import Health, Ready


@get("/health", tags=["operations"], summary="The process lives")
async def health() -> Health:
    return Health(status="ok")


@get("/ready", tags=["operations"], summary="The database answers and migrations are current",
     responses={503: ResponseSpec(data_container=ErrorBody, description="Database down or migrations behind")})
async def ready(state: State) -> Ready:
    head = migrate.head_revision()
    revision: str | None = None
    database = False
    try:
        async with state.engine.connect() as conn:
            database = True
            exists = (await conn.execute(text("SELECT to_regclass('public.alembic_version')"))).scalar()
            if exists is not None:
                revision = (await conn.execute(text("SELECT version_num FROM alembic_version"))).scalar()
    except Exception:
        database = False
    body = Ready(status="ready" if database and revision == head else "not_ready", database=database,
                 migrations_current=revision == head, revision=revision, head=head)
    if body.status != "ready":
        message = ("The database does not answer." if not database else
                   f"Migrations are behind (database at {revision or 'none'}, code at {head}); run `coremem migrate`.")
        raise ApiError(message, status=503, code="not_ready", headers={"Retry-After": "1"} if not database else None)
    return body


def create_app(settings: Settings | None = None, database_url: str | None = None) -> Litestar:
    settings = settings or get_settings()
    logging.basicConfig(level=settings.log_level)

    @asynccontextmanager
    async def lifespan(app: Litestar) -> AsyncGenerator[None, None]:
        url = database_url or resolve_database_url(settings)
        engine = make_engine(url)
        app.state.engine = engine
        app.state.sessionmaker = make_sessionmaker(engine)
        try:
            yield
        finally:
            await embed_later.settle()  # the vectors of a turn's last memory writes, before the pool closes
            await recall_tally.settle()  # the recall counts of the last turns
            await engine.dispose()

    mcp = McpEndpoint(settings)  # /mcp: the MCP server over streamable HTTP
    return Litestar(
        route_handlers=[health, ready, AdminController, OrgController, KeyController, OwnKeyController,
                        IndexController, AuditController, StoreController, ThreadController,
                        ThreadItemSearchController, ExportController, ProposalController, MemoryController,
                        ToolController,
                        SubjectController, ModelController, AdminModelController, UsageController,
                        ResponseController, MessagesController, AgentController, ActivityController,
                        ExtractionController, mcp.handler],
        dependencies={"db": Provide(provide_db), "ctx": Provide(provide_context), "page": Provide(provide_page),
                      "turn": Provide(provide_turn_context), "arguments_checked": Provide(provide_arguments_checked)},
        before_request=check_query_and_path,
        exception_handlers={
            ApiError: handle_api_error,
            ValidationException: handle_validation,
            HTTPException: handle_http,
            Exception: handle_internal,
        },
        lifespan=[lifespan, mcp.lifespan],
        state=State({"settings": settings, "rate_limiter": RateLimiter.from_settings(settings)}),
        request_max_body_size=settings.max_body_bytes,
        openapi_config=OpenAPIConfig(title="coremem", version="0.1.0", path="/schema",
                                     render_plugins=openapi.render_plugins()),
        debug=False,
    )
