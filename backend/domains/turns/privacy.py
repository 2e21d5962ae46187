"""Pseudonymisation in a turn (TRN-10): what is sent to the model is hidden, what comes back is restored.

Everything the model is sent goes through `hide_messages_aside` or `hide_texts_aside` (in a worker thread); the
answer's words and tool arguments go through `restore_arguments`/`restore` before the platform runs a tool or keeps
an item, so records, items and answers hold real values.
"""

from __future__ import annotations

from backend.domains.privacy.messages import hide_messages_aside, hide_texts_aside, restore_arguments
from backend.domains.privacy.service import wanted

__all__ = ["hide_messages_aside", "hide_texts_aside", "restore_arguments", "wanted"]
