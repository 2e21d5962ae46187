"""What the pages read: the session's API client, and cached calls through it answered as polars frames.

The dashboard never reaches the database (house rule 7): every read goes through `shared.client`, so the
API checks and audits it (PLT-2). Caches are per session, keyed by the client's URL, token and
organisation, and short-lived, so one administrator's answers are never served to another.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
from bisect import bisect_left
from collections.abc import Sequence
from datetime import date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import msgspec
import polars as pl
import streamlit as st

from shared.client import API_URL_ENV, DEFAULT_API_URL, ApiError, CoreClient
from shared.schemas.memory import MemoryHistory, MemoryOut, MemoryQuery
from shared.schemas.platform import AdminOut, AuditEventOut, AuditQuery, ChainStatus
from shared.schemas.stores import PreviewIn, PreviewOut, PreviewSubject, StoreSettingsOut
from shared.schemas.threads import (
    ContentPart,
    FunctionCallOut,
    FunctionCallOutputOut,
    Highlight,
    InputFile,
    InputImage,
    ItemOut,
    ItemSearchQuery,
    MessageOut,
    ReasoningOut,
    RefusalOut,
    RefusalPart,
    Role,
    SearchPage,
    StateOut,
    ThreadOut,
    ThreadQuery,
    ThreadStats,
)

CACHE_SECONDS = 30
KEY_STATUSES = ("active", "revoked", "expired")
# Actions the platform writes today; the filter accepts any other name typed in (memory, threads, ...).
KNOWN_ACTIONS = ("audit.read", "index.created", "index.deleted", "key.changed", "key.created", "key.deleted",
                 "key.revoked", "org.updated", "org.vocabulary_changed", "store.settings_changed")
# Record types the filter offers; any other lowercase name can be typed in.
KNOWN_TYPES = ("fact", "preference", "behaviour", "commitment", "lesson", "episode")
SETTINGS_SECTIONS = ("injection", "commitments", "lessons", "promotion", "maintenance")
SETTINGS_CHANGED = "store.settings_changed"
# Settings whose value is one of a few names (the API's Literal); the editor offers them in a select box.
SETTING_CHOICES: dict[str, list[str]] = {"injection.rank": ["confidence", "relevance", "blend"]}

# session_state keys
CLIENT = "client"
ADMIN = "admin"
ORG = "org_id"
NOTICE = "notice"

EVENT_SCHEMA: dict[str, Any] = {
    "seq": pl.Int64, "at": pl.Datetime("us", "UTC"), "action": pl.String, "outcome": pl.String,
    "actor_type": pl.String, "actor_id": pl.String, "object_type": pl.String, "object_id": pl.String,
    "subject": pl.String, "detail": pl.String, "id": pl.String, "hash": pl.String,
}

_cached = st.cache_data(ttl=CACHE_SECONDS, show_spinner=False, scope="session",
                        hash_funcs={CoreClient: CoreClient.cache_key})


# ---------------------------------------------------------------- the session


def api_url() -> str:
    """Where the API is: the session's override (tests), else CORE_API_URL, else the local default."""
    return str(st.session_state.get("api_url") or os.environ.get(API_URL_ENV) or DEFAULT_API_URL)


def signed_in() -> bool:
    return CLIENT in st.session_state and ADMIN in st.session_state


def log_in(email: str, password: str) -> AdminOut:
    client = CoreClient(api_url())
    try:
        result = client.login(email, password)
    except ApiError:
        client.close()
        raise
    client.org_id = result.admin.org_id
    st.session_state[CLIENT] = client
    st.session_state[ADMIN] = result.admin
    st.session_state[ORG] = result.admin.org_id
    return result.admin


def log_out(notice: str | None = None) -> None:
    """End the token at the API (best effort: it may have expired already) and forget the session."""
    client: CoreClient | None = st.session_state.get(CLIENT)
    if client is not None:
        with contextlib.suppress(ApiError):
            client.logout()
        client.close()
    for key in list(st.session_state.keys()):
        if key != "api_url":
            del st.session_state[key]
    if notice:
        st.session_state[NOTICE] = notice


def client() -> CoreClient:
    found: CoreClient = st.session_state[CLIENT]
    return found


def admin() -> AdminOut:
    found: AdminOut = st.session_state[ADMIN]
    return found


def org_id() -> str | None:
    value = st.session_state.get(ORG)
    return str(value) if value else None


