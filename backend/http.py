"""Request plumbing: the transaction and the request context every route gets, and the one mapping of errors to
the PLT-14 body."""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import psycopg
from litestar import Litestar, Request, Response
from litestar.datastructures import State
from litestar.exceptions import HTTPException, NotAuthorizedException, SerializationException, ValidationException
from litestar.routes import HTTPRoute
from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import TimeoutError as SQLAlchemyTimeout
from sqlalchemy.ext.asyncio import AsyncSession

from backend import contexts
from backend.access.context import RequestContext
from backend.access.principal import ORG_HEADER
from backend.access.ratelimit import RateLimiter
from backend.access.subjects import SUBJECT_HEADER
from backend.db.tenant import use_org
from backend.domains.audit import service as audit
from backend.errors import (
    NUL_MESSAGE,
    SURROGATE_MESSAGE,
    ApiError,
    CapabilityMissing,
    DatabaseUnavailable,
    Forbidden,
    PolicyDenied,
    ValidationFailed,
    msgspec_error_parts,
)
from backend.params import refuse_loose_body, refuse_undecodable, refuse_unknown_query, route_query
from shared.schemas.common import InstantOutOfRange
from shared.schemas.compaction import RETIRED_COMPACTION_FIELDS

log = logging.getLogger("coremem")


async def provide_arguments_checked() -> None:
    """Nothing. The transaction-holding dependencies below take it so that Litestar resolves them after the
    route's other dependencies (`filters`, `page`), which may refuse the query's arguments.

    Litestar resolves the dependencies of one depth together in a task group. When one refused its arguments
    (422), the group cancelled a sibling that was opening the request's transaction, and the cancellation also
    reached the session's own cleanup: its connection stayed checked out, in a transaction, until the garbage
    collector dropped it. Refused requests could so empty the pool (the fuzzing battery's requests waited
    10 s). Resolved one depth later, a transaction is only opened for arguments that were accepted. A dependency
    that may refuse should therefore not take `ctx` itself."""
    return None


async def provide_db(state: State, arguments_checked: None) -> AsyncGenerator[AsyncSession, None]:
    """One request, one transaction (house rule 3), for the routes that act without a credential (login)."""
    async with transaction(state) as session:
        yield session


async def provide_context(request: Request[Any, Any, Any], state: State, arguments_checked: None
                          ) -> AsyncGenerator[RequestContext, None]:
    """The request context every route takes (house rule 11), in the request's one transaction."""
    headers = request.headers
    ctx: RequestContext | None = None
    try:
        async with transaction(state) as session:
            ctx = await contexts.for_credential(
                session, state.settings, authorization=headers.get("authorization"),
                subject_header=headers.get(SUBJECT_HEADER), org_header=headers.get(ORG_HEADER),
                path_org_id=request.path_params.get("org_id"))
            limit_rate(state, ctx)
            yield ctx
    except Forbidden as refused:
        await keep_refused_write(state, request, ctx, refused)
        raise


async def provide_turn_context(request: Request[Any, Any, Any], state: State, arguments_checked: None
                               ) -> AsyncGenerator[RequestContext, None]:
    """The context of a turn, whose route commits between its steps (it never holds a transaction while a model
    thinks): the session is not wrapped in one transaction; whatever is open at the end commits, or rolls back
    when the route raises."""
    headers = request.headers
    session: AsyncSession = state.sessionmaker()
    # The Anthropic SDK sends its key as `x-api-key`; it is the same credential.
    api_key = headers.get("x-api-key")
    authorization = headers.get("authorization") or (f"Bearer {api_key}" if api_key else None)
    ctx: RequestContext | None = None
    try:
        ctx = await contexts.for_credential(
            session, state.settings, authorization=authorization,
            subject_header=headers.get(SUBJECT_HEADER), org_header=headers.get(ORG_HEADER))
        limit_rate(state, ctx)
        yield ctx
        await session.commit()
    except PolicyDenied as denied:
        await session.rollback()
        await _keep_denied_event(state, denied)
        raise
    except Forbidden as refused:
        await session.rollback()
        await keep_refused_write(state, request, ctx, refused)
        raise
    except BaseException:
        await session.rollback()
        raise
    finally:
        await session.close()


