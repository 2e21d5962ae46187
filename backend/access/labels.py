"""Label documents on records and threads (PLT-8, PLT-11): shape, and the organisation's vocabulary."""

from __future__ import annotations

from typing import Any

from backend.errors import ValidationFailed

MAX_LABELS = 32
MAX_VALUE_CHARS = 256
MAX_LIST = 256


def check_label_name(name: str, path: str) -> None:
    """A name a label can have: on a record or thread, and in the vocabulary that lists the allowed ones."""
    if name == "subject":
        raise ValidationFailed("`subject` is the owner's pseudo-label and cannot be set.", param=path)
    if not name or len(name) > 64:
        raise ValidationFailed("A label name is 1 to 64 characters.", param=path)


def check_labels(labels: Any, vocabulary: dict[str, Any] | None, kind: str, param: str = "labels") -> dict[str, Any]:
    """A label maps a name to a string or a list of strings; with a vocabulary, only its names are allowed."""
    if labels is None:
        return {}
    if not isinstance(labels, dict):
        raise ValidationFailed("`labels` maps a label name to a string or a list of strings.", param=param)
    if len(labels) > MAX_LABELS:
        raise ValidationFailed(f"At most {MAX_LABELS} labels.", param=param)
    allowed = (vocabulary or {}).get(kind) if vocabulary else None
    for name, value in labels.items():
        path = f"{param}.{name}"
        check_label_name(name, path)
        values = value if isinstance(value, list) else [value]
        if isinstance(value, list) and len(value) > MAX_LIST:
            raise ValidationFailed(f"At most {MAX_LIST} values under one label.", param=path)
        for item in values:
            if not isinstance(item, str) or not item or len(item) > MAX_VALUE_CHARS:
                raise ValidationFailed(f"A label value is a non-empty string of at most {MAX_VALUE_CHARS} characters.",
                                       param=path)
        if allowed is not None and name not in allowed:
            raise ValidationFailed(f"The label `{name}` is not in the organisation's {kind} vocabulary.", param=path,
                                   code="label_not_in_vocabulary")
    return dict(labels)
