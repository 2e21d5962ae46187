"""Make the generated OpenAPI document say what the routes really do (PLT-16).

Litestar does not mark msgspec Structs that forbid unknown fields, and documents its own 400 validation
body; this API refuses unknown fields and answers every error with the PLT-14 body, mostly as 422.
"""

from __future__ import annotations

from typing import Any

from litestar import Litestar
from litestar._openapi.plugin import OpenAPIPlugin

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
# Routes whose answer is not JSON and varies with a parameter: the media types they really send.
OTHER_CONTENT = {("/memory/export", "get"): {media: {"schema": {"type": "string", "format": "binary"}}
                                              for media in MEDIA_TYPES.values()}}


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
            for status, description in errors.items():
                responses[status] = {"description": description,
                                     "content": {"application/json": {"schema": ERROR_REF}}}


def install(app: Litestar) -> None:
    """Post-process the cached document once, at start-up."""
    plugin = app.plugins.get(OpenAPIPlugin)
    finalise(plugin.provide_openapi_schema())
