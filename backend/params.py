"""Query parameters every route shares: one query Struct per list route, cursor paging, `name:value` pairs.

A route's filters are one msgspec Struct in shared/schemas (the contract the client sends too); `query_dependency`
turns it into a Litestar dependency whose parameters are the Struct's fields, so the route, the OpenAPI document,
the repository and the client read the same fields. Paging is `Page`: one cursor format, one error, one
`limit + 1` look-ahead for every paged route. `refuse_unknown_query` (before every route) holds a request to the
query parameters its route takes.
"""

from __future__ import annotations

import base64
import inspect
import json
import re
import warnings
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import datetime, time, timedelta
from typing import Annotated, Any, NamedTuple, TypeVar, Union, get_args, get_origin
from urllib.parse import unquote_to_bytes
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import msgspec
from litestar import Request
from litestar.exceptions import SerializationException, ValidationException
from litestar.params import Parameter

from backend.errors import BadRequest, ValidationFailed, msgspec_error_parts, storable

S = TypeVar("S", bound=msgspec.Struct)
Row = TypeVar("Row")
MAX_PAGE = 200
_RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}")


def _holds_datetime(annotation: Any) -> bool:
    if annotation is datetime:
        return True
    return any(_holds_datetime(arg) for arg in get_args(annotation))


def _description(annotation: Any) -> str | None:
    """The `msgspec.Meta(description=…)` of a field, through `X | None` and `Annotated`."""
    if get_origin(annotation) in (Union, type(int | None)):
        for arg in get_args(annotation):
            found = _description(arg)
            if found:
                return found
    if get_origin(annotation) is Annotated:
        for extra in get_args(annotation)[1:]:
            if isinstance(extra, msgspec.Meta) and extra.description:
                return str(extra.description)
    return None


def query_dependency(struct: type[S]) -> Callable[..., Any]:
    """A Litestar dependency taking the Struct's fields as query parameters (by their wire names) and answering
    the Struct, validated by msgspec: a bad value is 422 naming the parameter."""
    fields = msgspec.structs.fields(struct)
    parameters = []
    annotations: dict[str, Any] = {}
    for field in fields:
        # Optional at the route: the Struct's own default applies to what is not sent.
        optional: Any = field.type | None
        annotation = Annotated[optional, Parameter(query=field.encode_name, required=False,
                                                   description=_description(field.type))]
        parameters.append(inspect.Parameter(field.name, inspect.Parameter.KEYWORD_ONLY, default=None,
                                            annotation=annotation))
        annotations[field.name] = annotation

    instants = [f.encode_name for f in fields if _holds_datetime(f.type)]

    async def provide(request: Request[Any, Any, Any], **given: Any) -> S:
        for name in instants:  # PLT-15: RFC 3339 only; msgspec would read `after=31` as Unix time
            for raw in request.query_params.getall(name, []):
                if not _RFC3339.match(raw):
                    raise ValidationFailed(f"`{name}` is an RFC 3339 instant with its offset, such as "
                                           "2025-01-31T09:00:00+01:00.", param=name)
        sent = {f.encode_name: given[f.name] for f in fields if given.get(f.name) is not None}
        try:
            return msgspec.convert(sent, struct, strict=False)
        except msgspec.ValidationError as exc:
            text, path, named = msgspec_error_parts(str(exc))
            field = path.lstrip(".").split("[")[0] if path else named  # the instant check names its field
            raise ValidationFailed(text + ".", param=field or None) from None

    request_parameter = inspect.Parameter("request", inspect.Parameter.KEYWORD_ONLY, annotation=Request)
    provide.__signature__ = inspect.Signature([request_parameter, *parameters],  # type: ignore[attr-defined]
                                              return_annotation=struct)
    provide.__annotations__ = {"request": Request, **annotations, "return": struct}
    provide.__name__ = f"provide_{struct.__name__}"
    return provide


# ---------------------------------------------------------------- the parameters a route takes

class RouteQuery(NamedTuple):
    """The query parameters a route takes (its own and its dependencies', as Litestar reads and documents them)."""

    names: frozenset[str]  # wire names
    repeatable: frozenset[str]  # list-valued: each value sent is kept
    wire_names: dict[str, str]  # the keyword's name in Python (`from_`) -> the wire name (`from`)


_ROUTE_QUERY = "coremem_route_query"  # the handler's `opt` keeps its RouteQuery, worked out on its first request


