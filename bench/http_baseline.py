"""The baseline app of `bench.http`: bare Litestar handlers, each running one hand-written SQL statement.

Started by `python -m bench.http` as its own uvicorn process (single worker, like `coremem serve`):

    python -m uvicorn bench.http_baseline:app --host 127.0.0.1 --port 8001 --log-level info

It reads `CORE_DATABASE_URL` and uses the product's engine and pool (`make_engine` + `make_sessionmaker`, one
transaction per request with `session.begin()`). `BENCH_HTTP_KEY_BODY` names a file holding the bytes the product's
`GET /key` answered and `BENCH_HTTP_KEY_TYPE` their content type, which `GET /static/key` returns as they are.
Every handler authenticates the key by the SHA-256 hash of its secret, in the same statement as its work, and
answers 401 when no usable key matches (the benchmark counts every non-2xx answer and fails the run on one).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from typing import Any

import msgspec
from litestar import Litestar, Request, Response, get, post
from litestar.datastructures import State
from sqlalchemy import text

from backend.db.engine import make_engine, make_sessionmaker

# ts_headline's options and the snippets' post-processing are the route's own: the baseline differs in SQL only.
from backend.domains.threads.search import HEADLINE_OPTIONS, highlighted, local_date
from backend.ids import new_id
from backend.params import encode_cursor

SEARCH_PAGE = 20

# The key, usable: not revoked, not expired. Every statement below starts with it.
_KEY = """SELECT id, org_id FROM api_keys
  WHERE secret_hash = :h AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now())"""

KEY_SQL = """
SELECT id, org_id, name, capabilities, memory, policy, privacy, expires_at, revoked_at,
       CASE WHEN revoked_at IS NOT NULL THEN 'revoked'
            WHEN expires_at IS NOT NULL AND expires_at <= now() THEN 'expired' ELSE 'active' END AS status,
       created_at, updated_at, last_used_at
FROM api_keys WHERE secret_hash = :h
"""

# GET /memory for a person: her records and shared ones, active, unexpired, newest id first, one row more than
# the page to know whether there is a next one. A partner id is shown only when the person sees the partner.
MEMORY_SQL = """
WITH k AS (""" + _KEY + """ AND capabilities @> '["memory"]')
SELECT r.* FROM k LEFT JOIN LATERAL (
  SELECT r.id, r.index_id, r.subject, r.type, r.text, r.metadata, r.labels, r.confidence,
         r.confidence::float8 AS effective_confidence, r.contested,
         (SELECT p.id FROM memory_records p WHERE p.org_id = r.org_id AND p.id = r.contested_with
            AND (p.subject = :person OR p.subject IS NULL)) AS contested_with,
         r.recall_count, r.source, r.verified, r.key, r.tags, r.priority, r.expires_at, r.status,
         (SELECT p.id FROM memory_records p WHERE p.org_id = r.org_id AND p.id = r.replaces
            AND (p.subject = :person OR p.subject IS NULL)) AS replaces,
         (SELECT p.id FROM memory_records p WHERE p.org_id = r.org_id AND p.id = r.replaced_by
            AND (p.subject = :person OR p.subject IS NULL)) AS replaced_by,
         r.confirmations, r.last_confirmed_at, r.provenance, r.commitment, r.episode, r.version, r.created_at,
         r.updated_at
  FROM memory_records r
  WHERE r.org_id = k.org_id AND r.index_id = :idx AND (r.subject = :person OR r.subject IS NULL)
    AND r.status = 'active' AND (r.expires_at IS NULL OR r.expires_at > now())
  ORDER BY r.id DESC LIMIT :n) r ON true
"""

# POST /memory for a person: the record as the API writes it, its first history version, one statement.
WRITE_SQL = """
WITH k AS (""" + _KEY + """ AND capabilities @> '["memory"]'),
rec AS (
  INSERT INTO memory_records (org_id, id, index_id, subject, type, text, norm_hash, metadata, labels, confidence,
                              source, verified, key, tags, priority, expires_at, commitment, provenance, embedding)
  SELECT k.org_id, :id, :idx, :person, :type, :text, :norm_hash, '{}'::jsonb, '{}'::jsonb, 1.0, 'api', false,
         NULL, '{}'::text[], 'normal', NULL, NULL, NULL, NULL FROM k
  RETURNING *),
