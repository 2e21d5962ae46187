"""What the keys page reads and changes: the organisation's keys, one key, its audit trail; creating, changing,
revoking and deleting keys. Bodies are sent as mappings so the API judges them and names the path of a bad value."""

from __future__ import annotations

import json
from datetime import date, datetime, time
from typing import Any
from zoneinfo import ZoneInfo

import polars as pl

from dashboard import data
from dashboard.data import _cached, shapes
from shared.client import CoreClient
from shared.schemas.platform import KeyAuditEntry, KeyCreated, KeyOut

CAPABILITIES = ("knowledge", "memory", "threads", "tooling", "compaction", "management", "trust_envelope")
CAPABILITY_HELP = (
    "knowledge: indexes · memory: records (needs knowledge) · threads: keep conversations · tooling: tools · "
    "compaction: summaries of long threads · management: other keys, settings, erasure · trust_envelope: tool "
    "results wrapped as data")
DEFAULT_CAPABILITIES = ["knowledge", "memory", "threads"]
# The rule a key needs to write memory records at all (without one its writes are refused).
WRITE_RULE = {"id": "memory-write-all", "effect": "permit", "kind": "memory_write"}
TRAIL_SCHEMA: dict[str, Any] = {"at": pl.Datetime("us", "UTC"), "action": pl.String, "by": pl.String,
                                "changed": pl.String, "id": pl.String}
RULE_SCHEMA: dict[str, Any] = {"id": pl.String, "effect": pl.String, "kind": pl.String, "actions": pl.String,
                               "match": pl.String, "when": pl.String}


@_cached
def key(client: CoreClient, org: str, key_id: str) -> KeyOut:
    return client.key(org, key_id)


@_cached
def key_trail(client: CoreClient, org: str, key_id: str) -> list[KeyAuditEntry]:
    """The key's audit trail, newest first: a snapshot after every create, change, revoke and delete."""
    return client.key_audit(org, key_id=key_id, limit=200).data


def trail_frame(entries: list[KeyAuditEntry], tz: str) -> pl.DataFrame:
    """One row per entry, with the fields that differ from the entry before it."""
    rows = []
    for n, entry in enumerate(entries):
        before = entries[n + 1].snapshot if n + 1 < len(entries) else {}
        changed = shapes.changes_frame(before, entry.snapshot)["field"].to_list() if before else []
        top = sorted({field.split(".")[0].split("[")[0] for field in changed})
        rows.append({"at": entry.at, "action": entry.action,
                     "by": f"{entry.actor.get('type', '')} {entry.actor.get('id') or ''}".strip(),
                     "changed": ", ".join(top) if before else "(created)" if entry.action == "created" else "",
                     "id": entry.id})
    return pl.DataFrame(rows, schema=TRAIL_SCHEMA).with_columns(pl.col("at").dt.convert_time_zone(tz))


def rules_frame(policy: dict[str, Any]) -> pl.DataFrame:
    """A policy's rules, one per row, as an administrator reads them."""
    rows = [{"id": str(r.get("id", "")), "effect": str(r.get("effect", "")), "kind": str(r.get("kind", "")),
             "actions": ", ".join(r.get("actions") or []) or "every action",
             "match": shapes.shown(r.get("match")) or "—",
             "when": ", ".join(a.get("atom", "?") if isinstance(a, dict) else str(a) for a in r.get("when") or [])
             or "always"} for r in policy.get("rules") or [] if isinstance(r, dict)]
    return pl.DataFrame(rows, schema=RULE_SCHEMA)


def rule_index(param: str | None) -> int | None:
    """`policy.rules[3].kind` → 3: the rule an API refusal names."""
    if not param or not param.startswith("policy.rules["):
        return None
    try:
        return int(param[len("policy.rules["):].split("]")[0])
    except ValueError:
        return None


