"""The pages' forms as API requests: widget values in, query Structs and bodies out, bad input refused in words.

Nothing here calls the API: a value the dashboard cannot even send is refused (`ValueError`, whose message the
page shows) before any call, and everything else is left for the API to judge.
"""

from __future__ import annotations

import json
import re
from datetime import date, datetime, time, timedelta
from typing import Any, TypeVar
from zoneinfo import ZoneInfo

import msgspec

from dashboard.data import shapes
from shared.client import query_params
from shared.schemas.memory import MemoryOut, MemoryQuery
from shared.schemas.platform import AuditQuery
from shared.schemas.stores import PreviewIn, PreviewSubject
from shared.schemas.threads import ItemSearchQuery, Role, ThreadQuery

# The owner choice of the records and threads filters.
OWNERS = ("everyone", "one person", "shared only")


class FieldError(ValueError):
    """An editor value the dashboard cannot even send (JSON that does not parse), named like the API's `param`."""

    def __init__(self, param: str, message: str) -> None:
        super().__init__(message)
        self.param = param
        self.message = message


# ---------------------------------------------------------------- values as typed


def pairs(text: str) -> tuple[tuple[str, str], ...]:
    """`team:support, lang:nl` as name/value pairs; an entry without a colon is refused in words."""
    found: list[tuple[str, str]] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        name, colon, value = part.partition(":")
        if not colon or not name.strip() or not value.strip():
            raise ValueError(f"`{part}` is not `name:value`.")
        found.append((name.strip(), value.strip()))
    return tuple(found)


def words(text: str) -> tuple[str, ...]:
    return tuple(w.strip() for w in text.split(",") if w.strip())


def tag_list(text: str, loaded: list[str]) -> list[str]:
    """Tags typed comma-separated; a loaded tag that itself holds a comma (`billing,eu`) stays one tag."""
    parts = text.split(",")
    found: list[str] = []
    start = 0
    while start < len(parts):
        end = next((end for end in range(len(parts), start + 1, -1)
                    if ",".join(parts[start:end]).strip() in loaded), start + 1)
        tag = ",".join(parts[start:end]).strip()
        if tag:
            found.append(tag)
        start = end
    return found


def _wire(found: tuple[tuple[str, str], ...]) -> list[str]:
    return [f"{name}:{value}" for name, value in found]


def period(start: date | None, end: date | None, tz: str) -> tuple[datetime | None, datetime | None]:
    """Calendar days in the organisation's time zone as instants: from the start of `start` to the end of `end`."""
    zone = ZoneInfo(tz)
    return (datetime.combine(start, time(), zone) if start else None,
            datetime.combine(end + timedelta(days=1), time(), zone) if end else None)


# ---------------------------------------------------------------- filters


def audit_filter(*, start: date | None, end: date | None, tz: str, actor_type: str | None, actor_id: str,
                 actions: list[str], object_type: str, object_id: str, person: str,
                 outcome: str | None, exclude: list[str] | None = None) -> AuditQuery:
    """The audit log's filter widgets as the query of `GET /audit`; blank fields do not filter."""
    start_at, end_at = period(start, end, tz)
    return AuditQuery(
        from_=start_at, to=end_at, actor_type=actor_type,  # type: ignore[arg-type]
        actor_id=actor_id.strip() or None, action=[a.strip() for a in actions if a.strip()],
        exclude_action=list(exclude or []),
        object_type=object_type.strip() or None, object_id=object_id.strip() or None,
        subject=person.strip() or None, outcome=outcome,  # type: ignore[arg-type]
    )


def memory_filter(*, index_id: str | None, types: list[str], person: str, tags: str, labels: str, metadata: str,
                  q: str, min_confidence: float, include_expired: bool, include_replaced: bool,
                  shared: bool = False) -> MemoryQuery:
    """The records page's filter widgets as the query of `GET /memory`; blank fields do not filter."""
    return MemoryQuery(index_id=index_id or None, type=[t.strip() for t in types if t.strip()],
                       subject=None if shared else person.strip() or None, shared=shared, tag=list(words(tags)),
                       label=_wire(pairs(labels)), metadata=_wire(pairs(metadata)), q=q.strip() or None,
                       min_confidence=min_confidence if min_confidence > 0 else None,
                       include_expired=include_expired, include_replaced=include_replaced)


Q = TypeVar("Q", bound=msgspec.Struct)
FILTER_WORDS = {"type": "Types", "tag": "Tags", "q": "Text search", "label": "Labels", "metadata": "Metadata",
                "subject": "Person id"}


