"""The pluggable PII detector (TRN-10, EXT-11): one interface, a default, and loading another by class path.

An operator plugs a detector with `CORE_PII_DETECTOR=package.module:ClassName` (or `package.module.ClassName`):
a class whose instances are made without arguments and answer `detect(text) -> Sequence[Span]`. It may name
kinds beyond the default ones (any `[A-Z][A-Z0-9]*`, which becomes `<KIND_1>`).
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from functools import lru_cache
from typing import Protocol, runtime_checkable

from backend.providers.pii.patterns import find_addresses, find_cards, find_emails, find_ibans, find_phones, find_urls
from backend.providers.pii.persons import find_people
from backend.providers.pii.spans import PiiUnavailable, Span, resolve

DEFAULT_DETECTOR = "backend.providers.pii.detector:DefaultDetector"


@runtime_checkable
class Detector(Protocol):
    def detect(self, text: str) -> Sequence[Span]: ...


class DefaultDetector:
    """E-mail addresses, URLs, IBANs, payment cards, phone numbers, street addresses and person names, in
    English and Dutch; overlaps go to the longer finding ("anna@example.com" is one e-mail, not a name)."""

    def detect(self, text: str) -> Sequence[Span]:
        found: list[Span] = []
        for finder in (find_emails, find_urls, find_ibans, find_cards, find_phones, find_addresses, find_people):
            found.extend(finder(text))
        return resolve(found)


def load_detector(path: str = DEFAULT_DETECTOR) -> Detector:
    """The detector named by `module:Class` or `module.Class`; PiiUnavailable when it cannot be made."""
    module_name, sep, class_name = path.partition(":")
    if not sep:
        module_name, _, class_name = path.rpartition(".")
    try:
        detector = getattr(importlib.import_module(module_name), class_name)()
    except Exception as exc:  # an operator's class may fail in any way; the turn must not send unhidden text
        raise PiiUnavailable(f"The PII detector {path!r} could not be loaded: {exc}") from exc
    if not isinstance(detector, Detector):
        raise PiiUnavailable(f"The PII detector {path!r} has no detect(text) method.")
    return detector


@lru_cache(maxsize=8)
def detector_for(path: str) -> Detector:
    """One detector per class path for the process (the default one keeps no state between texts)."""
    return load_detector(path)
