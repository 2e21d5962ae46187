"""What an agent version may hold (TRN-5): a working-state schema that is a valid, self-contained JSON Schema."""

from __future__ import annotations

import re
from collections.abc import Container, Iterable, Iterator
from typing import Any
from urllib.parse import unquote

import msgspec

from backend.domains.agents import schema_regex
from backend.errors import ValidationFailed

PARAM = "working_state_schema"
_INDEX = re.compile(r"[0-9]{1,9}")  # a JSON pointer's array index
# Values of these keywords are data, not schemas: a `$ref` inside them is not a reference.
_DATA_KEYWORDS = frozenset({"const", "enum", "default", "examples"})
Where = tuple[Any, ...]
# The drafts a working-state schema may name: those whose every keyword applying a schema is known to the loop and
# applied-schemas checks below. Draft 3's `extends`, `disallow` and schemas in `type` apply schemas to the same value
# unseen (an `extends` loop was saved, then every state write refused; 2^24 schemas applied per state check); Draft 4
# dropped all three. A draft jsonschema adds later is refused until its keywords are reviewed here.
_DRAFTS = ("Draft4Validator", "Draft6Validator", "Draft7Validator", "Draft201909Validator", "Draft202012Validator")


def _path(base: str, parts: Iterable[Any]) -> str:
    for part in parts:
        base += f"[{part}]" if isinstance(part, int) else f".{part}"
    return base


def check_working_state_schema(schema: dict[str, Any]) -> None:
    """422 naming the path when `schema` is no JSON Schema the validator of threads' working states can apply.

    The draft is the one `$schema` names (Draft 2020-12 when absent, as the state check assumes; Draft 3 refused);
    references must point inside the schema (`#…`), since the server fetches nothing when it checks a state, and
    resolve there as jsonschema resolves them (no `$schema` or `$id` below the top).
    """
    import jsonschema
    from jsonschema.exceptions import SchemaError

    size = len(msgspec.json.encode(schema))
    if size > MAX_SCHEMA_BYTES:  # checked first: the meta-schema check alone takes about 30 µs per node
        raise ValidationFailed(f"`working_state_schema` is {size} bytes; at most {MAX_SCHEMA_BYTES} are kept (a "
                               "working state itself is at most 16 KiB). Describe the state more briefly.",
                               param=PARAM, code="invalid_schema")
    declared = schema.get("$schema")
    validator = jsonschema.Draft202012Validator
    if declared is not None:
        found = jsonschema.validators.validator_for(schema, default=None) if isinstance(declared, str) else None
        if found is None:
            raise ValidationFailed(f"`$schema` names no JSON Schema draft this server knows: {declared!r}. Leave it "
                                   "out for Draft 2020-12.", param=f"{PARAM}.$schema", code="invalid_schema")
        if found not in {getattr(jsonschema, name) for name in _DRAFTS}:
            raise ValidationFailed(f"`$schema` names {declared!r}, a draft this server does not check states with "
                                   "(Draft 3's `extends`, `disallow` and schemas in `type` escape the bounds a state "
                                   "check is held to). Name Draft 4, 6, 7, 2019-09 or 2020-12, or leave `$schema` "
                                   "out for 2020-12; `allOf`, `not` and `anyOf` do what those keywords did.",
                                   param=f"{PARAM}.$schema", code="invalid_schema")
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
    anchors: dict[str, Where] = {}
    for where, key, value in _walk(schema, ()):
        if key in ("$anchor", "$dynamicAnchor") and isinstance(value, str):
            anchors.setdefault(value, where)
    for where, key, value in _walk(schema, ()):
        if key in ("$ref", "$dynamicRef") and isinstance(value, str) and not _resolves(schema, value, anchors):
            raise ValidationFailed(f"`{key}` {value!r} does not point inside this schema; a working-state schema is "
                                   "self-contained (`#/$defs/…` or an `$anchor`).", param=_path(PARAM, [*where, key]),
                                   code="invalid_schema")
    nodes = _schemas(schema, anchors)
    _refuse_nested_bases(nodes, validator)
    _refuse_misresolved(schema, nodes, anchors, validator)
    _refuse_cycles(schema, nodes, anchors)
    _refuse_backtracking_patterns(schema)


