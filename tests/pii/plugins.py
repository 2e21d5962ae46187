"""Detectors an operator could plug with CORE_PII_DETECTOR (TRN-10), for the tests of loading one."""

from __future__ import annotations

import re
from collections.abc import Sequence

from backend.providers.pii import DefaultDetector, Span

_EMPLOYEE = re.compile(r"\bEMP-\d{5}\b")


class EmployeeNumbers:
    """The default findings plus the organisation's own employee numbers (EMP-12345) as kind EMPLOYEE."""

    def __init__(self) -> None:
        self.default = DefaultDetector()

    def detect(self, text: str) -> Sequence[Span]:
        return [*self.default.detect(text), *(Span(m.start(), m.end(), "EMPLOYEE") for m in _EMPLOYEE.finditer(text))]


class Broken:
    def detect(self, text: str) -> Sequence[Span]:
        raise RuntimeError("model server for NER is down")


class OutOfBounds:
    def detect(self, text: str) -> Sequence[Span]:
        return [Span(0, len(text) + 5, "PERSON")]


class NoDetectMethod:
    pass
