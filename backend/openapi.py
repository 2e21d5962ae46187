"""Make the generated OpenAPI document say what the routes really do (PLT-16).

Litestar does not mark msgspec Structs that forbid unknown fields, and documents its own 400 validation
body; this API refuses unknown fields and answers every error with the PLT-14 body, mostly as 422.
"""

from __future__ import annotations

from typing import Any

from litestar import Request
from litestar.openapi.plugins import (
    JsonRenderPlugin,
    OpenAPIRenderPlugin,
    RedocRenderPlugin,
    SwaggerRenderPlugin,
    YamlRenderPlugin,
)

from backend.domains.exports.formats import MEDIA_TYPES

ERROR_REF = {"$ref": "#/components/schemas/ErrorBody"}
ERROR_RESPONSES = {
    "400": "Malformed request (bad JSON, conflicting subjects, bad cursor)",
    "401": "No, bad, revoked or expired credential",
    "403": "Capability or policy refusal",
    "404": "Absent, or not reachable with this credential",
    "422": "Validation failed; `param` names the field",
    "429": "Too many requests for this key (`Retry-After` says when to try again)",
}
WRITE_RESPONSES = {
    "409": "Conflict: a name or key taken, a version moved on, a person erased meanwhile",
    "413": "The request body is larger than this server accepts",
}
# Statuses only one route answers; the failures of a turn on `/messages` and the merge patch's media type.
ROUTE_RESPONSES = {
    ("/admin/login", "post"): {"401": "Wrong e-mail address or password (`bad_login`, the same for an unknown "
                                      "address)",
                               "429": "Too many logins are being checked at this moment (`Retry-After`: 1)"},
    ("/messages", "post"): {"502": "The turn failed (the model down, slow or failing, a tool's write refused); `code` "
                                   "is the turn's error code, the message names the kept response, and the thread "
                                   "travels in `X-Core-Thread-Id`"},
    ("/threads/{thread_id}/state", "patch"): {"415": "The patch is sent neither as `application/merge-patch+json` "
                                                     "nor as `application/json`"},
}
# Routes whose answer is not JSON and varies with a parameter: the media types they really send.
OTHER_CONTENT = {("/memory/export", "get"): {media: {"schema": {"type": "string", "format": "binary"}}
                                              for media in MEDIA_TYPES.values()}}

# `/mcp` is an ASGI mount (backend/mcp/http.py) that Litestar leaves out of the document; described here by hand.
# Only `jsonrpc` is constrained in what is sent: the SDK answers any other malformed message with a JSON-RPC 400.
_RPC = {"type": "object", "required": ["jsonrpc"], "properties": {"jsonrpc": {"const": "2.0"}},
        "description": "A JSON-RPC 2.0 request, notification or response (one message, no batches)"}
_ANSWER = {"type": "object", "required": ["jsonrpc", "id"], "description": "A JSON-RPC 2.0 result or error",
           "properties": {"jsonrpc": {"const": "2.0"}, "id": {"type": ["string", "integer", "null"]},
                          "result": {"type": "object"}, "error": {"type": "object", "required": ["code", "message"]}}}


def _answers(description: str, *schemas: dict[str, Any]) -> dict[str, Any]:
    content = {"application/json": {"schema": schemas[0] if len(schemas) == 1 else {"oneOf": list(schemas)}}}
    return {"description": description, "content": content}


MCP_POST = {
    "tags": ["mcp"], "operationId": "McpMessage", "summary": "MCP over streamable HTTP: one message, one answer",
    "description": "The MCP streamable HTTP transport, stateless with plain JSON answers: every POST stands alone, a "
                   "tool's refusal comes back in its JSON-RPC answer. The caller is named as on every route "
                   "(`Authorization: Bearer` a key, administrator token or subject token; `X-Core-Subject`; "
                   "`X-Core-Org`), resolved before the message is read. `GET /mcp` (no event stream) and "
                   "`DELETE /mcp` (no sessions) answer 405.",
    "requestBody": {"required": True, "content": {"application/json": {"schema": _RPC}}},
    "responses": {
        "200": _answers("The answer to a request", _ANSWER),
        "202": {"description": "A notification or response accepted; no body"},
        "400": _answers("Not a JSON-RPC message, or a request whose `id` is neither a string nor an integer (a "
                        "JSON-RPC error), or a bad `X-Core-Subject`", _ANSWER, ERROR_REF),
        "406": _answers("`Accept` names neither `application/json` nor `*/*`", _ANSWER),
        "413": _answers(WRITE_RESPONSES["413"], ERROR_REF),
        "415": _answers("The body is not sent as `Content-Type: application/json`", ERROR_REF),
        **{status: _answers(ERROR_RESPONSES[status], ERROR_REF) for status in ("401", "429")}}}


def finalise(document: dict[str, Any]) -> None:
    for schema in document.get("components", {}).get("schemas", {}).values():
        if schema.get("type") == "object" and "properties" in schema:
            schema["additionalProperties"] = False
    for path, path_item in document.get("paths", {}).items():
        for method, operation in path_item.items():
            if method not in {"get", "post", "put", "patch", "delete"}:
                continue
            responses = operation.setdefault("responses", {})
            if (path, method) in OTHER_CONTENT:
                responses["200"]["content"] = OTHER_CONTENT[(path, method)]
            errors = ERROR_RESPONSES if method == "get" else {**ERROR_RESPONSES, **WRITE_RESPONSES}
            errors = {**errors, **ROUTE_RESPONSES.get((path, method), {})}
            for status, description in errors.items():
                responses[status] = {"description": description,
                                     "content": {"application/json": {"schema": ERROR_REF}}}
    document.setdefault("paths", {})["/mcp"] = {"post": MCP_POST}


def finalised(document: dict[str, Any]) -> dict[str, Any]:
    """The document, finalised the first time any page of it is rendered. Litestar builds it on first use; building
    it takes about half a second, which every process start (and every app a test makes) paid when it was built and
    finalised at start-up."""
    if "/mcp" not in document.get("paths", {}):  # `finalise` adds /mcp last
        finalise(document)
    return document


class _Swagger(SwaggerRenderPlugin):
    def render(self, request: Request[Any, Any, Any], openapi_schema: dict[str, Any]) -> bytes:
        return super().render(request, finalised(openapi_schema))


class _Json(JsonRenderPlugin):
    def render(self, request: Request[Any, Any, Any], openapi_schema: dict[str, Any]) -> bytes:
        return super().render(request, finalised(openapi_schema))


class _Yaml(YamlRenderPlugin):
    def render(self, request: Request[Any, Any, Any], openapi_schema: dict[str, Any]) -> bytes:
        return super().render(request, finalised(openapi_schema))


class _Redoc(RedocRenderPlugin):
    def render(self, request: Request[Any, Any, Any], openapi_schema: dict[str, Any]) -> bytes:
        return super().render(request, finalised(openapi_schema))


def render_plugins() -> list[OpenAPIRenderPlugin]:
    """The pages under /schema: Swagger UI (also at /schema itself), the document as JSON and YAML, and ReDoc."""
    return [_Swagger(path="/swagger"), _Json(), _Yaml(), _Redoc()]
