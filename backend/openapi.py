"""Make the generated OpenAPI document say what the routes really do (PLT-16).

Litestar does not mark msgspec Structs that forbid unknown fields, and documents its own 400 validation
body; this API refuses unknown fields and answers every error with the PLT-14 body, mostly as 422.
"""

from __future__ import annotations

from typing import Any

from litestar import Litestar
from litestar._openapi.plugin import OpenAPIPlugin

ERROR_REF = {"$ref": "#/components/schemas/ErrorBody"}
ERROR_RESPONSES = {
    "400": "Malformed request (bad JSON, conflicting subjects, bad cursor)",
    "401": "No, bad, revoked or expired credential",
    "403": "Capability or policy refusal",
    "404": "Absent, or not reachable with this credential",
    "422": "Validation failed; `param` names the field",
}


def finalise(document: dict[str, Any]) -> None:
    for schema in document.get("components", {}).get("schemas", {}).values():
        if schema.get("type") == "object" and "properties" in schema:
            schema["additionalProperties"] = False
    for path_item in document.get("paths", {}).values():
        for method, operation in path_item.items():
            if method not in {"get", "post", "put", "patch", "delete"}:
                continue
            responses = operation.setdefault("responses", {})
            for status, description in ERROR_RESPONSES.items():
                responses[status] = {"description": description,
                                     "content": {"application/json": {"schema": ERROR_REF}}}


def install(app: Litestar) -> None:
    """Post-process the cached document once, at start-up."""
    plugin = app.plugins.get(OpenAPIPlugin)
    finalise(plugin.provide_openapi_schema())