def policy_document(text: str) -> dict[str, Any]:
    """The policy editor's text as a document; what is not a JSON object is refused in words."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"The policy is not JSON: {exc.msg} (line {exc.lineno}, column {exc.colno}).") from exc
    if not isinstance(value, dict):
        raise ValueError("The policy is a JSON object: {\"indexes\": [...], \"rules\": [...], \"settings\": {...}}.")
    return value


def expiry(day: date | None, tz: str) -> str | None:
    """The last day a key works (in the organisation's zone) as the instant it expires: the end of that day."""
    if day is None:
        return None
    return datetime.combine(day, time(23, 59, 59), ZoneInfo(tz)).isoformat()


def create_body(*, name: str, capabilities: list[str], expires: date | None, tz: str) -> dict[str, Any]:
    body: dict[str, Any] = {"name": name.strip(), "capabilities": list(capabilities)}
    if expires is not None:
        body["expires_at"] = expiry(expires, tz)
    return body


# ---------------------------------------------------------------- changes

def forget_keys() -> None:
    for fn in (data.keys, key, key_trail):
        fn.clear()


def create_key(client: CoreClient, org: str, body: dict[str, Any], *, may_write: bool) -> KeyCreated:
    """Create the key; with `may_write`, add the rule that lets it write memory records to the policy it got."""
    try:
        made = client.create_key(org, body)
        if may_write and not any(r.get("kind") == "memory_write" for r in made.policy.get("rules", [])):
            policy = {**made.policy, "rules": [*made.policy.get("rules", []), WRITE_RULE]}
            changed = client.update_key(org, made.id, {"policy": policy})
            return KeyCreated(**{f: getattr(changed, f) for f in KeyOut.__struct_fields__}, secret=made.secret)
        return made
    finally:
        forget_keys()


def update_key(client: CoreClient, org: str, key_id: str, changes: dict[str, Any]) -> KeyOut:
    try:
        return client.update_key(org, key_id, changes)
    finally:
        forget_keys()


def revoke_key(client: CoreClient, org: str, key_id: str) -> KeyOut:
    try:
        return client.revoke_key(org, key_id)
    finally:
        forget_keys()


def delete_key(client: CoreClient, org: str, key_id: str) -> None:
    try:
        client.delete_key(org, key_id)
    finally:
        forget_keys()


# ---------------------------------------------------------------- the memory configuration

def decay_frame(memory: dict[str, Any]) -> pl.DataFrame:
    """The key's half-lives, one type per row."""
    rows = [{"type": t, "half_life_days": float(v.get("half_life_days", 0)) if isinstance(v, dict) else None}
            for t, v in sorted((memory.get("decay") or {}).items())]
    return pl.DataFrame(rows, schema={"type": pl.String, "half_life_days": pl.Float64})


def memory_body(*, retrieval_tool: bool, write_tool: bool, inject: bool, index_id: str | None, enabled: bool,
                types: list[str], metadata: dict[str, Any], min_confidence: float | None, limit: int | None,
                budget_tokens: int | None, decay_rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The memory editor as the key's `memory` document (sent whole; the API judges every value)."""
    decay: dict[str, Any] = {}
    for row in decay_rows:
        name = str(row.get("type") or "").strip()
        if not name:
            continue
        if name in decay:
            raise ValueError(f"The type `{name}` has two half-lives.")
        days = row.get("half_life_days")
        decay[name] = {"half_life_days": None if days is None or days != days else days}  # NaN: an empty cell
    injection: dict[str, Any] | None = None
    if inject:
        injection = {"index_id": index_id, "enabled": enabled, "types": list(types), "metadata": metadata}
        if min_confidence is not None:
            injection["min_confidence"] = min_confidence
        if limit is not None:
            injection["limit"] = limit
        if budget_tokens is not None:
            injection["budget_tokens"] = budget_tokens
    return {"retrieval_tool": retrieval_tool, "write_tool": write_tool, "injection": injection, "decay": decay}


def keys_table(listed: pl.DataFrame, tz: str) -> pl.DataFrame:
    """The keys as the page lists them: times in the organisation's zone, "never" for no use and no expiry."""
    def when(column: str, missing: str, fmt: str = "%Y-%m-%d %H:%M") -> pl.Expr:
        return pl.col(column).dt.convert_time_zone(tz).dt.strftime(fmt).fill_null(missing)

    return listed.select("name", "status", "capabilities", when("last_used_at", "never").alias("last_used"),
                         when("expires_at", "never").alias("expires"), when("created_at", "", "%Y-%m-%d")
                         .alias("created"), "id")
