"""Pseudonymisation of personal data before text reaches a model (TRN-10, EXT-11).

`detector_for(settings.pii_detector)` gives the configured detector; `Pseudonymizer(detector, entries, known=…,
subject=…)` hides and restores with one thread's placeholders. The mapping's storage is
`backend.domains.privacy`.
"""

from backend.providers.pii.detector import DEFAULT_DETECTOR, DefaultDetector, Detector, detector_for, load_detector
from backend.providers.pii.pseudonymizer import (
    KnownValue,
    Pseudonym,
    Pseudonymizer,
    known_from_attributes,
    placeholder,
)
from backend.providers.pii.spans import KINDS, PiiUnavailable, Span

__all__ = (
    "DEFAULT_DETECTOR",
    "KINDS",
    "DefaultDetector",
    "Detector",
    "KnownValue",
    "PiiUnavailable",
    "Pseudonym",
    "Pseudonymizer",
    "Span",
    "detector_for",
    "known_from_attributes",
    "load_detector",
    "placeholder",
)