def limit_rate(state: State, ctx: RequestContext) -> None:
    """Spend one of the key's tokens (PLT-14 429 with `Retry-After` when none is left); see access/ratelimit.py."""
    limiter: RateLimiter | None = getattr(state, "rate_limiter", None)
    if limiter is not None:
        limiter.take(ctx.principal)


@asynccontextmanager
async def transaction(state: State) -> AsyncIterator[AsyncSession]:
    """Commit when the handler returns, roll back when it raises; a policy refusal still keeps its `denied`
    audit event, written in a transaction of its own after the rollback. The MCP server runs each call in one."""
    session: AsyncSession = state.sessionmaker()
    try:
        async with session.begin():
            yield session
    except PolicyDenied as denied:
        await _keep_denied_event(state, denied)
        raise
    finally:
        await session.close()


WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


async def keep_refused_write(state: State, request: Request[Any, Any, Any], ctx: RequestContext | None,
                             refused: Forbidden) -> None:
    """PLT-12: a write refused with 403 for a capability or a role (not by a policy rule, whose refusal keeps its
    own `denied` event) is recorded as `request.denied` naming the route and the reason, after the rollback."""
    if isinstance(refused, PolicyDenied) or ctx is None or request.method not in WRITE_METHODS:
        return
    org_id = ctx.principal.chosen_org_id
    if org_id is None:
        return
    # The route's template (`/memory/{record_id}`), never the path: a path may hold a person's id.
    template = request.scope.get("path_template") or request.scope.get("path", "")
    detail = {"route": f"{request.method} {template}", "code": refused.code}
    if isinstance(refused, CapabilityMissing):
        detail["capability"] = refused.capability
    async with state.sessionmaker() as session:
        await use_org(session, org_id)
        async with session.begin():
            await audit.record(session, org_id=org_id, actor=ctx.actor, action="request.denied",
                               secret=state.settings.secret, subject_id=ctx.person, object_type="route",
                               object_id=None, outcome="denied", detail=detail)


async def _keep_denied_event(state: State, denied: PolicyDenied) -> None:
    if denied.org_id is None or denied.actor is None:
        return
    async with state.sessionmaker() as session:
        await use_org(session, denied.org_id)
        async with session.begin():
            await audit.record(
                session, org_id=denied.org_id, actor=denied.actor, action=denied.action,
                secret=state.settings.secret, subject_id=denied.subject_id, object_type=denied.object_type,
                object_id=denied.object_id, outcome="denied", detail=denied.detail,
            )


# ---------------------------------------------------------------- errors (PLT-14)

_MISSING_PARAM = re.compile(r"Missing required \w+ parameter '(?P<name>[^']+)'")


def _json_path_to_param(path: str) -> str | None:
    path = path.lstrip(".")
    return path or None


def _validation_param(message: str, key: str | None) -> str | None:
    """The dotted path of the offending field: Litestar gives the container's path, msgspec names the field."""
    _, path, name = msgspec_error_parts(message)
    base = _json_path_to_param(path) if path is not None else key
    if base in ("data", ""):
        base = None
    if name:
        return f"{base}.{name}" if base else name
    if base:
        return base
    missing = _MISSING_PARAM.search(message)
    if missing and key is None:
        return missing.group("name")
    return None


def error_response(status: int, code: str, message: str, param: str | None = None, *,
                   reason_code: str | None = None, error_id: str | None = None,
                   headers: dict[str, str] | None = None) -> Response[Any]:
    body: dict[str, Any] = {"status": status, "code": code, "message": message, "param": param}
    if reason_code is not None:
        body["reason_code"] = reason_code
    if error_id is not None:
        body["error_id"] = error_id
    return Response(body, status_code=status, headers=headers)


def handle_api_error(_: Request, exc: ApiError) -> Response[Any]:
    return error_response(exc.status, exc.code, exc.message, exc.param, reason_code=exc.reason_code,
                          headers=exc.headers)