def _refuse_backtracking_patterns(schema: dict[str, Any]) -> None:
    """422 at a `pattern` or `patternProperties` name that RE2 cannot run (a look-around or a back-reference): the
    state check runs patterns in RE2 only, so no schema can make it backtrack for minutes (schema_regex). Also 422
    at the pattern past MAX_PATTERNS: every key of an object is matched against every pattern of its schema."""
    count = 0
    for where, key, value in _walk(schema, ()):
        if key == "pattern" and isinstance(value, str):
            found = [((*where, key), value)]
        elif key == "patternProperties" and isinstance(value, dict):
            found = [((*where, key, name), name) for name in value]
        else:
            continue
        for place, pattern in found:
            count += 1
            if count > MAX_PATTERNS:
                raise ValidationFailed(f"A working-state schema holds at most {MAX_PATTERNS} regular expressions "
                                       "(`pattern` values and `patternProperties` names); this is one more.",
                                       param=_path(PARAM, place), code="invalid_schema")
            reason = schema_regex.unsupported(pattern)
            if reason is not None:
                raise ValidationFailed(
                    f"The regular expression {pattern!r} uses what this server does not run ({reason}): states are "
                    "checked with RE2, which takes time linear in the text and has no look-around and no "
                    "back-references. Rewrite it without them.", param=_path(PARAM, place), code="invalid_schema")


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


def _resolves(root: dict[str, Any], ref: str, anchors: Container[str]) -> bool:
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
        elif isinstance(node, list) and (i := _list_index(token, node)) is not None:
            node = node[i]
        else:
            return False
    return True


def _list_index(token: str, node: list[Any]) -> int | None:
    """A pointer token as an index into `node`, or None: ASCII digits only (str.isdigit() admits "²", which int()
    refuses, and int() refuses more than 4,300 digits)."""
    if not _INDEX.fullmatch(token):
        return None
    index = int(token)
    return index if index < len(node) else None


# ---------------------------------------------------------------- reference cycles

_REFS = ("$ref", "$dynamicRef", "$recursiveRef")
# Keywords whose subschemas apply to the same value: a reference chain through these alone never reaches a
# smaller part of the state, so a cycle of them recurses for ever when a state is checked (RecursionError).
_SAME_VALUE_ONE = ("not", "if", "then", "else")
_SAME_VALUE_MANY = ("allOf", "anyOf", "oneOf")
_SAME_VALUE_MAP = ("dependentSchemas", "dependencies")
# Keywords whose subschemas apply to a part of the value (or are only referred to): no cycle runs through them.
_PART_ONE = ("additionalProperties", "unevaluatedProperties", "propertyNames", "items", "additionalItems",
             "unevaluatedItems", "contains", "contentSchema")
_PART_MANY = ("prefixItems", "items")
_PART_MAP = ("properties", "patternProperties", "$defs", "definitions")

# The longest chain of schemas applied to one value a working-state schema may hold: checking a state follows each
# link a few Python frames deeper, and a chain of hundreds reached the interpreter's recursion limit (a 500).
MAX_IN_PLACE = 50
# The most schemas one schema may apply to the same value, counting every path through references and `allOf` and
# the like: each is evaluated, and a few kilobytes of definitions that each refer to the next ones twice apply
# millions (16 levels of two: 2.5 s for an empty state; 25 levels of four: hours).
MAX_APPLIED = 1000
# What a working-state schema may be, beside a valid one: a state check's work grows with these.
MAX_SCHEMA_BYTES = 32 * 1024
MAX_PATTERNS = 128


def _schemas(root: dict[str, Any], anchors: dict[str, Where]) -> dict[Where, dict[str, Any]]:
    """Every schema object a state check may apply, by place: the root, the values of the keywords that hold
    schemas (of every draft taken), and where references point."""
    nodes: dict[Where, dict[str, Any]] = {}
    todo: list[Where] = [()]
    while todo:
        where = todo.pop()
        node = _at(root, where)
        if where in nodes or not isinstance(node, dict):
            continue
        nodes[where] = node
        todo.extend(target for _, target in _subschemas(node, where))
        todo.extend(target for _, target in _same_value(node, where, root, anchors))
    return nodes