def choose_org(value: str | None) -> None:
    """An operator names the organisation; every later call carries it (X-Core-Org)."""
    if value == org_id():
        return
    client().org_id = value
    st.session_state[ORG] = value
    for key in [k for k in st.session_state if str(k).startswith(("audit_", "records_", "stores_", "threads_"))]:
        del st.session_state[key]


def refresh() -> None:
    """Forget the cached answers so the next run asks the API again."""
    for fn in (organisations, org_timezone, indexes, keys, audit_page, recent_events, chain_status, memory_page,
               matching_records, memory_record, memory_history, store_settings, store_counts, thread_counts):
        fn.clear()
    forget_threads()


# ---------------------------------------------------------------- organisations, indexes, keys


@_cached
def organisations(client: CoreClient) -> pl.DataFrame:
    rows = [{"id": o.id, "name": o.name, "timezone": o.timezone} for o in client.orgs().data]
    return pl.DataFrame(rows, schema={"id": pl.String, "name": pl.String, "timezone": pl.String})


@_cached
def org_timezone(client: CoreClient, org: str) -> str:
    """The organisation's IANA time zone; times on the pages are shown in it."""
    name = client.org(org).timezone
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return "UTC"
    return name


@_cached
def indexes(client: CoreClient) -> pl.DataFrame:
    rows = [{"id": i.id, "name": i.name,
             "embedding": f"{i.embedding.provider} · {i.embedding.model} · {i.embedding.dimensions}d"
             if i.embedding else "none",
             "created_at": i.created_at} for i in client.all_indexes()]
    return pl.DataFrame(rows, schema={"id": pl.String, "name": pl.String, "embedding": pl.String,
                                      "created_at": pl.Datetime("us", "UTC")})


@_cached
def keys(client: CoreClient, org: str) -> pl.DataFrame:
    rows = [{"id": k.id, "name": k.name, "status": k.status, "capabilities": k.capabilities,
             "created_at": k.created_at, "expires_at": k.expires_at, "revoked_at": k.revoked_at}
            for k in client.all_keys(org)]
    return pl.DataFrame(rows, schema={"id": pl.String, "name": pl.String, "status": pl.String,
                                      "capabilities": pl.List(pl.String), "created_at": pl.Datetime("us", "UTC"),
                                      "expires_at": pl.Datetime("us", "UTC"), "revoked_at": pl.Datetime("us", "UTC")})


def active_keys(client: CoreClient, org: str) -> pl.DataFrame:
    return keys(client, org).filter(pl.col("status") == "active")


def keys_by_status(frame: pl.DataFrame) -> dict[str, int]:
    counts = dict.fromkeys(KEY_STATUSES, 0)
    for row in frame.group_by("status").len().iter_rows():
        counts[row[0]] = int(row[1])
    return counts


# ---------------------------------------------------------------- audit trail


def events_frame(events: list[AuditEventOut], tz: str) -> pl.DataFrame:
    rows = [{"seq": e.seq, "at": e.at, "action": e.action, "outcome": e.outcome, "actor_type": e.actor.type,
             "actor_id": e.actor.id, "object_type": e.object_type, "object_id": e.object_id, "subject": e.subject,
             "detail": json.dumps(e.detail, sort_keys=True, default=str), "id": e.id, "hash": e.hash}
            for e in events]
    frame = pl.DataFrame(rows, schema=EVENT_SCHEMA)
    return frame.with_columns(pl.col("at").dt.convert_time_zone(tz))


def period(start: date | None, end: date | None, tz: str) -> tuple[datetime | None, datetime | None]:
    """Calendar days in the organisation's time zone as instants: from the start of `start` to the end of `end`."""
    zone = ZoneInfo(tz)
    return (datetime.combine(start, time(), zone) if start else None,
            datetime.combine(end + timedelta(days=1), time(), zone) if end else None)


@_cached
def audit_page(client: CoreClient, filters: AuditQuery, cursor: str | None, limit: int,
               tz: str) -> tuple[pl.DataFrame, str | None]:
    """One page of events, newest first, and the cursor of the next (older) page."""
    page = client.audit(filters, cursor=cursor, limit=limit)
    return events_frame(page.data, tz), page.next_cursor


@_cached
def recent_events(client: CoreClient, first_day: str, max_events: int, tz: str) -> pl.DataFrame:
    """The newest events (at most `max_events`) since the start of `first_day` in the organisation's zone."""
    since, _ = period(date.fromisoformat(first_day), None, tz)
    return events_frame(client.audit_events(AuditQuery(from_=since), max_events=max_events), tz)


