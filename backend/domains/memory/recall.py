"""The recall text (MEM-11): plain text for an LLM's context, in the Synapse layout."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def owner_line(person: str | None, subject_filter: str | None) -> str:
    if person is not None:
        return f"Owner: {person} (with the shared records)"
    if subject_filter is not None:
        return f"Owner: {subject_filter}"
    return "Owner: everyone (the request names no person)"


def render(owner: str, rows: Sequence[Mapping[str, Any]], total: int, verified: int) -> str:
    lines = [owner, f"Memories: {total} total ({verified} verified, {total - verified} unverified)"]
    for number, row in enumerate(rows, start=1):
        lines.append("")
        mark = "verified" if row["verified"] else "unverified"
        lines.append(f"[{number:03d}] {row['type']} ({str(row['priority']).upper()}) [{mark}]")
        if row["key"]:
            lines.append(f"  {row['key']}")
        lines.extend(f"  {line}" for line in (str(row["text"]).splitlines() or [""]))
        if row["tags"]:
            lines.append(f"  Tags: {', '.join(row['tags'])}")
    return "\n".join(lines) + "\n"