def _refuse_nested_bases(nodes: dict[Where, dict[str, Any]], validator: Any) -> None:
    """422 at a `$schema` or `$id` (Draft 4: `id`) in a subschema. There `$id` moves the base its references
    resolve against (`#/$defs/b` is then looked for in that subschema alone, and a URL is another document), and
    `$schema` switches the draft, so the keywords, that part is checked with: the checks here read neither."""
    import jsonschema

    base = "id" if validator is jsonschema.Draft4Validator else "$id"
    for where, node in nodes.items():
        if not where:
            continue
        if "$schema" in node:
            raise ValidationFailed("`$schema` is taken only at the top of a working-state schema: in a subschema it "
                                   "would switch the draft that part is checked with. Remove it.",
                                   param=_path(PARAM, [*where, "$schema"]), code="invalid_schema")
        if base in node:
            raise ValidationFailed(f"`{base}` is taken only at the top of a working-state schema: in a subschema it "
                                   "moves the base its references resolve against, so they would no longer point "
                                   "into this schema. Remove it; refer to the subschema with a `#/…` pointer.",
                                   param=_path(PARAM, [*where, base]), code="invalid_schema")


_NOWHERE = object()
_JSON_KINDS = {list: "an array", str: "a string", int: "a number", float: "a number", type(None): "null"}


def _refuse_misresolved(root: dict[str, Any], nodes: dict[Where, dict[str, Any]], anchors: dict[str, Where],
                        validator: Any) -> None:
    """422 at a reference that a state check would resolve elsewhere than the checks here follow, or to no schema.
    Each reference the draft applies is looked up as jsonschema will (the draft's anchors, found in subschemas only,
    the last of a name winning; the root's base), so the bounds count what runs, and a state check meets neither an
    unresolvable reference nor an array or string where a schema belongs (each was a 500)."""
    from referencing.exceptions import Unresolvable

    from backend.domains.agents.state_validator import resolver_for

    resolver = resolver_for(validator, root)
    for where, node in nodes.items():
        for key in _REFS:
            ref = node.get(key)
            if key not in validator.VALIDATORS or not isinstance(ref, str):
                continue
            looked_up = "#" if key == "$recursiveRef" else ref  # jsonschema resolves `$recursiveRef` as `#`
            target = _target(root, looked_up, anchors)
            try:
                found = resolver.lookup(looked_up).contents
            # referencing fails crawling Draft 4-7 `dependencies` that mix schemas and arrays; only a `#name` lookup
            # crawls, and a `#name` resolves in no such draft (they have no `$anchor`, and `$id` is refused below)
            except (Unresolvable, AttributeError, TypeError):
                found = _NOWHERE
            if target is None or found is not _at(root, target):
                raise ValidationFailed(
                    f"`{key}` {ref!r} points nowhere inside this schema when a state is checked, as its draft "
                    "resolves it: an `$anchor` counts from Draft 2019-09 on, only in a subschema (under "
                    "`properties`, `$defs`, `allOf` or the like) and once per name. Point it at a subschema with "
                    "`#/…`.", param=_path(PARAM, [*where, key]), code="invalid_schema")
            if not isinstance(found, dict | bool):
                raise ValidationFailed(
                    f"`{key}` {ref!r} points at {_JSON_KINDS.get(type(found), 'a value')}, not a schema. Point it at "
                    "a subschema (an object or a boolean).", param=_path(PARAM, [*where, key]), code="invalid_schema")