def route_query(request: Request[Any, Any, Any]) -> RouteQuery:
    """The query parameters of the request's route, read from its handler's signature and dependencies."""
    handler = request.route_handler
    known = handler.opt.get(_ROUTE_QUERY)
    if isinstance(known, RouteQuery):
        return known
    with warnings.catch_warnings():  # Litestar warned about the handler's signature once, at startup
        warnings.simplefilter("ignore")
        model = handler.create_kwargs_model(dict.fromkeys(request.path_params))  # type: ignore[arg-type]
    query = model.expected_query_params
    known = RouteQuery(frozenset(p.field_alias for p in query),
                       frozenset(p.field_alias for p in query if p.is_sequence),
                       {p.field_name: p.field_alias for p in query})
    handler.opt[_ROUTE_QUERY] = known
    return known


def refuse_undecodable(request: Request[Any, Any, Any]) -> None:
    """PLT-14: a percent-escape in the path or the query that is not UTF-8 (`%FF`, or `%ED%A0%80`, a surrogate) is
    400 naming where it is. The server decodes such bytes to U+FFFD, so `DELETE /subjects/%FF` erased the person
    whose id is "\ufffd" and `?label=%FF` filtered by that character, where the client meant neither."""
    raw_path = request.scope.get("raw_path")  # some servers and test clients keep the query on it
    if isinstance(raw_path, bytes) and not _utf8(unquote_to_bytes(raw_path.partition(b"?")[0])):
        named = next((k for k, v in request.path_params.items() if isinstance(v, str) and "\ufffd" in v), "path")
        raise BadRequest(_UNDECODABLE, param=named, code="invalid_encoding")
    for pair in request.scope.get("query_string", b"").split(b"&"):
        name, _, value = pair.partition(b"=")
        name_bytes = unquote_to_bytes(name.replace(b"+", b" "))
        if not (_utf8(name_bytes) and _utf8(unquote_to_bytes(value.replace(b"+", b" ")))):
            param = name_bytes.decode() if _utf8(name_bytes) else None
            raise BadRequest(_UNDECODABLE, param=param, code="invalid_encoding")


_UNDECODABLE = "A percent-escape here is not UTF-8 text (such as `%FF`); encode the value as UTF-8 and escape that."


def _utf8(raw: bytes) -> bool:
    try:
        raw.decode()
    except UnicodeDecodeError:
        return False
    return True


_BODY_TYPE = "coremem_body_type"  # the handler's `opt` keeps its body's type, worked out on its first request


async def refuse_loose_body(request: Request[Any, Any, Any]) -> None:
    """PLT-14/PLT-16: a body field of the wrong JSON type is 422 naming it, as the OpenAPI document says.

    Litestar converts every argument with msgspec's lax rules, which a query needs (its values are text) but which
    took `"dimensions": "8"` as 8, `"true"` as true and a number as an instant. The parsed body is therefore
    converted once more here, strictly, before the route runs; an unreadable body is left to Litestar's refusal."""
    handler = request.route_handler
    if _BODY_TYPE not in handler.opt:  # a Struct; a free-form body (`dict[str, Any]`) has no field types to check
        parameter = handler.parsed_fn_signature.parameters.get("data")
        kind = None if parameter is None else parameter.annotation
        handler.opt[_BODY_TYPE] = kind if isinstance(kind, type) and issubclass(kind, msgspec.Struct) else None
    body_type = handler.opt[_BODY_TYPE]
    if body_type is None:
        return
    if not await request.body():
        return
    try:
        sent = await request.json()  # Litestar's own parse, which it keeps for the route
    except SerializationException:
        return
    try:
        msgspec.convert(sent, body_type, strict=True)
    except msgspec.ValidationError as exc:  # answered by `http.handle_validation`, as Litestar's own refusals
        raise ValidationException(str(exc), extra=[{"message": str(exc), "source": "body"}]) from None


def refuse_unknown_query(request: Request[Any, Any, Any]) -> None:
    """MEM-10/PLT-14: a query parameter the route would ignore (a typo such as `indexid`, which would list every
    index) or a second value of a single-valued one (of which only the last would count) is 422, never dropped."""
    if not request.query_params:
        return
    route = route_query(request)
    counts = Counter(name for name, _ in request.query_params.multi_items())
    for name, count in counts.items():
        if name not in route.names:
            takes = ", ".join(f"`{n}`" for n in sorted(route.names)) or "none"
            raise ValidationFailed(f"`{name}` is not a query parameter of this route; it takes {takes}.",
                                   param=name, code="unknown_parameter")
        if count > 1 and name not in route.repeatable:
            raise ValidationFailed(f"`{name}` takes one value, and {count} were sent; send it once.", param=name,
                                   code="repeated_parameter")


