"""Pseudonymisation in a turn (TRN-10): what is sent to the model is hidden, what comes back is restored.

Everything the model is sent goes through `hide_messages`; the answer's words and tool arguments go through
`restore_arguments`/`restore` before the platform runs a tool or keeps an item, so records, items and answers
hold real values.
"""

from __future__ import annotations

from backend.access.context import RequestContext
from backend.domains.privacy.messages import hide_messages, restore_arguments

__all__ = ["hide_messages", "restore_arguments", "wanted"]


def wanted(ctx: RequestContext) -> bool:
    """A key with `privacy.pseudonymize` hides personal data from its models."""
    privacy = (ctx.principal.key or {}).get("privacy") or {}
    return bool(privacy.get("pseudonymize"))