def events_per_day(frame: pl.DataFrame) -> pl.DataFrame:
    """Event counts per local calendar day (`YYYY-MM-DD`) and action, for the stacked chart."""
    return (frame.with_columns(pl.col("at").dt.strftime("%Y-%m-%d").alias("day"))
            .group_by("day", "action").len(name="events").sort("day", "action"))


def last_days(days: int, tz: str) -> list[str]:
    """The last `days` calendar days in the organisation's time zone, oldest first, as `YYYY-MM-DD`."""
    today = datetime.now(ZoneInfo(tz)).date()
    return [(today - timedelta(days=n)).isoformat() for n in range(days - 1, -1, -1)]


@_cached
def chain_status(client: CoreClient) -> ChainStatus:
    return client.audit_verify()


def audit_filter(*, start: date | None, end: date | None, tz: str, actor_type: str | None, actor_id: str,
                 actions: list[str], object_type: str, object_id: str, person: str,
                 outcome: str | None) -> AuditQuery:
    """The page's filter widgets as the query of `GET /audit`; blank fields do not filter."""
    start_at, end_at = period(start, end, tz)
    return AuditQuery(
        from_=start_at, to=end_at, actor_type=actor_type,  # type: ignore[arg-type]
        actor_id=actor_id.strip() or None, action=[a.strip() for a in actions if a.strip()],
        object_type=object_type.strip() or None, object_id=object_id.strip() or None,
        subject=person.strip() or None, outcome=outcome,  # type: ignore[arg-type]
    )


# ---------------------------------------------------------------- injection previewer (DSH-6)

LEFT_OUT_SCHEMA: dict[str, Any] = {"id": pl.String, "section": pl.String, "type": pl.String, "reason": pl.String}


def preview_body(*, person: str, attributes_json: str, nobody: bool, key_id: str | None, turn_input: str,
                 store_override: bool = False) -> PreviewIn:
    """The previewer's form as the API's request; bad attributes are refused in words before any call."""
    subject = None
    if not nobody:
        if not person.strip():
            raise ValueError("Name the person (her id), or tick *Nobody*.")
        try:
            attributes = json.loads(attributes_json) if attributes_json.strip() else {}
        except ValueError as exc:
            raise ValueError(f"Attributes must be JSON such as {{\"department\": [\"payroll\"]}}: {exc}") from None
        if not isinstance(attributes, dict) or not all(
                isinstance(v, list) and all(isinstance(x, str) for x in v) for v in attributes.values()):
            raise ValueError("Attributes map a name to a list of strings, such as {\"department\": [\"payroll\"]}.")
        subject = PreviewSubject(id=person.strip(), attributes=attributes)
    return PreviewIn(subject=subject, key_id=key_id or None, input=turn_input or None, store_override=store_override)


def run_preview(client: CoreClient, index_id: str, body: PreviewIn) -> PreviewOut:
    # Not cached: every preview is an audited read the administrator asked for.
    return client.injection_preview(index_id, body)


def section_breakdown(result: PreviewOut) -> pl.DataFrame:
    """Records and tokens per section, in the order sections print."""
    rows = [{"section": section, "records": count,
             "tokens": sum(r.tokens for r in result.records if r.section == section)}
            for section, count in result.trace.sections.items()]
    return pl.DataFrame(rows, schema={"section": pl.String, "records": pl.Int64, "tokens": pl.Int64})


def left_out_frame(result: PreviewOut) -> pl.DataFrame:
    rows = [{"id": x.id, "section": x.section, "type": x.type, "reason": x.reason} for x in result.trace.left_out]
    return pl.DataFrame(rows, schema=LEFT_OUT_SCHEMA)


# ---------------------------------------------------------------- memory records

RECORD_SCHEMA: dict[str, Any] = {
    "id": pl.String, "store": pl.String, "owner": pl.String, "type": pl.String, "text": pl.String,
    "effective": pl.Float64, "stored": pl.Float64, "tags": pl.List(pl.String), "priority": pl.String,
    "status": pl.String, "verified": pl.Boolean, "contested": pl.Boolean, "source": pl.String,
    "version": pl.Int64, "updated_at": pl.Datetime("us", "UTC"), "expires_at": pl.Datetime("us", "UTC"),
}
SHARED = "shared"


