"""Typed HTTP client for the coremem API (dashboard, analysts' helper, tests).

Every method sends one request and decodes the answer into the `shared.schemas` Struct the API promises;
an error body (PLT-14) becomes `ApiError`. New areas (memory, threads, injection) add methods in the same
style: build the path and query, then `self._call(method, path, ResponseStruct, ...)`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import IO, TYPE_CHECKING, Any, Literal, Protocol, TypeVar
from urllib.parse import quote

import httpx
import msgspec

from shared.schemas.activity import ChangeQuery, DailyCounts, DailyQuery, RecordChangePage
from shared.schemas.agents import AgentCreate, AgentOut, AgentPage, AgentPatch, AgentVersionOut, AgentVersionPage
from shared.schemas.common import ErrorBody
from shared.schemas.extraction import (
    ExtractionSwitchIn,
    ExtractionSwitchOut,
    RunPage,
    RunQueued,
    WindowPage,
    WindowQuery,
)
from shared.schemas.memory import (
    ErasureOut,
    MemoryBatch,
    MemoryBatchOut,
    MemoryHistory,
    MemoryOut,
    MemoryPage,
    MemoryPatch,
    MemoryQuery,
    MemoryStats,
)
from shared.schemas.platform import (
    AuditEventOut,
    AuditPage,
    AuditQuery,
    ChainStatus,
    Health,
    IndexCreate,
    IndexOut,
    IndexPage,
    IndexPatch,
    KeyAuditPage,
    KeyCreate,
    KeyCreated,
    KeyOut,
    KeyPage,
    KeyPatch,
    LoginIn,
    LoginOut,
    OrgOut,
    OrgPage,
    OrgPatch,
    SubjectIn,
    SubjectTokenIn,
    SubjectTokenOut,
)
from shared.schemas.proposals import ProposalOut, ProposalPage, ProposalQuery
from shared.schemas.stores import PreviewIn, PreviewOut, StoreSettingsOut, StoreSettingsPatch
from shared.schemas.threads import (
    ItemSearchQuery,
    ItemsIn,
    ItemsOut,
    NoteIn,
    NoteOut,
    NotePage,
    SearchPage,
    StateOut,
    StatePut,
    SummaryPage,
    ThreadCreate,
    ThreadCreated,
    ThreadOut,
    ThreadPage,
    ThreadQuery,
    ThreadStats,
)
from shared.schemas.turns import ModelCreate, ModelOut, ModelPage, ResponseCreate, ResponseOut, UsageQuery, UsageReport

if TYPE_CHECKING:
    import polars as pl

_T = TypeVar("_T")
_T_co = TypeVar("_T_co", covariant=True)
ORG_HEADER = "X-Core-Org"
SUBJECT_HEADER = "X-Core-Subject"
API_URL_ENV = "CORE_API_URL"  # where the dashboard (and scripts) find the API
DEFAULT_API_URL = "http://127.0.0.1:8000"
DEFAULT_TIMEOUT = 15.0
ExportFormat = Literal["parquet", "csv", "ndjson"]
QueryValue = str | int | float | bool | None | Sequence[str]


_decoders: dict[Any, msgspec.json.Decoder[Any]] = {}


def _decoder(result: type[_T]) -> msgspec.json.Decoder[_T]:
    """One decoder per answer type, built on first use (msgspec's perf tips: build decoders once)."""
    found = _decoders.get(result)
    if found is None:
        found = _decoders[result] = msgspec.json.Decoder(result)
    return found


class ApiError(Exception):
    """An error answer of the API, or `api_unreachable` (status 0) when no answer came at all."""

    def __init__(self, status: int, code: str, message: str, param: str | None = None, *,
                 reason_code: str | None = None, error_id: str | None = None) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.param = param
        self.reason_code = reason_code
        self.error_id = error_id

    @classmethod
    def from_response(cls, response: httpx.Response) -> ApiError:
        try:
            body = _decoder(ErrorBody).decode(response.content)
        except (msgspec.DecodeError, msgspec.ValidationError):
            # Not our error shape (a proxy page, a crash before the handler): keep what can be said.
            text = response.text.strip()[:300] or response.reason_phrase
            return cls(response.status_code, "unexpected_response", text)
        return cls(body.status, body.code, body.message, body.param, reason_code=body.reason_code,
                   error_id=body.error_id)


def query_params(query: msgspec.Struct) -> dict[str, QueryValue]:
    """A query Struct as the route's parameters: its wire names, values checked as the API checks them (an instant
    without its offset is refused here, not sent), defaults left out."""
    for field in msgspec.structs.fields(query):
        value = getattr(query, field.name)
        if isinstance(value, datetime):
            _instant(value)  # a naive instant is refused with a word about its offset
    try:
        checked = msgspec.convert(msgspec.to_builtins(query), type(query))
    except msgspec.ValidationError as exc:
        raise ValueError(f"{type(query).__name__}: {exc}") from None
    params: dict[str, QueryValue] = {}
    for field in msgspec.structs.fields(checked):
        value = getattr(checked, field.name)
        if value is None or value is False or (isinstance(value, list) and not value):
            continue
        params[field.encode_name] = _instant(value) if isinstance(value, datetime) else value
    return params


def _instant(value: datetime | None) -> str | None:
    if value is None:
        return None
    if value.tzinfo is None:
        raise ValueError("An instant sent to the API must carry its offset (PLT-15).")
    return value.isoformat()


def _query(params: Mapping[str, QueryValue]) -> list[tuple[str, str | int | float | bool | None]]:
    """Query pairs without empty values; a sequence repeats its name (`action=a&action=b`)."""
    pairs: list[tuple[str, str | int | float | bool | None]] = []
    for name, value in params.items():
        if value is None:
            continue
        if isinstance(value, bool):
            pairs.append((name, "true" if value else "false"))
        elif isinstance(value, str | int | float):
            pairs.append((name, str(value)))
        else:
            pairs.extend((name, str(item)) for item in value)
    return pairs


class CoreClient:
    """One administrator's (or key's) connection to the API.

    `token` is an administrator token, a key or a subject token; `org_id` names the organisation for an
    operator (sent as `X-Core-Org`; tenant routes take it from the path as well).
    """

    def __init__(self, base_url: str, token: str | None = None, org_id: str | None = None, *,
                 timeout: float = DEFAULT_TIMEOUT, transport: httpx.BaseTransport | None = None,
                 subject: SubjectIn | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.org_id = org_id
        self.subject = subject  # the person every request is for (`X-Core-Subject`); None: nobody named
        self.timeout = timeout
        self._transport = transport
        self._http = httpx.Client(base_url=self.base_url, timeout=timeout, transport=transport)

    # ------------------------------------------------------------ plumbing

    def __enter__(self) -> CoreClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def for_org(self, org_id: str | None) -> CoreClient:
        """The same credential aimed at another organisation (operators)."""
        return CoreClient(self.base_url, self.token, org_id, timeout=self.timeout, transport=self._transport,
                          subject=self.subject)

    def for_person(self, subject_id: str, attributes: Mapping[str, Sequence[str]] | None = None) -> CoreClient:
        """The same credential acting for one person (sent as `X-Core-Subject`); close it when done."""
        subject = SubjectIn(id=subject_id, attributes={k: list(v) for k, v in (attributes or {}).items()})
        return CoreClient(self.base_url, self.token, self.org_id, timeout=self.timeout, transport=self._transport,
                          subject=subject)

    def cache_key(self) -> tuple[str, str | None, str | None]:
        """What distinguishes two clients' answers; used by the dashboard's caches."""
        return (self.base_url, self.token, self.org_id)

    def _headers(self) -> dict[str, str]:
        headers = {"Accept": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        if self.org_id:
            headers[ORG_HEADER] = self.org_id
        if self.subject is not None:
            headers[SUBJECT_HEADER] = msgspec.json.encode(self.subject).decode()
        return headers

    def _send(self, method: str, path: str, *, params: Mapping[str, QueryValue] | None = None,
              body: Any = None) -> httpx.Response:
        content = None if body is None else msgspec.json.encode(body)
        headers = self._headers()
        if content is not None:
            headers["Content-Type"] = "application/json"
        try:
            response = self._http.request(method, path, params=_query(params or {}), content=content,
                                          headers=headers)
        except httpx.TimeoutException as exc:
            raise ApiError(0, "api_timeout", f"The API at {self.base_url} did not answer in {self.timeout:g} s "
                           f"({type(exc).__name__}).") from exc
        except httpx.TransportError as exc:
            raise ApiError(0, "api_unreachable", f"The API at {self.base_url} cannot be reached "
                           f"({type(exc).__name__}: {exc}).") from exc
        if response.status_code >= 400:
            raise ApiError.from_response(response)
        return response

    def _call(self, method: str, path: str, result: type[_T], *, params: Mapping[str, QueryValue] | None = None,
              body: Any = None) -> _T:
        response = self._send(method, path, params=params, body=body)
        try:
            return _decoder(result).decode(response.content)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise ApiError(response.status_code, "unexpected_response",
                           f"{method} {path} answered a body this client does not understand: {exc}") from exc

    # ------------------------------------------------------------ operations and administrators

    def health(self) -> Health:
        return self._call("GET", "/health", Health)

    def login(self, email: str, password: str) -> LoginOut:
        """Log an administrator in; the client keeps the token for later calls."""
        result = self._call("POST", "/admin/login", LoginOut, body=LoginIn(email=email, password=password))
        self.token = result.token
        return result

    def logout(self) -> None:
        self._send("POST", "/admin/logout")
        self.token = None

    # ------------------------------------------------------------ organisations and keys

    def orgs(self) -> OrgPage:
        return self._call("GET", "/tenants", OrgPage)

    def org(self, org_id: str) -> OrgOut:
        return self._call("GET", f"/tenants/{org_id}", OrgOut)

    def keys(self, org_id: str, *, cursor: str | None = None, limit: int | None = None) -> KeyPage:
        return self._call("GET", f"/tenants/{org_id}/keys", KeyPage, params={"cursor": cursor, "limit": limit})

    def all_keys(self, org_id: str, *, page_size: int = 200) -> list[KeyOut]:
        return list(_walk(lambda cursor: self.keys(org_id, cursor=cursor, limit=page_size)))

    def create_key(self, org_id: str, body: KeyCreate | Mapping[str, Any]) -> KeyCreated:
        """A mapping is sent as it is, so the API judges it and its 422 names the path."""
        return self._call("POST", f"/tenants/{org_id}/keys", KeyCreated, body=body)

    def key_audit(self, org_id: str, *, key_id: str | None = None, limit: int | None = None,
                  cursor: str | None = None) -> KeyAuditPage:
        """One page of the key audit trail, newest first; pass the page's `next_cursor` for the next one."""
        return self._call("GET", f"/tenants/{org_id}/keys/audit", KeyAuditPage,
                          params={"key_id": key_id, "limit": limit, "cursor": cursor})

    def key(self, org_id: str, key_id: str) -> KeyOut:
        return self._call("GET", f"/tenants/{org_id}/keys/{key_id}", KeyOut)

    def update_key(self, org_id: str, key_id: str, changes: KeyPatch | Mapping[str, Any]) -> KeyOut:
        """PATCH a key. A mapping is sent as it is, so the API judges it and its 422 names the path
        (`memory.injection.index_id`, `policy.rules[0].kind`)."""
        return self._call("PATCH", f"/tenants/{org_id}/keys/{key_id}", KeyOut, body=changes)

    def revoke_key(self, org_id: str, key_id: str) -> KeyOut:
        return self._call("POST", f"/tenants/{org_id}/keys/{key_id}/revoke", KeyOut)

    def delete_key(self, org_id: str, key_id: str) -> None:
        self._send("DELETE", f"/tenants/{org_id}/keys/{key_id}")

    def subject_token_for_key(self, org_id: str, key_id: str, body: SubjectTokenIn) -> SubjectTokenOut:
        """Administrators: a subject token bound to that key, as the key itself would mint it (audited)."""
        return self._call("POST", f"/tenants/{org_id}/keys/{key_id}/subject-tokens", SubjectTokenOut, body=body)

    def own_key(self) -> KeyOut:
        """`GET /key`: the calling key's own document (a key as the credential; a subject token gets 403)."""
        return self._call("GET", "/key", KeyOut)

    # ------------------------------------------------------------ indexes

    def indexes(self, *, cursor: str | None = None, limit: int | None = None) -> IndexPage:
        return self._call("GET", "/indexes", IndexPage, params={"cursor": cursor, "limit": limit})

    def all_indexes(self, *, page_size: int = 200) -> list[IndexOut]:
        return list(_walk(lambda cursor: self.indexes(cursor=cursor, limit=page_size)))

    # ------------------------------------------------------------ agents (TRN-5)

    def agents(self, *, cursor: str | None = None, limit: int | None = None) -> AgentPage:
        return self._call("GET", "/agents", AgentPage, params={"cursor": cursor, "limit": limit})

    def all_agents(self, *, page_size: int = 200) -> list[AgentOut]:
        return list(_walk(lambda cursor: self.agents(cursor=cursor, limit=page_size)))

    def agent(self, agent_id: str) -> AgentOut:
        return self._call("GET", f"/agents/{agent_id}", AgentOut)

    def create_agent(self, body: AgentCreate | Mapping[str, Any]) -> AgentOut:
        """Version 1 of a new agent. A mapping is sent as it is, so the API judges it and its 422 names the field."""
        return self._call("POST", "/agents", AgentOut, body=body)

    def update_agent(self, agent_id: str, changes: AgentPatch | Mapping[str, Any]) -> AgentOut:
        """The fields set on `changes` (null removes an optional one) become the agent's next version."""
        return self._call("PATCH", f"/agents/{agent_id}", AgentOut, body=changes)

    def delete_agent(self, agent_id: str) -> None:
        self._send("DELETE", f"/agents/{agent_id}")

    def agent_versions(self, agent_id: str, *, cursor: str | None = None, limit: int | None = None
                       ) -> AgentVersionPage:
        """An agent's versions, newest first."""
        return self._call("GET", f"/agents/{agent_id}/versions", AgentVersionPage,
                          params={"cursor": cursor, "limit": limit})

    def agent_version(self, agent_id: str, version: int) -> AgentVersionOut:
        return self._call("GET", f"/agents/{agent_id}/versions/{version}", AgentVersionOut)

    # ------------------------------------------------------------ indexes, erasure, activity

    def create_index(self, body: IndexCreate | Mapping[str, Any]) -> IndexOut:
        """A mapping is sent as it is, so the API judges the embedding choice and its 422 names the field."""
        return self._call("POST", "/indexes", IndexOut, body=body)

    def update_index(self, index_id: str, changes: IndexPatch | Mapping[str, Any]) -> IndexOut:
        """Rename or change the embedding (`{"embedding": null}` stops it); the records are re-embedded by a job."""
        return self._call("PATCH", f"/indexes/{index_id}", IndexOut, body=changes)

    def delete_index(self, index_id: str) -> None:
        self._send("DELETE", f"/indexes/{index_id}")

    # ------------------------------------------------------------ people (MEM-19)

    def erase_subject(self, subject_id: str) -> ErasureOut:
        """`DELETE /subjects/{id}`: erase everything of one person; answers what was removed, counted."""
        return self._call("DELETE", f"/subjects/{quote(subject_id, safe='')}", ErasureOut)

    # ------------------------------------------------------------ activity over time

    def activity_records(self, days: int = 30) -> DailyCounts:
        """Record versions written per calendar day (organisation's zone), by action."""
        return self._call("GET", "/activity/records", DailyCounts, params=query_params(DailyQuery(days=days)))

    def activity_messages(self, days: int = 30) -> DailyCounts:
        """Messages written per calendar day, by role."""
        return self._call("GET", "/activity/messages", DailyCounts, params=query_params(DailyQuery(days=days)))

    def activity_audit(self, days: int = 30) -> DailyCounts:
        """Audit events per calendar day, by action (administrators)."""
        return self._call("GET", "/activity/audit", DailyCounts, params=query_params(DailyQuery(days=days)))

    def record_changes(self, filters: ChangeQuery | None = None, *, cursor: str | None = None,
                       limit: int | None = None) -> RecordChangePage:
        """Record versions across records, newest first: who changed which record, and when."""
        return self._call("GET", "/activity/changes", RecordChangePage,
                          params={**query_params(filters or ChangeQuery()), "cursor": cursor, "limit": limit})

    # ------------------------------------------------------------ audit trail

    def audit(self, filters: AuditQuery | None = None, *, cursor: str | None = None,
              limit: int | None = None) -> AuditPage:
        params = {**query_params(filters or AuditQuery()), "cursor": cursor, "limit": limit}
        return self._call("GET", "/audit", AuditPage, params=params)

    def audit_events(self, filters: AuditQuery | None = None, *, max_events: int, page_size: int = 200
                     ) -> list[AuditEventOut]:
        """Newest first, following cursors until `max_events` (each page read is itself audited)."""
        events: list[AuditEventOut] = []
        for event in _walk(lambda cursor: self.audit(filters, cursor=cursor, limit=min(page_size, max_events))):
            events.append(event)
            if len(events) >= max_events:
                break
        return events

    def audit_verify(self) -> ChainStatus:
        return self._call("GET", "/audit/verify", ChainStatus)

    # ------------------------------------------------------------ injection previewer (INJ-12, DSH-6)

    def injection_preview(self, index_id: str, body: PreviewIn) -> PreviewOut:
        """The block a turn with that key for that person would get; audited, changes nothing."""
        return self._call("POST", f"/memory/stores/{index_id}/injection/preview", PreviewOut, body=body)

    # ------------------------------------------------------------ extraction (EXT-2 … EXT-6)

    def extraction_switch(self, index_id: str) -> ExtractionSwitchOut:
        """The store's switch, its author, state, last run, window counts and most common failure."""
        return self._call("GET", f"/memory/stores/{index_id}/extraction", ExtractionSwitchOut)

    def set_extraction_switch(self, index_id: str, body: ExtractionSwitchIn | Mapping[str, Any]
                              ) -> ExtractionSwitchOut:
        """PUT the switch (on or off); the sender becomes its author. A mapping is sent as it is, so the API judges
        its values and its 422 names the field."""
        return self._call("PUT", f"/memory/stores/{index_id}/extraction", ExtractionSwitchOut, body=body)

    def run_extraction(self, index_id: str) -> RunQueued:
        """Queue a run now, without waiting for the schedule."""
        return self._call("POST", f"/memory/stores/{index_id}/extraction/run", RunQueued)

    def extraction_runs(self, index_id: str, *, cursor: str | None = None, limit: int | None = None) -> RunPage:
        """The switch's runs, newest first, with per-run counts and durations."""
        return self._call("GET", f"/memory/stores/{index_id}/extraction/runs", RunPage,
                          params={"cursor": cursor, "limit": limit})

    def extraction_windows(self, index_id: str, filters: WindowQuery | None = None, *, cursor: str | None = None,
                           limit: int | None = None) -> WindowPage:
        """A page of windows with counts per state and error code and windows finished per hour or day."""
        return self._call("GET", f"/memory/stores/{index_id}/extraction/windows", WindowPage,
                          params={**query_params(filters or WindowQuery()), "cursor": cursor, "limit": limit})

    # ------------------------------------------------------------ export (EXP-2, EXP-4)

    def export_records(self, sink: IO[bytes], filters: MemoryQuery | None = None, *,
                       format: ExportFormat = "parquet", key_id: str | None = None) -> int:
        """Stream `GET /memory/export` (the rows of `memory(filters)`, every page) into `sink` chunk by chunk;
        returns the bytes written. `key_id` applies that key's half-lives instead of the organisation's."""
        params: dict[str, QueryValue] = {"format": format, "key_id": key_id, **query_params(filters or MemoryQuery())}
        headers = self._headers()
        headers["Accept"] = "*/*"
        written = 0
        try:
            with self._http.stream("GET", "/memory/export", params=_query(params), headers=headers) as response:
                if response.status_code >= 400:
                    response.read()
                    raise ApiError.from_response(response)
                for chunk in response.iter_bytes():
                    sink.write(chunk)
                    written += len(chunk)
        except httpx.TimeoutException as exc:
            raise ApiError(0, "api_timeout", f"The API at {self.base_url} stopped answering for {self.timeout:g} s "
                           f"({type(exc).__name__}).") from exc
        except httpx.TransportError as exc:
            raise ApiError(0, "api_unreachable", f"The API at {self.base_url} cannot be reached "
                           f"({type(exc).__name__}: {exc}).") from exc
        return written

    # ------------------------------------------------------------ memory records

    def memory(self, filters: MemoryQuery | None = None, *, cursor: str | None = None,
               limit: int | None = None) -> MemoryPage:
        """One page of records, newest first (each read is audited by the API)."""
        params = {**query_params(filters or MemoryQuery()), "cursor": cursor, "limit": limit}
        return self._call("GET", "/memory", MemoryPage, params=params)

    def memory_stats(self, filters: MemoryQuery | None = None) -> MemoryStats:
        """Counts over every page of `memory(filters)`: per index, type and owner kind, and distinct people."""
        return self._call("GET", "/memory/stats", MemoryStats, params=query_params(filters or MemoryQuery()))

    def thread_stats(self, filters: ThreadQuery | None = None) -> ThreadStats:
        """How many threads the caller may read (with the filters of `threads`), shared ones, their owners and their
        messages per role."""
        return self._call("GET", "/threads/stats", ThreadStats, params=query_params(filters or ThreadQuery()))

    def memory_record(self, record_id: str) -> MemoryOut:
        return self._call("GET", f"/memory/{record_id}", MemoryOut)

    def update_memory(self, record_id: str, changes: MemoryPatch | Mapping[str, Any]) -> MemoryOut:
        """PATCH with only the fields set on `changes` (unset ones are left out of the body).

        A mapping is sent as it is, so the API (not this client) judges its values and names a bad one.
        """
        return self._call("PATCH", f"/memory/{record_id}", MemoryOut, body=changes)

    def delete_memory(self, record_id: str) -> None:
        self._send("DELETE", f"/memory/{record_id}")

    def memory_history(self, record_id: str) -> MemoryHistory:
        return self._call("GET", f"/memory/{record_id}/history", MemoryHistory)

    def verify_memory(self, record_id: str) -> MemoryOut:
        return self._call("POST", f"/memory/{record_id}/verify", MemoryOut)

    # ------------------------------------------------------------ store settings

    def store_settings(self, index_id: str) -> StoreSettingsOut:
        return self._call("GET", f"/memory/stores/{index_id}", StoreSettingsOut)

    def update_store_settings(self, index_id: str, changes: StoreSettingsPatch | Mapping[str, Any]
                              ) -> StoreSettingsOut:
        """Each section sent replaces that section whole; unsent sections stay as they are.

        A mapping is sent as it is, so the API judges it and its 422 names the field (`injection.rank`).
        """
        return self._call("PATCH", f"/memory/stores/{index_id}", StoreSettingsOut, body=changes)

    # ---- promotion proposals (EXT-15)

    def proposals(self, filters: ProposalQuery | None = None, *, cursor: str | None = None,
                  limit: int | None = None) -> ProposalPage:
        """Promotion proposals (each read is audited by the API); evidence lists only records the caller sees."""
        params = {**query_params(filters or ProposalQuery()), "cursor": cursor, "limit": limit}
        return self._call("GET", "/memory/proposals", ProposalPage, params=params)

    def apply_proposal(self, proposal_id: str) -> ProposalOut:
        return self._call("POST", f"/memory/proposals/{proposal_id}/apply", ProposalOut)

    def dismiss_proposal(self, proposal_id: str) -> ProposalOut:
        return self._call("POST", f"/memory/proposals/{proposal_id}/dismiss", ProposalOut)

    # ---- threads (DSH-7)
    # Every one of these reads is audited by the API as `thread.read` when an administrator makes it (PLT-2).

    def threads(self, filters: ThreadQuery | None = None, *, cursor: str | None = None,
                limit: int | None = None) -> ThreadPage:
        """One page of threads, newest first. `subject` names the owner; `""` means shared threads (no owner)."""
        return self._call("GET", "/threads", ThreadPage,
                          params={**query_params(filters or ThreadQuery()), "cursor": cursor, "limit": limit})

    def thread(self, thread_id: str) -> ThreadOut:
        return self._call("GET", f"/threads/{thread_id}", ThreadOut)

    def thread_items(self, thread_id: str, *, order: Literal["asc", "desc"] = "asc", cursor: str | None = None,
                     limit: int | None = None) -> ItemsOut:
        """One page of a thread's items in position order (`desc`: newest first)."""
        return self._call("GET", f"/threads/{thread_id}/items", ItemsOut,
                          params={"order": order, "cursor": cursor, "limit": limit})

    def item_notes(self, thread_id: str, item_id: str) -> NotePage:
        """Every note on one message: each person's and the organisation's (`by` null)."""
        return self._call("GET", f"/threads/{thread_id}/items/{item_id}/metadata", NotePage)

    def thread_state(self, thread_id: str) -> StateOut:
        """The working state; a thread that never had one reads `{}` at version 0."""
        return self._call("GET", f"/threads/{thread_id}/state", StateOut)

    def thread_summaries(self, thread_id: str, *, cursor: str | None = None, limit: int | None = None
                         ) -> SummaryPage:
        return self._call("GET", f"/threads/{thread_id}/summaries", SummaryPage,
                          params={"cursor": cursor, "limit": limit})

    def search_messages(self, query: ItemSearchQuery, *, cursor: str | None = None,
                        limit: int | None = None) -> SearchPage:
        """`GET /thread-items`: messages matching `q` (web-search syntax) and/or a note (`metadata` pairs,
        `metadata_by` = whose notes), newest first. Each page reads at most 7 days of history, so a short or empty
        page may still have a `next_cursor`; `searched_to` says how far back this page looked."""
        return self._call("GET", "/thread-items", SearchPage,
                          params={**query_params(query), "cursor": cursor, "limit": limit})

    # ------------------------------------------------------------ models, turns and usage

    def models(self) -> ModelPage:
        """`GET /models`: the chat models offered to the organisation (a `replay` one says it is recorded)."""
        return self._call("GET", "/models", ModelPage)

    def add_model(self, body: ModelCreate) -> ModelOut:
        return self._call("POST", "/admin/models", ModelOut, body=body)

    def remove_model(self, model_id: str, *, org_id: str | None = None) -> None:
        self._send("DELETE", f"/admin/models/{model_id}", params={"org_id": org_id})

    def create_response(self, body: ResponseCreate) -> ResponseOut:
        """`POST /responses`: one turn; a failed model answers `status: "failed"` with `error`, not an exception."""
        return self._call("POST", "/responses", ResponseOut, body=body)

    def response(self, response_id: str) -> ResponseOut:
        """`GET /responses/{id}` with its trace."""
        return self._call("GET", f"/responses/{response_id}", ResponseOut)

    def usage(self, filters: UsageQuery | None = None) -> UsageReport:
        """`GET /usage`: model tokens per day, key and model (administrators)."""
        return self._call("GET", "/usage", UsageReport, params=query_params(filters or UsageQuery()))
    # ---- writes (the demo and scripts; the dashboard's edits are above)

    def update_org(self, org_id: str, changes: OrgPatch) -> OrgOut:
        return self._call("PATCH", f"/tenants/{org_id}", OrgOut, body=changes)

    def put_vocabulary(self, org_id: str, vocabulary: Mapping[str, Any]) -> dict[str, Any]:
        """Register the organisation's label vocabulary per kind; labels outside it are refused afterwards."""
        return self._call("PUT", f"/tenants/{org_id}/vocabulary", dict[str, Any], body=vocabulary)

    def write_memory_batch(self, body: MemoryBatch) -> MemoryBatchOut:
        """Up to 1,000 records in one transaction, all or nothing, for the client's person (or shared)."""
        return self._call("POST", "/memory/batch", MemoryBatchOut, body=body)

    def create_thread(self, body: ThreadCreate) -> ThreadCreated:
        """Open a thread owned by the client's person (or nobody), with its first items."""
        return self._call("POST", "/threads", ThreadCreated, body=body)

    def append_items(self, thread_id: str, body: ItemsIn) -> ItemsOut:
        return self._call("POST", f"/threads/{thread_id}/items", ItemsOut, body=body)

    def put_note(self, thread_id: str, item_id: str, body: NoteIn) -> NoteOut:
        """Replace the client's person's own note on a message (the organisation's when nobody is named)."""
        return self._call("PUT", f"/threads/{thread_id}/items/{item_id}/metadata", NoteOut, body=body)

    def put_thread_state(self, thread_id: str, body: StatePut) -> StateOut:
        return self._call("PUT", f"/threads/{thread_id}/state", StateOut, body=body)


class _Paged(Protocol[_T_co]):
    @property
    def data(self) -> Sequence[_T_co]: ...

    @property
    def next_cursor(self) -> str | None: ...


def _walk(fetch: Callable[[str | None], _Paged[_T_co]]) -> Iterator[_T_co]:
    """Every item of a `{data, next_cursor}` list, one page at a time."""
    cursor: str | None = None
    while True:
        page = fetch(cursor)
        yield from page.data
        cursor = page.next_cursor
        if not cursor:
            return


def chain_summary(status: ChainStatus) -> str:
    """One line saying whether an organisation's audit hash chain verifies."""
    if status.intact:
        return f"Hash chain intact over {status.events} event{'' if status.events == 1 else 's'}."
    return f"Hash chain BROKEN at seq {status.broken_at_seq}: {status.problem or 'unknown problem'}."


def records_frame(base_url: str, key: str, *, org_id: str | None = None, timeout: float = 120.0,
                  **filters: Any) -> pl.DataFrame:
    """EXP-4: the records a key (or administrator token) may export, as a polars DataFrame with the documented
    dtypes (docs/export.md). `filters` are the fields of `MemoryQuery` (`index_id`, `type`, `subject`, `after`, …).
    The Parquet body is spooled to a temporary file, never held whole in memory."""
    import tempfile

    import polars as pl

    lists = {f.name for f in msgspec.structs.fields(MemoryQuery) if f.default_factory is list}
    given = {name: [value] if name in lists and isinstance(value, str) else value for name, value in filters.items()}
    query = msgspec.convert(given, MemoryQuery, strict=False)  # an unknown filter name is an error here
    with CoreClient(base_url, key, org_id, timeout=timeout) as client, tempfile.TemporaryFile() as spool:
        client.export_records(spool, query, format="parquet")
        spool.seek(0)
        return pl.read_parquet(spool)


__all__ = (
    "API_URL_ENV",
    "DEFAULT_API_URL",
    "DEFAULT_TIMEOUT",
    "ORG_HEADER",
    "SUBJECT_HEADER",
    "ApiError",
    "CoreClient",
    "ExportFormat",
    "QueryValue",
    "chain_summary",
    "query_params",
    "records_frame",
)