def handle_validation(request: Request, exc: ValidationException) -> Response[Any]:
    extra = exc.extra if isinstance(exc.extra, list) else []
    first = extra[0] if extra and isinstance(extra[0], dict) else {}
    message = str(first.get("message") or exc.detail)
    source = first.get("source")
    if _looks_like_json_error(message):
        return error_response(400, "malformed_body", f"The request body is not valid JSON: {message}", None)
    if first.get("key") == "data" and message == "'data'":  # Litestar's KeyError: no body came, so no `data`
        return error_response(400, "malformed_body", "A JSON body is required; the request sent none.", None)
    param = _validation_param(message, first.get("key"))
    if source in ("query", "path", "header", "cookie") and first.get("key"):
        param = str(first["key"])
        if source == "query":  # Litestar names the keyword (`from_`); the client sent the wire name (`from`)
            param = route_query(request).wire_names.get(param, param)
    clean = msgspec_error_parts(message)[0]
    return error_response(422, "validation_failed", _retired(param) or clean or "The request is not valid.", param)


def _retired(param: str | None) -> str | None:
    """TRN-6: an old compaction setting is refused with what replaced it, not as a mere unknown field."""
    container, _, name = (param or "").rpartition(".")
    if container == "compaction" or container.endswith(".compaction"):
        return RETIRED_COMPACTION_FIELDS.get(name)
    return None


def _unreadable_body(reason: str) -> str:
    """What is wrong with a body the JSON decoder refused (Litestar raises it as a 400 caused by
    `SerializationException`); msgspec's location is left out, as it hides object keys (`$[...][...]`)."""
    reason = msgspec_error_parts(reason)[0]
    if reason.startswith("Number out of range"):
        return ("The request body is not valid JSON for this API: it holds a number too large to read (such as "
                "1e999); numbers must be within ±1.7e308.")
    if "UTF-8" in reason:
        return "The request body is not valid JSON: it is not UTF-8 encoded text. Send JSON encoded as UTF-8."
    return f"The request body is not valid JSON: {reason}"


def _looks_like_json_error(message: str) -> bool:
    lowered = message.lower()
    return any(word in lowered for word in ("malformed", "invalid json", "truncated", "trailing characters"))


_STATUS_CODES = {400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found",
                 405: "method_not_allowed", 409: "conflict", 413: "payload_too_large", 415: "unsupported_media_type",
                 422: "validation_failed", 429: "rate_limited"}


def handle_http(request: Request, exc: HTTPException) -> Response[Any]:
    status = exc.status_code
    if status >= 500:
        return handle_internal(request, exc)
    if status == 413:
        return error_response(413, "payload_too_large", "The request body is larger than this server accepts "
                              "(CORE_MAX_BODY_BYTES).", None)
    if isinstance(exc, NotAuthorizedException):
        status = 401
    message = exc.detail if isinstance(exc.detail, str) and exc.detail else "The request was refused."
    if status == 400 and (_looks_like_json_error(message) or isinstance(exc.__cause__, SerializationException)):
        return error_response(400, "malformed_body", _unreadable_body(message), None)
    if status == 404 and message == "Not Found":
        message = "There is no such route."
    if status == 405 and _an_id_taken_by_a_name(request):
        return error_response(404, "not_found", f"Nothing is found at {request.method} {request.url.path}: a part "
                              "of this path is the name of another route here, never an id.", None)
    return error_response(status, _STATUS_CODES.get(status, "error"), message, None)


def _id_routes(app: Litestar) -> list[tuple[re.Pattern[str], frozenset[str]]]:
    """Each route with ids in its path: the pattern its paths match, and its methods (made once per app)."""
    if "id_routes" not in app.state:
        app.state["id_routes"] = [(re.compile("/".join("[^/]+" if part.startswith("{") else re.escape(part)
                                                       for part in route.path.split("/"))), frozenset(route.methods))
                                  for route in app.routes if "{" in route.path and isinstance(route, HTTPRoute)]
    return app.state["id_routes"]


def _an_id_taken_by_a_name(request: Request[Any, Any, Any]) -> bool:
    """A 405 where a route with this method would take the path's name as an id (`PATCH /memory/search`): the
    router prefers the named route (`GET /memory/search`), which has no such method. What the client asked for is
    a record, thread or key that cannot exist: 404, as for any unknown id, not a status the route never answers."""
    path = request.url.path
    return any(request.method in methods and pattern.fullmatch(path) for pattern, methods in _id_routes(request.app))


