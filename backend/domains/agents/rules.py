"""What an agent version may hold (TRN-5): a working-state schema that is a valid, self-contained JSON Schema."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any
from urllib.parse import unquote

from backend.errors import ValidationFailed

PARAM = "working_state_schema"
# Values of these keywords are data, not schemas: a `$ref` inside them is not a reference.
_DATA_KEYWORDS = frozenset({"const", "enum", "default", "examples"})


def _path(base: str, parts: Iterable[Any]) -> str:
    for part in parts:
        base += f"[{part}]" if isinstance(part, int) else f".{part}"
    return base


def check_working_state_schema(schema: dict[str, Any]) -> None:
    """422 naming the path when `schema` is no JSON Schema the validator of threads' working states can apply.

    The draft is the one `$schema` names (Draft 2020-12 when absent, as the state check assumes); references must
    point inside the schema (`#…`), since the server fetches nothing when it checks a state.
    """
    import jsonschema
    from jsonschema.exceptions import SchemaError

    declared = schema.get("$schema")
    validator = jsonschema.Draft202012Validator
    if declared is not None:
        found = jsonschema.validators.validator_for(schema, default=None) if isinstance(declared, str) else None
        if found is None:
            raise ValidationFailed(f"`$schema` names no JSON Schema draft this server knows: {declared!r}. Leave it "
                                   "out for Draft 2020-12.", param=f"{PARAM}.$schema", code="invalid_schema")
        validator = found
    try:
        validator.check_schema(schema)
    except SchemaError as error:
        raise ValidationFailed(f"`working_state_schema` is not a valid JSON Schema: {error.message}",
                               param=_path(PARAM, error.absolute_path), code="invalid_schema") from None
    kind = schema.get("type")
    if kind is not None and "object" not in (kind if isinstance(kind, list) else [kind]):
        raise ValidationFailed("A working state is a JSON object, so the schema's top-level `type` must allow "
                               "`object`.", param=f"{PARAM}.type", code="invalid_schema")
    anchors = {value for _, key, value in _walk(schema, ()) if key in ("$anchor", "$dynamicAnchor")}
    for where, key, value in _walk(schema, ()):
        if key in ("$ref", "$dynamicRef") and isinstance(value, str) and not _resolves(schema, value, anchors):
            raise ValidationFailed(f"`{key}` {value!r} does not point inside this schema; a working-state schema is "
                                   "self-contained (`#/$defs/…` or an `$anchor`).", param=_path(PARAM, [*where, key]),
                                   code="invalid_schema")


def _walk(node: Any, where: tuple[Any, ...]) -> Iterator[tuple[tuple[Any, ...], str, Any]]:
    """Every (container path, keyword, value) of the schema's objects, skipping keywords whose values are data."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield where, key, value
            if key not in _DATA_KEYWORDS:
                yield from _walk(value, (*where, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _walk(value, (*where, i))


def _resolves(root: dict[str, Any], ref: str, anchors: set[Any]) -> bool:
    if not ref.startswith("#"):
        return False
    fragment = unquote(ref[1:])
    if not fragment.startswith("/"):
        return fragment == "" or fragment in anchors
    node: Any = root
    for raw in fragment[1:].split("/"):
        token = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            return False
    return True