def checked_filter(query: Q) -> Q:
    """The query as the client would send it, or a `ValueError` naming the filter to fix (DSH-1): the client
    refuses what the API would (an unknown type, a 65-character tag, too long a text search, too many filters)."""
    try:
        query_params(query)
    except ValueError as exc:
        found = re.search(r"`\$\.(\w+)", str(exc))
        field = FILTER_WORDS.get(found.group(1), found.group(1)) if found else "a filter"
        raise FilterError(f"The *{field}* filter cannot be used: {exc}") from None
    return query


class FilterError(ValueError):
    """A filter the API would refuse, in words naming the field."""


def thread_owner(owner: str, person: str) -> str | None:
    """The owner choice as `GET /threads?subject=`: None lists everyone's, `""` the shared threads."""
    if owner == "shared only":
        return ""
    if owner == "one person":
        return person.strip() or None
    return None


def thread_filter(*, owner: str, person: str, metadata: str, labels: str) -> ThreadQuery:
    """The threads page's filter widgets as the query of `GET /threads`; blank fields do not filter."""
    return ThreadQuery(subject=thread_owner(owner, person), metadata=_wire(pairs(metadata)),
                       label=_wire(pairs(labels)))


def message_search(*, q: str, role: Role | None, thread_id: str, start: date | None, end: date | None,
                   notes: str, notes_by: str, tz: str) -> ItemSearchQuery:
    """The search form as the query of `GET /thread-items`. Days are calendar days in the organisation's zone,
    `end` included."""
    start_at, end_at = period(start, end, tz)
    return ItemSearchQuery(q=q.strip() or None, thread_id=thread_id.strip() or None, role=role, from_=start_at,
                           to=end_at, metadata=_wire(pairs(notes)), metadata_by=notes_by.strip() or None)


# ---------------------------------------------------------------- bodies


def preview_body(*, person: str, attributes_json: str, nobody: bool, key_id: str | None, turn_input: str,
                 store_override: bool = False, agent_id: str | None = None) -> PreviewIn:
    """The previewer's form as the API's request; bad attributes are refused in words before any call."""
    subject = None
    if not nobody:
        if not person.strip():
            raise ValueError("Name the person (her id), or tick *Nobody*.")
        try:
            attributes = json.loads(attributes_json) if attributes_json.strip() else {}
        except ValueError as exc:
            raise ValueError(f"Attributes must be JSON such as {{\"department\": [\"payroll\"]}}: {exc}") from None
        if not isinstance(attributes, dict) or not all(
                isinstance(v, list) and all(isinstance(x, str) for x in v) for v in attributes.values()):
            raise ValueError("Attributes map a name to a list of strings, such as {\"department\": [\"payroll\"]}.")
        subject = PreviewSubject(id=person.strip(), attributes=attributes)
    return PreviewIn(subject=subject, key_id=key_id or None, agent_id=agent_id or None, input=turn_input or None,
                     store_override=store_override)


def record_changes(record: MemoryOut, *, text: str, confidence: float, priority: str, tags: str | None,
                   metadata: dict[str, Any] | None, labels: dict[str, Any] | None) -> dict[str, Any]:
    """The edit form's fields that differ from the record, as a PATCH body (only what changed). `None` for tags,
    metadata or labels means the administrator left that editor untouched: it is not re-read (a loaded tag may
    hold a comma, a metadata name may be empty or padded) and not sent."""
    changes: dict[str, Any] = {}
    if text != record.text:
        changes["text"] = text
    if round(confidence, 4) != round(record.confidence, 4):
        changes["confidence"] = confidence
    if priority != record.priority:
        changes["priority"] = priority
    if tags is not None and tag_list(tags, record.tags) != record.tags:
        changes["tags"] = tag_list(tags, record.tags)
    for name, value, current in (("metadata", metadata, record.metadata), ("labels", labels, record.labels)):
        if value is not None and value != current:
            changes[name] = value
    return changes


def section_input(before: dict[str, Any], entered: dict[str, Any], section: str) -> dict[str, Any]:
    """The editor's values as the section to send: name/value rows as maps (`data.shapes.pairs_value`); numbers
    left for the API to judge."""
    after: dict[str, Any] = {}
    for name, value in entered.items():
        current = before.get(name)
        if isinstance(current, dict):
            try:
                after[name] = shapes.pairs_value(list(value), "setting")
            except ValueError as exc:
                raise FieldError(f"{section}.{name}", str(exc)) from exc
        elif isinstance(value, float) and value.is_integer():
            after[name] = int(value)
        else:
            after[name] = value
    return after