# ---------------------------------------------------------------- `name:value` filters

def pairs(values: Sequence[str], param: str) -> list[tuple[str, str]]:
    """Repeatable `k:v` filters (`metadata=k:v`, `label=k:v`); the value may itself contain colons."""
    found: list[tuple[str, str]] = []
    for raw in values:
        name, sep, value = raw.partition(":")
        if not sep or not name:
            raise BadRequest(f"`{param}` takes `name:value`, got {raw!r}.", param=param, code="invalid_filter")
        found.append((name, value))
    return found


# ---------------------------------------------------------------- cursor paging

def encode_cursor(value: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(value, separators=(",", ":")).encode()).decode().rstrip("=")


def _encodable(value: Any) -> bool:
    """Whether every text in a decoded cursor can go to the database: JSON's `\\ud800` decodes to a lone surrogate,
    which has no UTF-8 form (the driver would fail the statement), and PostgreSQL holds no NUL."""
    if isinstance(value, str):
        return storable(value)
    if isinstance(value, list):
        return all(_encodable(item) for item in value)
    if isinstance(value, dict):
        return all(_encodable(k) and _encodable(v) for k, v in value.items())
    return True


def _invalid_cursor() -> BadRequest:
    return BadRequest("This cursor is not one the API handed out.", param="cursor", code="invalid_cursor")


class Page:
    """One page request: the opaque cursor a previous page handed out and the page size asked for."""

    __slots__ = ("_cursor", "_limit", "size")

    def __init__(self, cursor: str | None = None, limit: int | None = None) -> None:
        self._cursor = cursor
        self._limit = limit
        self.size = 0

    def after(self, *kinds: type, int_bits: int = 64) -> Any:
        """The position to continue after (None on the first page); a cursor of another shape is 400, and so is
        an integer the position's column cannot hold (`int_bits`: 64 for bigint, 32 for integer), which the
        database would refuse to compare."""
        if not self._cursor:
            return None
        try:
            padded = self._cursor + "=" * (-len(self._cursor) % 4)
            value = json.loads(base64.urlsafe_b64decode(padded.encode()))
        except (ValueError, TypeError, RecursionError):  # RecursionError: brackets nested past the decoder's depth
            raise _invalid_cursor() from None
        if not _encodable(value):
            raise _invalid_cursor()
        if kinds and not isinstance(value, kinds):
            raise _invalid_cursor()
        if isinstance(value, bool) and bool not in kinds:  # JSON `true` is an int to Python
            raise _invalid_cursor()
        if isinstance(value, int) and not -(2 ** (int_bits - 1)) <= value < 2 ** (int_bits - 1):
            raise _invalid_cursor()
        return value

    def limit(self, default: int = 50) -> int:
        """The page size asked for, in [1, 200] (larger is capped, not obeyed)."""
        if self._limit is not None and self._limit < 1:
            raise BadRequest("`limit` must be at least 1.", param="limit", code="invalid_limit")
        self.size = default if self._limit is None else min(self._limit, MAX_PAGE)
        return self.size

    def fetch(self, default: int = 50) -> int:
        """Rows to ask the database for: the page size plus one, to know whether another page follows."""
        return self.limit(default) + 1

    def cut(self, rows: Sequence[Row], position: Callable[[Row], Any]) -> tuple[list[Row], str | None]:
        """The page's rows and the cursor of the next page (None when `fetch`'s look-ahead row did not come)."""
        kept = list(rows[:self.size])
        more = len(rows) > self.size and kept
        return kept, encode_cursor(position(kept[-1])) if more else None

    def invalid(self) -> BadRequest:
        """For a cursor that decoded but names nothing this route knows."""
        return _invalid_cursor()


async def provide_page(cursor: str | None = None, limit: int | None = None) -> Page:
    return Page(cursor, limit)


# ---------------------------------------------------------------- calendar days

def day_window(timezone: str, days: int, now: datetime | None = None) -> tuple[str, datetime, list[str]]:
    """The last `days` calendar days in `timezone`, today included: the zone actually used (UTC when the name is
    unknown), the instant the first day starts, and the days as `YYYY-MM-DD`, oldest first."""
    try:
        zone = ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError):
        timezone, zone = "UTC", ZoneInfo("UTC")
    today = (now or datetime.now(zone)).astimezone(zone).date()
    first = today - timedelta(days=days - 1)
    return timezone, datetime.combine(first, time(), zone), [(first + timedelta(days=n)).isoformat()
                                                             for n in range(days)]