def pairs(text: str) -> tuple[tuple[str, str], ...]:
    """`team:support, lang:nl` as name/value pairs; an entry without a colon is refused in words."""
    found: list[tuple[str, str]] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        name, colon, value = part.partition(":")
        if not colon or not name.strip() or not value.strip():
            raise ValueError(f"`{part}` is not `name:value`.")
        found.append((name.strip(), value.strip()))
    return tuple(found)


def words(text: str) -> tuple[str, ...]:
    return tuple(w.strip() for w in text.split(",") if w.strip())


def memory_filter(*, index_id: str | None, types: list[str], person: str, tags: str, labels: str, metadata: str,
                  q: str, min_confidence: float, include_expired: bool, include_replaced: bool,
                  shared: bool = False) -> MemoryQuery:
    """The records page's filter widgets as the query of `GET /memory`; blank fields do not filter."""
    return MemoryQuery(index_id=index_id or None, type=[t.strip() for t in types if t.strip()],
                       subject=None if shared else person.strip() or None, shared=shared, tag=list(words(tags)),
                       label=_wire(pairs(labels)), metadata=_wire(pairs(metadata)), q=q.strip() or None,
                       min_confidence=min_confidence if min_confidence > 0 else None,
                       include_expired=include_expired, include_replaced=include_replaced)


def _wire(found: tuple[tuple[str, str], ...]) -> list[str]:
    return [f"{name}:{value}" for name, value in found]


def records_frame(records: list[MemoryOut], tz: str, store_names: dict[str, str] | None = None) -> pl.DataFrame:
    names = store_names or {}
    rows = [{"id": r.id, "store": names.get(r.index_id, r.index_id), "owner": r.subject or SHARED, "type": r.type,
             "text": r.text, "effective": r.effective_confidence, "stored": r.confidence, "tags": r.tags,
             "priority": r.priority, "status": r.status, "verified": r.verified, "contested": r.contested,
             "source": r.source, "version": r.version, "updated_at": r.updated_at, "expires_at": r.expires_at}
            for r in records]
    frame = pl.DataFrame(rows, schema=RECORD_SCHEMA)
    return frame.with_columns(pl.col("updated_at", "expires_at").dt.convert_time_zone(tz))


@_cached
def memory_page(client: CoreClient, filters: MemoryQuery, cursor: str | None, limit: int
                ) -> tuple[list[MemoryOut], str | None]:
    """One page of records, newest first, and the cursor of the next page (the API audits the read)."""
    page = client.memory(filters, cursor=cursor, limit=limit)
    return page.data, page.next_cursor


@_cached
def matching_records(client: CoreClient, filters: MemoryQuery) -> int:
    """How many records the filter keeps over every page (`GET /memory/stats`, audited by the API)."""
    return client.memory_stats(filters).records


@_cached
def memory_record(client: CoreClient, record_id: str) -> MemoryOut:
    return client.memory_record(record_id)


def record_document(record: MemoryOut) -> dict[str, Any]:
    """Every field of a record as JSON-ready values (instants as ISO text)."""
    found: dict[str, Any] = msgspec.to_builtins(record)
    return found


@_cached
def memory_history(client: CoreClient, record_id: str) -> MemoryHistory:
    return client.memory_history(record_id)


def history_frame(history: MemoryHistory, tz: str) -> pl.DataFrame:
    rows = [{"version": v.version, "at": v.at, "action": v.action,
             "actor": f"{v.actor.type} {v.actor.id or ''}".strip(),
             "partner": v.partner_id, "text": v.text, "confidence": v.confidence, "status": v.status,
             "verified": v.verified, "tags": v.tags, "priority": v.priority} for v in history.versions]
    frame = pl.DataFrame(rows, schema={"version": pl.Int64, "at": pl.Datetime("us", "UTC"), "action": pl.String,
                                       "actor": pl.String, "partner": pl.String, "text": pl.String,
                                       "confidence": pl.Float64, "status": pl.String, "verified": pl.Boolean,
                                       "tags": pl.List(pl.String), "priority": pl.String})
    return frame.with_columns(pl.col("at").dt.convert_time_zone(tz))


def thread_ids(provenance: dict[str, Any] | None) -> list[str]:
    """Every thread id a record's provenance names (`thread_id`, `threads`, nested ones)."""
    found: list[str] = []

    def walk(value: Any, key: str = "") -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                walk(v, str(k))
        elif isinstance(value, list):
            for v in value:
                walk(v, key)
        elif isinstance(value, str) and "thread" in key and value not in found:
            found.append(value)

    walk(provenance or {})
    return found


