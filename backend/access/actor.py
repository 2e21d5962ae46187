"""Who acted, as the audit trail and history versions name them (PLT-12): a key, an administrator, a subject
token (named by its key) or the system."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Actor:
    type: str  # key | admin | subject | system
    id: str | None


CLI_ACTOR = Actor("system", "cli")  # work an operator runs with the `coremem` command (exports, re-embedding)
BOOTSTRAP_ACTOR = Actor("system", "bootstrap")