def _refuse_cycles(root: dict[str, Any], nodes: dict[Where, dict[str, Any]], anchors: dict[str, Where]) -> None:
    """THR-11/TRN-5: 422 at the `$ref` closing a chain of references that comes back to a schema it started from
    without passing a keyword that takes a part of the value (`properties`, `items`, …), such as `{"$ref": "#"}`:
    the schema is valid by its meta-schema, but checking any state against it never ends. Also 422 at the start of a
    chain of more than MAX_IN_PLACE such schemas, which ends, but past the interpreter's recursion limit."""
    edges = {where: [(via, target) for via, target in _same_value(node, where, root, anchors) if target in nodes]
             for where, node in nodes.items()}
    state: dict[Where, int] = {}  # 1: on the current chain, 2: done
    chain: dict[Where, int] = {}  # a done schema: the most schemas applied in place after it, one after another
    applied: dict[Where, int] = {}  # a done schema: how many schemas checking a value against it evaluates
    for start in nodes:
        if start in state:
            continue
        state[start] = 1
        stack = [(start, iter(edges[start]))]
        while stack:
            where, pending = stack[-1]
            step = next(pending, None)
            if step is None:
                state[where] = 2
                stack.pop()
                chain[where] = max((chain[target] + 1 for _, target in edges[where]), default=0)
                if chain[where] > MAX_IN_PLACE:
                    via = max(edges[where], key=lambda edge: chain[edge[1]])[0]
                    raise ValidationFailed(
                        f"{_what(root, via)} starts a chain of more than {MAX_IN_PLACE} schemas applied to the same "
                        f"part of the state (through references, `allOf` or the like); a state check follows at "
                        f"most {MAX_IN_PLACE}. Shorten the chain.", param=_path(PARAM, via), code="invalid_schema")
                applied[where] = 1 + sum(applied[target] for _, target in edges[where])
                if applied[where] > MAX_APPLIED:
                    raise ValidationFailed(
                        f"This subschema applies {applied[where]:,} schemas to the same part of the state, counting "
                        f"every path through references, `allOf` and the like; a state check evaluates each, and at "
                        f"most {MAX_APPLIED:,} are allowed. Refer to shared definitions fewer times.",
                        param=_path(PARAM, where), code="invalid_schema")
                continue
            via, target = step
            if state.get(target) == 1:
                raise ValidationFailed(
                    f"{_what(root, via)} leads back to a schema it is reached from without going into a part of the "
                    "state (through `properties`, `items` or the like), so checking a state against it would never "
                    "end. Point it elsewhere or remove the loop.", param=_path(PARAM, via), code="invalid_schema")
            if target not in state:
                state[target] = 1
                stack.append((target, iter(edges[target])))


def _what(root: dict[str, Any], via: Where) -> str:
    return f"`{via[-1]}` {_at(root, via)!r}" if via[-1] in _REFS else "This subschema"


def _at(root: Any, where: Where) -> Any:
    node = root
    for part in where:
        node = node[part]
    return node


def _subschemas(node: dict[str, Any], where: Where) -> Iterator[tuple[Where, Where]]:
    """(keyword's place, subschema's place) of every subschema the node holds."""
    for key, value in node.items():
        if key in (*_SAME_VALUE_ONE, *_PART_ONE) and isinstance(value, dict):
            yield (*where, key), (*where, key)
        elif key in (*_SAME_VALUE_MANY, *_PART_MANY) and isinstance(value, list):
            yield from (((*where, key, i), (*where, key, i)) for i in range(len(value)))
        elif key in (*_SAME_VALUE_MAP, *_PART_MAP) and isinstance(value, dict):
            yield from (((*where, key, name), (*where, key, name)) for name in value)


def _same_value(node: dict[str, Any], where: Where, root: dict[str, Any], anchors: dict[str, Where]
                ) -> Iterator[tuple[Where, Where]]:
    """(keyword's place, schema's place) of the schemas applied to the same value as the node: its references'
    targets and its `allOf`/`anyOf`/`oneOf`/`not`/`if`/`then`/`else`/`dependentSchemas` subschemas."""
    for key in _REFS:
        ref = node.get(key)
        # jsonschema resolves `$recursiveRef` as `#` (then up the dynamic scope, which is this one schema) whatever
        # its value says
        target = _target(root, "#" if key == "$recursiveRef" and isinstance(ref, str) else ref, anchors)
        if target is not None:
            yield (*where, key), target
    for via, target in _subschemas(node, where):
        if via[len(where)] in (*_SAME_VALUE_ONE, *_SAME_VALUE_MANY, *_SAME_VALUE_MAP):
            yield via, target


def _target(root: dict[str, Any], ref: Any, anchors: dict[str, Where]) -> Where | None:
    """The place a `#…` reference points at, or None (not a reference inside this schema)."""
    if not isinstance(ref, str) or not ref.startswith("#"):
        return None
    fragment = unquote(ref[1:])
    if not fragment.startswith("/"):
        return () if fragment == "" else anchors.get(fragment)
    where: list[Any] = []
    node: Any = root
    for raw in fragment[1:].split("/"):
        token = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and token in node:
            where.append(token)
            node = node[token]
        elif isinstance(node, list) and (i := _list_index(token, node)) is not None:
            where.append(i)
            node = node[i]
        else:
            return None
    return tuple(where)