def forget_memory() -> None:
    """After a change: the next run asks the API again for lists, the record and its history."""
    for fn in (memory_page, matching_records, memory_record, memory_history, store_counts):
        fn.clear()


def record_changes(record: MemoryOut, *, text: str, confidence: float, priority: str, tags: str,
                   metadata: str, labels: str) -> dict[str, Any]:
    """The edit form's fields that differ from the record, as a PATCH body (only what changed)."""
    changes: dict[str, Any] = {}
    if text != record.text:
        changes["text"] = text
    if round(confidence, 4) != round(record.confidence, 4):
        changes["confidence"] = confidence
    if priority != record.priority:
        changes["priority"] = priority
    new_tags = list(words(tags))
    if new_tags != record.tags:
        changes["tags"] = new_tags
    for name, raw, current in (("metadata", metadata, record.metadata), ("labels", labels, record.labels)):
        try:
            value = json.loads(raw or "{}")
        except json.JSONDecodeError as exc:
            raise ValueError(f"`{name}` is not JSON: {exc.msg} (line {exc.lineno}).") from exc
        if value != current:
            changes[name] = value
    return changes


def edit_record(client: CoreClient, record_id: str, changes: dict[str, Any]) -> MemoryOut:
    try:
        return client.update_memory(record_id, changes)
    finally:
        forget_memory()


def verify_record(client: CoreClient, record_id: str) -> MemoryOut:
    try:
        return client.verify_memory(record_id)
    finally:
        forget_memory()


def delete_record(client: CoreClient, record_id: str) -> None:
    try:
        client.delete_memory(record_id)
    finally:
        forget_memory()


@_cached
def store_counts(client: CoreClient) -> tuple[pl.DataFrame, int]:
    """Active, unexpired records per store, type and owner kind (`GET /memory/stats`, exact over every page),
    and how many people own at least one of them."""
    stats = client.memory_stats()
    rows = [{"store": g.index_id, "type": g.type, "owner": SHARED if g.shared else "personal", "records": g.records}
            for g in stats.groups]
    schema = {"store": pl.String, "type": pl.String, "owner": pl.String, "records": pl.UInt32}
    return pl.DataFrame(rows, schema=schema), stats.people


@_cached
def thread_counts(client: CoreClient) -> ThreadStats:
    """Threads of the organisation and their messages per role (`GET /threads/stats`, audited by the API)."""
    return client.thread_stats()


def counts_by_store(counts: pl.DataFrame, names: dict[str, str]) -> pl.DataFrame:
    """One row per store and type: personal, shared and all records."""
    wide = (counts.pivot(on="owner", index=["store", "type"], values="records", aggregate_function="sum")
            if not counts.is_empty() else pl.DataFrame(schema={"store": pl.String, "type": pl.String}))
    for column in ("personal", SHARED):
        if column not in wide.columns:
            wide = wide.with_columns(pl.lit(0, dtype=pl.UInt32).alias(column))
    wide = wide.with_columns(pl.col("personal", SHARED).fill_null(0))
    return (wide.with_columns((pl.col("personal") + pl.col(SHARED)).alias("records"),
                              pl.col("store").replace(names).alias("store"))
            .select("store", "type", "records", "personal", SHARED).sort("store", "type"))


# ---------------------------------------------------------------- store settings


@_cached
def store_settings(client: CoreClient, index_id: str) -> StoreSettingsOut:
    return client.store_settings(index_id)


