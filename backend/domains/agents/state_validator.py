"""The validator a thread's working state is checked with (THR-11/TRN-5): jsonschema's, for the draft the agent's
`working_state_schema` names, with its regular expressions in RE2 (schema_regex), and `uniqueItems`, `enum` and
`const` by hashing.

jsonschema compares every pair of items for `uniqueItems` when they are objects or arrays: 5,000 empty objects, a
16 KiB state, made about 12 million comparisons (over a minute). Here each item becomes a hashable canonical form
that is equal exactly when jsonschema's `equal` says so (`1` and `1.0` alike, `true` and `1` not), in one pass.
`enum` compared each value with every allowed one and `const`/`enum` errors quoted the whole of them: an `enum` of
3,000 values took 1.7 s for 1,600 items; the allowed values are now one set per schema, and messages quote only their
start.
"""

from __future__ import annotations

import reprlib
from collections.abc import Iterator
from functools import lru_cache
from typing import Any

from backend.domains.agents import schema_regex

__all__ = ["resolver_for", "state_registry", "validator_for"]


def validator_for(schema: dict[str, Any]) -> Any:
    """The validator class for `schema`'s draft (Draft 2020-12 when `$schema` is absent)."""
    import jsonschema

    schema_regex.install()
    return _extended(jsonschema.validators.validator_for(schema))


def state_registry(validator_class: Any, schema: dict[str, Any]) -> Any:
    """The registry a state check resolves `schema`'s references in: the schema alone (beside the drafts'
    meta-schemas, which jsonschema adds), with no retrieve function, so a reference outside the schema is an error
    (422), never a fetch (jsonschema's default registry retrieves any URI with urllib, synchronously and without a
    timeout, under the event loop). It is crawled once: jsonschema crawls an uncrawled schema again for each `#name`
    it looks up (1,000 such references took 5.7 s for one state)."""
    return _crawled(validator_class, schema)[1]


def resolver_for(validator_class: Any, schema: dict[str, Any]) -> Any:
    """The resolver a state check starts from, as jsonschema builds it for `validator_class(schema,
    registry=state_registry(…))`: where the schema is saved, each reference is looked up with it."""
    uri, registry = _crawled(validator_class, schema)
    return registry.resolver(base_uri=uri)


def _crawled(validator_class: Any, schema: dict[str, Any]) -> tuple[str, Any]:
    import referencing
    import referencing.jsonschema
    from jsonschema_specifications import REGISTRY

    # as jsonschema's `create` picks the specification, and `Registry.resolver_with_root` the root's URI
    specification = referencing.jsonschema.specification_with(
        dialect_id=validator_class.ID_OF(validator_class.META_SCHEMA) or "urn:unknown-dialect",
        default=referencing.Specification.OPAQUE)
    resource = specification.create_resource(schema)
    uri = resource.id() or ""
    registry = REGISTRY.combine(referencing.Registry()).with_resource(uri, resource)
    try:
        return uri, registry.crawl()
    except (AttributeError, TypeError):  # referencing reads a Draft 3 `extends` object as a list of schemas; such
        return uri, registry  # a schema, saved before Draft 3 was refused, is crawled lazily, as it was before


@lru_cache(maxsize=16)
def _extended(base: Any) -> Any:
    import jsonschema

    return jsonschema.validators.extend(base, {"uniqueItems": _unique_items, "enum": _enum, "const": _const})


def _unique_items(validator: Any, unique: Any, instance: Any, schema: Any) -> Iterator[Any]:
    from jsonschema.exceptions import ValidationError

    if not unique or not validator.is_type(instance, "array"):
        return
    seen: set[Any] = set()
    for item in instance:
        form = _canonical(item)
        if form in seen:
            yield ValidationError(f"{instance!r} has non-unique elements")
            return
        seen.add(form)


def _enum(validator: Any, allowed: Any, instance: Any, schema: Any) -> Iterator[Any]:
    from jsonschema.exceptions import ValidationError

    if _canonical(instance) not in _forms("enum", allowed, allowed if isinstance(allowed, list) else [allowed]):
        yield ValidationError(f"{_short(instance)} is not one of {_short(allowed)}")


def _const(validator: Any, expected: Any, instance: Any, schema: Any) -> Iterator[Any]:
    from jsonschema.exceptions import ValidationError

    if _canonical(instance) not in _forms("const", expected, [expected]):
        yield ValidationError(f"{_short(expected)} was expected")


# By keyword and the id of the schema's value (one list may be both an `enum` and a `const`); the entry keeps the
# value alive, so its id is not reused while the entry is here.
_made: dict[tuple[str, int], tuple[Any, frozenset[Any]]] = {}


def _forms(keyword: str, owner: Any, values: Any) -> frozenset[Any]:
    """The canonical forms of an `enum`'s values (or of a `const`), made once per schema, not once per value
    checked."""
    made = _made.get((keyword, id(owner)))
    if made is not None and made[0] is owner:
        return made[1]
    forms = frozenset(_canonical(value) for value in values)
    if len(_made) >= 64:
        _made.clear()
    _made[(keyword, id(owner))] = (owner, forms)
    return forms


_SHORT = reprlib.Repr()
_SHORT.maxlevel, _SHORT.maxlist, _SHORT.maxdict = 4, 12, 12
_SHORT.maxstring, _SHORT.maxlong, _SHORT.maxother = 80, 40, 80


def _short(value: Any) -> str:
    """A value in an error message: its start, not the whole of an `enum` of thousands or of a long string."""
    return _SHORT.repr(value)


def _canonical(value: Any) -> Any:
    if isinstance(value, bool):  # before numbers: in JSON Schema `true` is not `1`
        return ("boolean", value)
    if isinstance(value, int | float):  # 1 and 1.0 compare and hash equal, as jsonschema treats them
        return ("number", value)
    if isinstance(value, str):
        return ("string", value)
    if isinstance(value, list | tuple):
        return ("array", tuple(_canonical(item) for item in value))
    if isinstance(value, dict):
        return ("object", frozenset((key, _canonical(item)) for key, item in value.items()))
    return ("other", value)