ver AS (
  INSERT INTO memory_versions (org_id, record_id, version, at, action, actor_type, actor_id, partner_id, text,
                               metadata, labels, confidence, tags, priority, expires_at, status, verified, commitment)
  SELECT rec.org_id, rec.id, rec.version, clock_timestamp(), 'created', 'key', k.id, NULL, rec.text, rec.metadata,
         rec.labels, rec.confidence, rec.tags, rec.priority, rec.expires_at, rec.status, rec.verified, rec.commitment
  FROM rec, k)
SELECT id, index_id, subject, type, text, metadata, labels, confidence, confidence::float8 AS effective_confidence,
       contested, contested_with, recall_count, source, verified, key, tags, priority, expires_at, status, replaces,
       replaced_by, confirmations, last_confirmed_at, provenance, commitment, episode, version, created_at, updated_at
FROM rec
"""

# GET /thread-items?q= for a person: the 7-day slice (organisation's time zone) ending at the newest message's day,
# whether history goes further back, and one page of hits in her threads and shared ones, with snippets.
SEARCH_SQL = """
WITH k AS MATERIALIZED (""" + _KEY + """ AND capabilities @> '["threads"]'),
bounds AS MATERIALIZED (
  SELECT s.org_id, s.lower, s.tz,
         (SELECT max(created_at) FROM thread_items
           WHERE org_id = s.org_id AND text IS NOT NULL AND created_at < s.lower) IS NOT NULL AS older
  FROM (SELECT o.id AS org_id, o.timezone AS tz,
               timezone(o.timezone, date_trunc('day', timezone(o.timezone,
                   (SELECT max(created_at) FROM thread_items WHERE org_id = o.id AND text IS NOT NULL)))
                 - interval '6 days') AS lower
        FROM k JOIN orgs o ON o.id = k.org_id) s)
SELECT b.lower, b.tz, b.older, h.id, h.thread_id, h.type, h.role, h.subject, h.created_at,
       ts_headline('simple', h.text,
                   CASE WHEN querytree(websearch_to_tsquery('simple', :q)) = 'T'
                        THEN websearch_to_tsquery('simple', :q)
                        ELSE querytree(websearch_to_tsquery('simple', :q))::tsquery END, :hl) AS headline
FROM bounds b LEFT JOIN LATERAL (
  SELECT i.id, i.thread_id, i.type, i.role, i.subject, i.created_at, i.text
  FROM thread_items i JOIN threads t ON t.org_id = i.org_id AND t.id = i.thread_id
  WHERE i.org_id = b.org_id AND i.text IS NOT NULL AND i.created_at >= b.lower
    AND t.deleted_at IS NULL AND (t.subject = :person OR t.subject IS NULL)
    AND i.tsv @@ websearch_to_tsquery('simple', :q)
  ORDER BY i.created_at DESC, i.id DESC LIMIT :n) h ON true