def section_values(settings: StoreSettingsOut, section: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A section's effective values and its defaults, as plain dicts."""
    return (msgspec.to_builtins(getattr(settings, section)), msgspec.to_builtins(getattr(settings.defaults, section)))


def section_frame(settings: StoreSettingsOut, section: str) -> pl.DataFrame:
    """One row per setting: effective value, default, and whether they differ (shown as text, JSON for maps)."""
    effective, defaults = section_values(settings, section)
    rows = []
    for name, value in effective.items():
        default = defaults.get(name)
        shown = _shown(default)
        if section == "injection" and name == "budget_tokens" and default is None:
            # No budget of its own means the installation's ceiling, which is what the API reports as effective.
            default, shown = settings.max_budget_tokens, f"none (the ceiling, {settings.max_budget_tokens})"
        rows.append({"setting": name, "effective": _shown(value), "default": shown, "differs": value != default})
    return pl.DataFrame(rows, schema={"setting": pl.String, "effective": pl.String, "default": pl.String,
                                      "differs": pl.Boolean})


def _shown(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, dict | list | bool):
        return json.dumps(value, sort_keys=True)
    return str(value)


def section_diff(before: dict[str, Any], after: dict[str, Any]) -> pl.DataFrame:
    """The settings a save would change: name, before, after."""
    rows = [{"setting": name, "before": _shown(before.get(name)), "after": _shown(after.get(name))}
            for name in after if after.get(name) != before.get(name)]
    return pl.DataFrame(rows, schema={"setting": pl.String, "before": pl.String, "after": pl.String})


class FieldError(ValueError):
    """An editor value the dashboard cannot even send (JSON that does not parse), named like the API's `param`."""

    def __init__(self, param: str, message: str) -> None:
        super().__init__(message)
        self.param = param
        self.message = message


def section_input(before: dict[str, Any], entered: dict[str, Any], section: str) -> dict[str, Any]:
    """The editor's values as the section to send: JSON text parsed for maps; numbers left for the API to judge."""
    after: dict[str, Any] = {}
    for name, value in entered.items():
        current = before.get(name)
        if isinstance(current, dict | list):
            try:
                parsed = json.loads(value or "{}")
            except json.JSONDecodeError as exc:
                raise FieldError(f"{section}.{name}", f"`{name}` is not JSON: {exc.msg} (line {exc.lineno}).") from exc
            if not isinstance(parsed, dict):
                raise FieldError(f"{section}.{name}", f"`{name}` must be a JSON object such as {{}}.")
            after[name] = parsed
        elif isinstance(value, float) and value.is_integer():
            after[name] = int(value)
        else:
            after[name] = value
    return after


def save_section(client: CoreClient, index_id: str, section: str, value: dict[str, Any]) -> StoreSettingsOut:
    """Replace one section whole; the API judges the values (its 422 names `section.field`)."""
    try:
        return client.update_store_settings(index_id, {section: value})
    finally:
        store_settings.clear()
        settings_history.clear()


@_cached
def settings_history(client: CoreClient, index_id: str, limit: int, tz: str) -> pl.DataFrame:
    """The store's `store.settings_changed` events, newest first."""
    page = client.audit(AuditQuery(action=[SETTINGS_CHANGED], object_id=index_id), limit=limit)
    return events_frame(page.data, tz)


# ---------------------------------------------------------------- export (DSH-10)

EXPORT_MEDIA = {"parquet": "application/vnd.apache.parquet", "csv": "text/csv", "ndjson": "application/x-ndjson"}


def export_file(client: CoreClient, filters: MemoryQuery, fmt: str) -> bytes:
    """The records of the page's filter as a file, through `GET /memory/export` (audited by the API)."""
    buffer = io.BytesIO()
    client.export_records(buffer, filters, format=fmt)  # type: ignore[arg-type]
    return buffer.getvalue()


# ---------------------------------------------------------------- threads (DSH-7)

# Who wrote an item, or whose note it is, when the request named nobody (the organisation's own request).
BY_ORGANISATION = "(organisation)"
CLIPPED_CHARS = 200  # tool arguments and outputs are shown this long in the items table
THREAD_OWNERS = ("everyone", "one person", "shared only")
THREAD_SCHEMA: dict[str, Any] = {
    "id": pl.String, "owner": pl.String, "user": pl.Int64, "assistant": pl.Int64, "developer": pl.Int64,
    "metadata": pl.String, "labels": pl.String, "created_at": pl.Datetime("us", "UTC"),
    "updated_at": pl.Datetime("us", "UTC"),
}
ITEM_SCHEMA: dict[str, Any] = {
    "position": pl.Int64, "created_at": pl.Datetime("us", "UTC"), "type": pl.String, "role": pl.String,
    "writer": pl.String, "text": pl.String, "id": pl.String, "response_id": pl.String,
}
NOTE_SCHEMA: dict[str, Any] = {"by": pl.String, "note": pl.String, "updated_at": pl.Datetime("us", "UTC")}
SUMMARY_SCHEMA: dict[str, Any] = {
    "from_position": pl.Int64, "to_position": pl.Int64, "level": pl.Int64, "model": pl.String, "text": pl.String,
    "created_at": pl.Datetime("us", "UTC"), "id": pl.String,
}
# Characters Markdown (and Streamlit's `:directives:` and `$math$`) would read as syntax in a snippet.
_MARKDOWN_ESCAPES = str.maketrans({**{c: "\\" + c for c in "\\`*_{}[]()#+-.!|<>~$:&="},
                                   "\n": " ", "\r": " ", "\t": " "})


def thread_owner(owner: str, person: str) -> str | None:
    """The page's owner choice as `GET /threads?subject=`: None lists everyone's, `""` the shared threads."""
    if owner == "shared only":
        return ""
    if owner == "one person":
        return person.strip() or None
    return None


def pairs_text(pairs: dict[str, Any]) -> str:
    """`{"a": "1", "b": "2"}` as `a:1, b:2`, the way the filters are typed."""
    return ", ".join(f"{k}:{v}" for k, v in sorted(pairs.items()))


def threads_frame(threads: Sequence[ThreadOut], tz: str) -> pl.DataFrame:
    rows = [{"id": t.id, "owner": t.subject or SHARED, "user": t.message_counts.user,
             "assistant": t.message_counts.assistant, "developer": t.message_counts.developer,
             "metadata": pairs_text(t.metadata), "labels": pairs_text(t.labels), "created_at": t.created_at,
             "updated_at": t.updated_at} for t in threads]
    return pl.DataFrame(rows, schema=THREAD_SCHEMA).with_columns(
        pl.col("created_at", "updated_at").dt.convert_time_zone(tz))


@_cached
def thread_page(client: CoreClient, subject: str | None, metadata: tuple[tuple[str, str], ...],
                labels: tuple[tuple[str, str], ...], cursor: str | None, limit: int,
                tz: str) -> tuple[pl.DataFrame, str | None]:
    """One page of threads, newest first, and the cursor of the next (older) page."""
    query = ThreadQuery(subject=subject, metadata=_wire(metadata), label=_wire(labels))
    page = client.threads(query, cursor=cursor, limit=limit)
    return threads_frame(page.data, tz), page.next_cursor


@_cached
def thread(client: CoreClient, thread_id: str) -> ThreadOut:
    return client.thread(thread_id)


def _clip(text: str) -> str:
    return text if len(text) <= CLIPPED_CHARS else text[:CLIPPED_CHARS - 1] + "…"


def _part_text(part: ContentPart) -> str:
    if isinstance(part, InputImage):
        return f"[image {part.image_url or part.file_id or ''}]".replace(" ]", "]")
    if isinstance(part, InputFile):
        return f"[file {part.filename or part.file_id or part.file_url or ''}]".replace(" ]", "]")
    if isinstance(part, RefusalPart):
        return f"[refusal] {part.refusal}"
    return getattr(part, "text", "[audio]")


def item_text(item: ItemOut) -> str:
    """What an item says, on one table row: a message's parts joined, a tool call as `name(arguments)`."""
    if isinstance(item, MessageOut):
        return item.content if isinstance(item.content, str) else "\n".join(_part_text(p) for p in item.content)
    if isinstance(item, FunctionCallOut):
        pending = "" if item.status == "completed" else f" [{item.status}]"
        return f"{item.name}({_clip(item.arguments)}){pending}"
    if isinstance(item, FunctionCallOutputOut):
        result = f"error: {item.error}" if item.error else item.output
        return f"{item.name or item.call_id} → {_clip(result)}"
    if isinstance(item, ReasoningOut):
        summary = " ".join(s.text for s in item.summary)
        return summary or ("[encrypted reasoning]" if item.encrypted_content else "[reasoning]")
    return item.refusal


def item_type(item: ItemOut) -> str:
    """`message`, `function_call`, …: the tag the API sends as `type` (msgspec keeps it on the class)."""
    return str(type(item).__struct_config__.tag)


def items_frame(items: Sequence[ItemOut], tz: str) -> pl.DataFrame:
    rows = [{"position": i.position, "created_at": i.created_at, "type": item_type(i),
             # A refusal is the assistant's, as search reports it (THR-7).
             "role": i.role if isinstance(i, MessageOut) else "assistant" if isinstance(i, RefusalOut) else None,
             "writer": i.subject or BY_ORGANISATION, "text": item_text(i), "id": i.id, "response_id": i.response_id}
            for i in items]
    return pl.DataFrame(rows, schema=ITEM_SCHEMA).with_columns(pl.col("created_at").dt.convert_time_zone(tz))


@_cached
def item_page(client: CoreClient, thread_id: str, newest_first: bool, cursor: str | None, limit: int,
              tz: str) -> tuple[pl.DataFrame, str | None]:
    """One page of a thread's items in position order, and the cursor of the next page."""
    page = client.thread_items(thread_id, order="desc" if newest_first else "asc", cursor=cursor, limit=limit)
    return items_frame(page.items, tz), page.next_cursor


@_cached
def item_notes(client: CoreClient, thread_id: str, item_id: str, tz: str) -> pl.DataFrame:
    """Every note on one message (one audited read); the organisation's note is `by` (organisation)."""
    rows = [{"by": n.by or BY_ORGANISATION, "note": json.dumps(n.metadata, sort_keys=True, ensure_ascii=False),
             "updated_at": n.updated_at} for n in client.item_notes(thread_id, item_id).data]
    return pl.DataFrame(rows, schema=NOTE_SCHEMA).with_columns(pl.col("updated_at").dt.convert_time_zone(tz))


@_cached
def thread_state(client: CoreClient, thread_id: str) -> StateOut:
    return client.thread_state(thread_id)


@_cached
def summary_page(client: CoreClient, thread_id: str, cursor: str | None, limit: int,
                 tz: str) -> tuple[pl.DataFrame, str | None]:
    page = client.thread_summaries(thread_id, cursor=cursor, limit=limit)
    rows = [{"from_position": s.from_position, "to_position": s.to_position, "level": s.level, "model": s.model,
             "text": s.text, "created_at": s.created_at, "id": s.id} for s in page.data]
    frame = pl.DataFrame(rows, schema=SUMMARY_SCHEMA)
    return frame.with_columns(pl.col("created_at").dt.convert_time_zone(tz)), page.next_cursor


def forget_threads() -> None:
    for fn in (thread_page, thread, item_page, item_notes, thread_state, summary_page):
        fn.clear()


def search_messages(client: CoreClient, *, q: str, role: Role | None, thread_id: str, start: date | None,
                    end: date | None, notes: str, notes_by: str, tz: str, cursor: str | None,
                    limit: int) -> SearchPage:
    """One page of `GET /thread-items`. Not cached: each search is an audited read the administrator asked for,
    and its pages are kept in the session. Days are calendar days in the organisation's zone, `end` included."""
    start_at, end_at = period(start, end, tz)
    query = ItemSearchQuery(q=q.strip() or None, thread_id=thread_id.strip() or None, role=role, from_=start_at,
                            to=end_at, metadata=_wire(pairs(notes)), metadata_by=notes_by.strip() or None)
    return client.search_messages(query, cursor=cursor, limit=limit)


def utf16_spans(text: str, highlights: Sequence[Highlight]) -> list[tuple[int, int]]:
    """The API's highlights, [start, end) in UTF-16 code units (as JavaScript counts: a character beyond the
    Basic Multilingual Plane, such as most emoji, is two), as [start, end) indices into the Python string.

    Out-of-range ends are clipped; overlapping or touching spans are merged; empty ones dropped."""
    ends = [0]  # ends[i]: code units before text[i]
    for char in text:
        ends.append(ends[-1] + (2 if ord(char) > 0xFFFF else 1))
    spans: list[tuple[int, int]] = []
    for mark in sorted(highlights, key=lambda h: (h.start, h.end)):
        start = min(bisect_left(ends, mark.start), len(text))
        end = min(bisect_left(ends, mark.end), len(text))
        if end <= start:
            continue
        if spans and start <= spans[-1][1]:
            spans[-1] = (spans[-1][0], max(end, spans[-1][1]))
        else:
            spans.append((start, end))
    return spans


def markdown_text(text: str) -> str:
    """`text` as Markdown that shows it literally, on one line."""
    return text.translate(_MARKDOWN_ESCAPES)


def bold_snippet(snippet: str, highlights: Sequence[Highlight]) -> str:
    """A search hit's snippet as Markdown with each highlighted span in bold."""
    out: list[str] = []
    shown = 0
    for start, end in utf16_spans(snippet, highlights):
        out.append(markdown_text(snippet[shown:start]))
        out.append(f"**{markdown_text(snippet[start:end])}**")
        shown = end
    out.append(markdown_text(snippet[shown:]))
    return "".join(out)
