"""What every page reads: the session's API client, and cached calls through it answered as polars frames.

The dashboard never reaches the database (house rule 7): every read goes through `shared.client`, so the
API checks and audits it (PLT-2). Caches are per session, keyed by the client's URL, token and
organisation, and short-lived, so one administrator's answers are never served to another. What only one
page reads lives in the module named after that page (`dashboard.data.records`, ...).
"""

from __future__ import annotations

import contextlib
import json
import os
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import polars as pl
import streamlit as st

from shared.client import API_URL_ENV, DEFAULT_API_URL, ApiError, CoreClient
from shared.schemas.platform import AdminOut, AuditEventOut, ChainStatus

CACHE_SECONDS = 30
SHARED = "shared"  # the owner shown for a record or thread that names no person

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
    for key in [k for k in st.session_state if str(k).startswith(("audit_", "records_", "stores_", "threads_", "keys_",
                                                                   "people_", "indexes_", "overview_", "preview_",
                                                                   "extraction_", "proposals_"))]:
        del st.session_state[key]


def refresh() -> None:
    """Forget the cached answers so the next run asks the API again."""
    # The page modules import this package, so this package imports them only when asked to forget.
    from dashboard.data import audit, extraction, key_admin, overview, people, previewer, records, stores, threads

    for fn in (organisations, org_timezone, indexes, keys, audit.audit_page, audit.changes_page, chain_status,
               overview.latest_events, overview.trends, overview.store_counts, overview.thread_counts,
               records.memory_page, records.matching_records, records.memory_record, records.memory_history,
               stores.store_settings, stores.settings_history, key_admin.key, key_admin.key_trail, people.holdings,
               extraction.switch, extraction.windows, extraction.runs, model_labels,
               extraction.agent_names, previewer.agents, records.response_agent):
        fn.clear()
    threads.forget_threads()


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
             "last_used_at": k.last_used_at, "created_at": k.created_at, "expires_at": k.expires_at,
             "revoked_at": k.revoked_at} for k in client.all_keys(org)]
    instant = pl.Datetime("us", "UTC")
    return pl.DataFrame(rows, schema={"id": pl.String, "name": pl.String, "status": pl.String,
                                      "capabilities": pl.List(pl.String), "last_used_at": instant,
                                      "created_at": instant, "expires_at": instant, "revoked_at": instant})


@_cached
def model_labels(client: CoreClient) -> dict[str, str]:
    """What each offered chat model is, by id (`GET /models`): a `replay` one says it gives recorded answers."""
    return {m.id: m.label for m in client.models().data}


def model_shown(model_id: str, labels: dict[str, str], *, code: bool = False) -> str:
    """A model as every page names it: its id with what it is (EXT-1: a replay model is labelled as such wherever it
    shows); one no longer offered has no label to give, so its id alone."""
    shown = f"`{model_id}`" if code else model_id
    return f"{shown} — {labels[model_id]}" if model_id in labels else shown


def local_time(at: datetime, tz: str) -> str:
    """An instant as `YYYY-MM-DD HH:MM` in the organisation's time zone."""
    return f"{at.astimezone(ZoneInfo(tz)):%Y-%m-%d %H:%M}"


def names(frame: pl.DataFrame) -> dict[str, str]:
    """An `id`, `name` frame (organisations, indexes, keys) as names by id, in the frame's order."""
    return dict(zip(frame["id"].to_list(), frame["name"].to_list(), strict=True))


# ---------------------------------------------------------------- the audit trail


@_cached
def chain_status(client: CoreClient) -> ChainStatus:
    return client.audit_verify()


def events_frame(events: list[AuditEventOut], tz: str) -> pl.DataFrame:
    rows = [{"seq": e.seq, "at": e.at, "action": e.action, "outcome": e.outcome, "actor_type": e.actor.type,
             "actor_id": e.actor.id, "object_type": e.object_type, "object_id": e.object_id, "subject": e.subject,
             "detail": json.dumps(e.detail, sort_keys=True, default=str), "id": e.id, "hash": e.hash}
            for e in events]
    frame = pl.DataFrame(rows, schema=EVENT_SCHEMA)
    return frame.with_columns(pl.col("at").dt.convert_time_zone(tz))
