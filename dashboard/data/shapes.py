"""JSON documents as tables an administrator reads and edits: flattened fields, before/after changes, and the
name/value rows of the key/value editors (metadata, labels, attributes). Pure functions; nothing here calls the API.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import polars as pl

FIELD_SCHEMA: dict[str, Any] = {"field": pl.String, "value": pl.String}
CHANGE_SCHEMA: dict[str, Any] = {"field": pl.String, "before": pl.String, "after": pl.String}
PAIR_SCHEMA: dict[str, Any] = {"name": pl.String, "value": pl.String}


def shown(value: Any) -> str:
    """One value as an administrator reads it: text as it is, nothing as an empty cell, the rest as compact JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def flatten(value: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """Nested mappings as dotted paths (`policy.settings.subjects_required`); lists of scalars stay one value, lists
    of objects get an index (`rules[0].id`). An empty mapping is one row, so a field never disappears."""
    if isinstance(value, Mapping):
        if not value:
            return [(prefix, {})] if prefix else []
        rows: list[tuple[str, Any]] = []
        for name in value:
            rows += flatten(value[name], f"{prefix}.{name}" if prefix else str(name))
        return rows
    if isinstance(value, list) and value and any(isinstance(v, Mapping) for v in value):
        return [row for n, item in enumerate(value) for row in flatten(item, f"{prefix}[{n}]")]
    return [(prefix, value)]


def fields_frame(value: Mapping[str, Any]) -> pl.DataFrame:
    """A document as one row per (flattened) field."""
    return pl.DataFrame([{"field": path, "value": shown(v)} for path, v in flatten(value)], schema=FIELD_SCHEMA)


def changes_frame(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None) -> pl.DataFrame:
    """The fields whose value differs between two documents (flattened), before and after."""
    old = dict(flatten(before or {}))
    new = dict(flatten(after or {}))
    rows = [{"field": path, "before": shown(old.get(path)), "after": shown(new.get(path))}
            for path in sorted(old.keys() | new.keys()) if old.get(path) != new.get(path)]
    return pl.DataFrame(rows, schema=CHANGE_SCHEMA)


def detail_frames(detail: Mapping[str, Any]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """An audit event's detail: its before → after changes (when it carries both) and its other fields."""
    if isinstance(detail.get("before"), Mapping) and isinstance(detail.get("after"), Mapping):
        rest = {k: v for k, v in detail.items() if k not in ("before", "after")}
        return changes_frame(detail["before"], detail["after"]), fields_frame(rest)
    return changes_frame({}, {}), fields_frame(detail)


# ---------------------------------------------------------------- key/value editors

def cell_text(value: Any) -> str:
    """A value as its editable cell: text as it is unless it would read back as something else (`"5"`, `"true"`
    are quoted), anything else as JSON; `cell_value` reads every cell back to the value it came from."""
    if isinstance(value, str) and cell_value(value) == value:
        return value
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def pairs_frame(mapping: Mapping[str, Any] | None) -> pl.DataFrame:
    """A mapping as editable name/value rows (`cell_text`)."""
    return pl.DataFrame([{"name": k, "value": cell_text(v)} for k, v in (mapping or {}).items()], schema=PAIR_SCHEMA)


def cell_value(text: str) -> Any:
    """An edited cell: JSON when it reads as JSON (`5`, `true`, `["a", "b"]`, `"5"`), else the text itself."""
    stripped = text.strip()
    try:
        return json.loads(stripped)
    except ValueError:
        return stripped


def pairs_value(rows: list[dict[str, Any]], what: str) -> dict[str, Any]:
    """Edited rows back as a mapping; a value without a name, or a name given twice, is refused in words."""
    found: dict[str, Any] = {}
    for row in rows:
        name = str(row.get("name") or "").strip()
        value = row.get("value")
        if not name:
            if value not in (None, ""):
                raise ValueError(f"A {what} value `{value}` has no name.")
            continue
        if name in found:
            raise ValueError(f"The {what} name `{name}` is given twice.")
        found[name] = cell_value(str(value or ""))
    return found


def attributes_value(rows: list[dict[str, Any]]) -> dict[str, list[str]]:
    """A person's attributes from name/value rows: each value a comma-separated list of strings."""
    found: dict[str, list[str]] = {}
    for row in rows:
        name = str(row.get("name") or "").strip()
        if not name:
            continue
        if name in found:
            raise ValueError(f"The attribute `{name}` is given twice.")
        found[name] = [v.strip() for v in str(row.get("value") or "").split(",") if v.strip()]
    return found
