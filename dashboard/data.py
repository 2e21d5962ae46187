"""What the pages read: the session's API client, and cached calls through it answered as polars frames.

The dashboard never reaches the database (house rule 7): every read goes through `shared.client`, so the
API checks and audits it (PLT-2). Caches are per session, keyed by the client's URL, token and
organisation, and short-lived, so one administrator's answers are never served to another.
"""

from __future__ import annotations

import contextlib
import json
import os
from datetime import date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import polars as pl
import streamlit as st

from shared.client import API_URL_ENV, DEFAULT_API_URL, ApiError, AuditFilter, CoreClient
from shared.schemas.platform import AdminOut, AuditEventOut, ChainStatus
from shared.schemas.stores import PreviewIn, PreviewOut, PreviewSubject

CACHE_SECONDS = 30
KEY_STATUSES = ("active", "revoked", "expired")
# Actions the platform writes today; the filter accepts any other name typed in (memory, threads, ...).
KNOWN_ACTIONS = ("audit.read", "index.created", "index.deleted", "key.changed", "key.created", "key.deleted",
                 "key.revoked", "org.updated", "org.vocabulary_changed")

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
    for key in [k for k in st.session_state if str(k).startswith("audit_")]:
        del st.session_state[key]


def refresh() -> None:
    """Forget the cached answers so the next run asks the API again."""
    for fn in (organisations, org_timezone, indexes, keys, audit_page, recent_events, chain_status):
        fn.clear()


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
def audit_page(client: CoreClient, filters: AuditFilter, cursor: str | None, limit: int,
               tz: str) -> tuple[pl.DataFrame, str | None]:
    """One page of events, newest first, and the cursor of the next (older) page."""
    page = client.audit(filters, cursor=cursor, limit=limit)
    return events_frame(page.data, tz), page.next_cursor


@_cached
def recent_events(client: CoreClient, first_day: str, max_events: int, tz: str) -> pl.DataFrame:
    """The newest events (at most `max_events`) since the start of `first_day` in the organisation's zone."""
    since, _ = period(date.fromisoformat(first_day), None, tz)
    return events_frame(client.audit_events(AuditFilter(start=since), max_events=max_events), tz)


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
                 outcome: str | None) -> AuditFilter:
    """The page's filter widgets as the query of `GET /audit`; blank fields do not filter."""
    start_at, end_at = period(start, end, tz)
    return AuditFilter(
        start=start_at, end=end_at, actor_type=actor_type,  # type: ignore[arg-type]
        actor_id=actor_id.strip() or None, actions=tuple(a.strip() for a in actions if a.strip()),
        object_type=object_type.strip() or None, object_id=object_id.strip() or None,
        subject=person.strip() or None, outcome=outcome,  # type: ignore[arg-type]
    )


# ---------------------------------------------------------------- injection previewer (DSH-6)

LEFT_OUT_SCHEMA: dict[str, Any] = {"id": pl.String, "section": pl.String, "type": pl.String, "reason": pl.String}


def preview_body(*, person: str, attributes_json: str, nobody: bool, key_id: str | None, turn_input: str
                 ) -> PreviewIn:
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
    return PreviewIn(subject=subject, key_id=key_id or None, input=turn_input or None)


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
