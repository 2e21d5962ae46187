"""Naming the person a request is for (PLT-7)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from backend.errors import BadRequest, storable

SUBJECT_HEADER = "X-Core-Subject"


@dataclass(frozen=True)
class Subject:
    id: str
    attributes: dict[str, list[str]] = field(default_factory=dict)


def check_subject_id(value: Any, param: str) -> str:
    if not isinstance(value, str) or not 1 <= len(value) <= 256 or not value.isprintable():
        raise BadRequest("A subject id is a string of 1 to 256 printable characters.", param=param,
                         code="invalid_subject")
    return value


def parse_subject(raw: Any, param: str) -> Subject:
    if not isinstance(raw, dict):
        raise BadRequest('A subject is an object such as {"id": "anna", "attributes": {"department": ["payroll"]}}.',
                         param=param, code="invalid_subject")
    unknown = set(raw) - {"id", "attributes"}
    if unknown:
        name = sorted(unknown)[0]
        raise BadRequest(f"Unknown subject field `{name}`.", param=f"{param}.{name}", code="invalid_subject")
    subject_id = check_subject_id(raw.get("id"), f"{param}.id")
    attributes = raw.get("attributes") or {}
    if not isinstance(attributes, dict):
        raise BadRequest("`attributes` maps a name to a list of strings.", param=f"{param}.attributes",
                         code="invalid_subject")
    for name, values in attributes.items():
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise BadRequest("Each attribute value is a list of strings.", param=f"{param}.attributes.{name}",
                             code="invalid_subject")
    check_attributes(attributes, f"{param}.attributes")
    return Subject(subject_id, {k: list(v) for k, v in attributes.items()})


def check_attributes(attributes: dict[str, list[str]], param: str) -> None:
    """Attributes are compared with labels in SQL, and PostgreSQL holds no NUL: refuse it here, naming the place,
    rather than fail every later request with an unplaced 422 (for a subject token: every one until it expires)."""
    for name, values in attributes.items():
        if not storable(name):
            raise BadRequest("An attribute name may not contain the NUL character (U+0000) or a lone surrogate "
                             "(U+D800–U+DFFF).", param=param, code="invalid_subject")
        for i, value in enumerate(values):
            if not storable(value):
                raise BadRequest("An attribute value may not contain the NUL character (U+0000) or a lone "
                                 "surrogate (U+D800–U+DFFF).", param=f"{param}.{name}[{i}]", code="invalid_subject")


def subject_from_header(value: str | None) -> Subject | None:
    if value is None:
        return None
    try:
        raw = json.loads(value)
    except (ValueError, RecursionError):  # RecursionError: nested past the decoder's depth (a few KB of `[`)
        raise BadRequest(f"{SUBJECT_HEADER} must be JSON such as {{\"id\": \"anna\"}}.", param=SUBJECT_HEADER,
                         code="invalid_subject") from None
    return parse_subject(raw, SUBJECT_HEADER)


def combine(*named: Subject | None) -> Subject | None:
    """One person per request: naming two different ones is refused with 400."""
    found: Subject | None = None
    for subject in named:
        if subject is None:
            continue
        if found is not None and found.id != subject.id:
            raise BadRequest("This request names two different subjects; name one person per request.",
                             param=SUBJECT_HEADER, code="conflicting_subjects")
        # The first naming wins for attributes: a subject token's signed attributes come first.
        found = found or subject
    return found