ORDER BY h.created_at DESC, h.id DESC
"""

STATEMENTS = {"key": KEY_SQL, "memory": MEMORY_SQL, "write": WRITE_SQL, "search": SEARCH_SQL}
_key_sql, _memory_sql, _write_sql, _search_sql = (text(s) for s in (KEY_SQL, MEMORY_SQL, WRITE_SQL, SEARCH_SQL))


def _unauthorized() -> Response[Any]:
    return Response({"status": 401, "code": "bad_credential", "message": "This credential is not known."},
                    status_code=401)


def _secret_hash(request: Request[Any, Any, Any]) -> str:
    _, _, token = (request.headers.get("authorization") or "").partition(" ")
    return hashlib.sha256(token.strip().encode()).hexdigest()


def _person(request: Request[Any, Any, Any]) -> str | None:
    raw = request.headers.get("x-core-subject")
    return str(json.loads(raw)["id"]) if raw else None


@asynccontextmanager
async def lifespan(app: Litestar) -> AsyncGenerator[None, None]:
    engine = make_engine(os.environ["CORE_DATABASE_URL"], app_role=False)
    app.state.sessions = make_sessionmaker(engine)
    try:
        yield
    finally:
        await engine.dispose()


def _static_key() -> tuple[bytes, str]:
    path = os.environ.get("BENCH_HTTP_KEY_BODY")
    body = open(path, "rb").read() if path else b"{}"  # noqa: SIM115 - read once at import
    return body, os.environ.get("BENCH_HTTP_KEY_TYPE", "application/json")


KEY_BODY, KEY_TYPE = _static_key()


@get("/static/key", sync_to_thread=False)
def static_key() -> Response[bytes]:
    """(a) The bytes GET /key answered, with its content type: what Litestar and uvicorn cost alone."""
    return Response(KEY_BODY, media_type=KEY_TYPE)


@get("/key")
async def own_key(request: Request[Any, Any, Any], state: State) -> Any:
    """(b-key) The key document by the hash of its secret."""
    async with state.sessions() as db, db.begin():
        row = (await db.execute(_key_sql, {"h": _secret_hash(request)})).mappings().first()
    if row is None:
        return _unauthorized()
    return dict(row)


@get("/memory")
async def memory(request: Request[Any, Any, Any], state: State, index_id: str, limit: int = 50) -> Any:
    """(b-memory) Authenticate and read her page of records in one statement."""
    async with state.sessions() as db, db.begin():
        rows = (await db.execute(_memory_sql, {"h": _secret_hash(request), "person": _person(request),
                                               "idx": index_id, "n": limit + 1})).mappings().all()
    if not rows:
        return _unauthorized()
    records = [dict(r) for r in rows if r["id"] is not None]
    more = len(records) > limit
    records = records[:limit]
    return {"data": records, "next_cursor": encode_cursor(records[-1]["id"]) if more else None}


@get("/thread-items")
async def thread_items(request: Request[Any, Any, Any], state: State, q: str) -> Any:
    """(b-search) Authenticate, find the slice and her page of hits with snippets, in one statement."""
    async with state.sessions() as db, db.begin():
        rows = (await db.execute(_search_sql, {"h": _secret_hash(request), "person": _person(request), "q": q,
                                               "hl": HEADLINE_OPTIONS, "n": SEARCH_PAGE + 1})).mappings().all()
    if not rows:
        return _unauthorized()
    first = rows[0]
    hits = [r for r in rows if r["id"] is not None]
    next_cursor: str | None = None
    if len(hits) > SEARCH_PAGE:
        hits = hits[:SEARCH_PAGE]
        last = hits[-1]
        next_cursor = encode_cursor({"u": last["created_at"].isoformat(), "i": last["id"],
                                     "l": first["lower"].isoformat()})
        searched_to = local_date(last["created_at"], first["tz"])
    else:
        searched_to = local_date(first["lower"], first["tz"])
        if first["older"]:
            next_cursor = encode_cursor({"u": first["lower"].isoformat()})
    data = []
    for h in hits:
        snippet, spans = highlighted(h["headline"])
        data.append({"thread_id": h["thread_id"], "item_id": h["id"], "type": h["type"], "role": h["role"],
                     "subject": h["subject"], "created_at": h["created_at"], "snippet": snippet, "highlights": spans,
                     "metadata": None, "metadata_by": None})
    return {"data": data, "next_cursor": next_cursor, "searched_to": searched_to}


_write_body = msgspec.json.Decoder(dict[str, Any])


@post("/memory")
async def write(request: Request[Any, Any, Any], state: State) -> Any:
    """(g) Authenticate, insert the record and its first history version, commit; 201 with the record."""
    body = _write_body.decode(await request.body())
    words = " ".join(body["text"].casefold().split()).rstrip(" .!?;")
    params = {"h": _secret_hash(request), "person": _person(request), "id": new_id("mem"), "idx": body["index_id"],
              "type": body["type"], "text": body["text"], "norm_hash": hashlib.sha256(words.encode()).hexdigest()}
    async with state.sessions() as db, db.begin():
        row = (await db.execute(_write_sql, params)).mappings().first()
    if row is None:
        return _unauthorized()
    return Response(dict(row), status_code=201)


app = Litestar(route_handlers=[static_key, own_key, memory, thread_items, write], lifespan=[lifespan], debug=False)