def _is_nul_refusal(exc: Exception) -> bool:
    """PostgreSQL stores no U+0000 in text or jsonb; psycopg or the server refuses it when a statement runs."""
    if isinstance(exc, psycopg.DataError):  # statements run on the driver's connection (db/prepared.py)
        return "NUL (0x00)" in str(exc) or "\\u0000" in str(exc)  # text, or jsonb's "\u0000 cannot be converted"
    orig = getattr(exc, "orig", None) or exc.__cause__
    message = str(orig) if orig is not None else ""
    return isinstance(exc, DBAPIError) and ("NUL (0x00)" in message or "\\u0000" in message)


async def check_query_and_path(request: Request[Any, Any, Any]) -> None:
    """App-wide `before_request`: a NUL in a query or path value is bad input (422 naming it), not a 500; a query
    parameter the route does not take, or a repeat of a single-valued one, is 422 (`refuse_unknown_query`); a
    percent-escape that is not UTF-8 is 400 (`refuse_undecodable`); a body field of the wrong type is 422
    (`refuse_loose_body`)."""
    refuse_undecodable(request)
    await refuse_loose_body(request)
    for name, value in [*request.query_params.multi_items(), *request.path_params.items()]:
        if isinstance(value, str) and "\x00" in value:
            raise ValidationFailed(NUL_MESSAGE, param=name)
    refuse_unknown_query(request)


def _causes(exc: BaseException) -> Iterator[BaseException]:
    """The exception and what it wraps, as SQLAlchemy wraps driver errors (`orig`) or Python chains them."""
    seen: BaseException | None = exc
    for _ in range(6):
        if seen is None:
            return
        yield seen
        seen = getattr(seen, "orig", None) or seen.__cause__ or seen.__context__


def limit_exceeded(exc: BaseException) -> psycopg.Error | None:
    """PostgreSQL's SQLSTATE class 54 (program limit exceeded: text too long for a tsvector, an index row or an
    array too large, a statement too complex), which psycopg files under `OperationalError`: the request's
    content is too large, not the database down, so sending it again would fail the same way."""
    for seen in _causes(exc):
        if isinstance(seen, psycopg.Error) and (seen.sqlstate or "").startswith("54"):
            return seen
    return None


def is_database_unavailable(exc: BaseException) -> bool:
    """A lost or refused database connection (server restarted, backend terminated, connection refused, pool
    exhausted), as SQLAlchemy wraps it or as psycopg raises it on the driver's connection (db/prepared.py)."""
    if limit_exceeded(exc) is not None:
        return False
    for seen in _causes(exc):
        if isinstance(seen, DBAPIError) and seen.connection_invalidated:
            return True
        if isinstance(seen, psycopg.OperationalError | psycopg.InterfaceError | SQLAlchemyTimeout):
            return True
    return False


def too_large(limit: psycopg.Error) -> ApiError:
    """The 413 of a request past a database limit (`limit_exceeded`), over HTTP and MCP alike."""
    what = limit.diag.message_primary or "a value exceeds a limit of the database"
    return ApiError(f"The request holds more than the database accepts in one value: {what}. Send smaller "
                    "values, such as a long text split across several items.", status=413, code="payload_too_large")


def handle_internal(_: Request, exc: Exception) -> Response[Any]:
    limit = limit_exceeded(exc)
    if limit is not None:
        refused = too_large(limit)
        return error_response(refused.status, refused.code, refused.message, None)
    if is_database_unavailable(exc):
        log.warning("database unavailable: %s", str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        unavailable = DatabaseUnavailable()
        return error_response(unavailable.status, unavailable.code, unavailable.message, None,
                              headers=unavailable.headers)
    if _is_nul_refusal(exc):
        return error_response(422, "validation_failed", NUL_MESSAGE, None)
    if any(isinstance(e, UnicodeEncodeError) and "surrogate" in str(e) for e in _causes(exc)):
        return error_response(422, "validation_failed", SURROGATE_MESSAGE, None)
    if isinstance(exc, InstantOutOfRange):  # a Struct a route made itself, not one msgspec decoded
        return error_response(422, "validation_failed", f"{exc}.", exc.field)
    if isinstance(exc, RecursionError) and "deserializing" in str(exc):  # msgspec's JSON decoder, on the body
        return error_response(422, "validation_failed", "The request body nests arrays or objects too deeply.", None)
    error_id = uuid.uuid4().hex
    log.error("unexpected error %s", error_id, exc_info=exc)
    return error_response(500, "internal_error", f"Something went wrong on our side; quote error id {error_id}.",
                          None, error_id=error_id)
