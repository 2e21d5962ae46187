"""EXP-1 … EXP-4: exports for analysts — dtypes, filters, access, audit, every format, the CLI and the helper."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import polars as pl
import pytest

from backend.domains.exports.formats import ITEM_SCHEMA, RECORD_SCHEMA, csv_schema
from tests.helpers import assert_error, bearer
from tests.threads.util import msg, new_thread

TRICKY = 'Line one\nline "two", with commas, and quotes\r\nمرحبا بالعالم — 你好，世界 — 🎉👩‍💻'


def read(content: bytes, fmt: str, schema: dict[str, pl.DataType] = RECORD_SCHEMA) -> pl.DataFrame:
    """Read an export the way docs/export.md tells analysts to."""
    if fmt == "parquet":
        return pl.read_parquet(io.BytesIO(content))
    if fmt == "ndjson":
        return pl.read_ndjson(io.BytesIO(content), schema=schema)
    frame = pl.read_csv(io.BytesIO(content), schema=csv_schema(schema))
    lists = [n for n, t in schema.items() if isinstance(t, pl.List)]
    return frame.with_columns(pl.col(n).str.json_decode(schema[n]) for n in lists)


def export(client: Any, headers: dict[str, str], fmt: str = "parquet", **params: Any) -> pl.DataFrame:
    response = client.get("/memory/export", params={"format": fmt, **params}, headers=headers)
    assert response.status_code == 200, response.text
    return read(response.content, fmt)


def db_records(db: Any, ids: list[str]) -> dict[str, dict[str, Any]]:
    rows = db.execute("SELECT id, subject, type, text, metadata, labels, confidence, tags, commitment, created_at, "
                      "updated_at, version FROM memory_records WHERE id = ANY(%s)", (ids,)).fetchall()
    names = ["id", "subject", "type", "text", "metadata", "labels", "confidence", "tags", "commitment", "created_at",
             "updated_at", "version"]
    return {r[0]: dict(zip(names, r, strict=True)) for r in rows}


@pytest.fixture
def seeded(mem: Any) -> dict[str, Any]:
    """Anna's fact with awkward text, her commitment, Bob's preference and a shared note, in one index."""
    due = datetime(2027, 3, 1, 9, 30, tzinfo=UTC)
    out = {
        "anna_fact": mem.write(mem.anna(), TRICKY, metadata={"source": "chat", "n": 5, "text": 'a "q",\nb'},
                               labels={"team": ["red", "blue"]}, tags=["Docker", "ops"], confidence=0.8),
        "anna_commitment": mem.write(mem.anna(), "Send the report", type="commitment",
                                     commitment={"status": "open", "due_at": due.isoformat(), "promised_to": "bob"}),
        "bob": mem.write(mem.bob(), "Bob likes tea", type="preference"),
        "shared": mem.write(mem.nobody, "Office opens at nine", type="note"),
    }
    return out


def test_exp_2_3_parquet_has_documented_dtypes_and_database_values(mem, seeded, client, db):
    response = client.get("/memory/export", params={"format": "parquet", "index_id": mem.index_id},
                          headers=mem.admin)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/vnd.apache.parquet"
    assert response.headers["content-disposition"].startswith('attachment; filename="memory-')
    assert response.headers["content-disposition"].endswith('.parquet"')
    frame = pl.read_parquet(io.BytesIO(response.content))
    assert frame.schema == pl.Schema(RECORD_SCHEMA)
    assert pl.scan_parquet(io.BytesIO(response.content)).collect_schema() == pl.Schema(RECORD_SCHEMA)
    ids = [r["id"] for r in seeded.values()]
    assert sorted(frame["id"].to_list()) == sorted(ids)
    stored = db_records(db, ids)
    for row in frame.iter_rows(named=True):
        want = stored[row["id"]]
        assert row["text"] == want["text"]
        assert row["subject"] == want["subject"]
        assert json.loads(row["metadata"]) == want["metadata"]
        assert json.loads(row["labels"]) == want["labels"]
        assert row["confidence"] == want["confidence"]
        assert row["tags"] == want["tags"]
        assert row["created_at"] == want["created_at"]
        assert row["updated_at"] == want["updated_at"]
        assert row["version"] == want["version"]
        assert row["effective_confidence"] == pytest.approx(want["confidence"])  # no half-lives in this org
    fact = frame.filter(pl.col("id") == seeded["anna_fact"]["id"]).row(0, named=True)
    assert fact["text"] == TRICKY and fact["tags"] == ["docker", "ops"]
    commitment = frame.filter(pl.col("id") == seeded["anna_commitment"]["id"]).row(0, named=True)
    assert commitment["commitment_status"] == "open"
    assert commitment["commitment_due_at"] == datetime(2027, 3, 1, 9, 30, tzinfo=UTC)
    assert commitment["commitment_promised_to"] == "bob"
    assert fact["commitment_status"] is None and fact["episode_from"] is None


@pytest.mark.parametrize("fmt", ["csv", "ndjson"])
def test_exp_3_every_format_reads_back_to_the_same_frame(mem, seeded, client, fmt):
    reference = export(client, mem.admin, "parquet", index_id=mem.index_id)
    frame = export(client, mem.admin, fmt, index_id=mem.index_id)
    assert frame.schema == pl.Schema(RECORD_SCHEMA)
    assert frame.equals(reference), (frame, reference)
    assert TRICKY in frame["text"].to_list()


def test_exp_2_filters_index_type_subject_shared_since_until(mem, seeded, client):
    admin = mem.admin

    def ids(**params: Any) -> set[str]:
        return set(export(client, admin, "ndjson", index_id=mem.index_id, **params)["id"].to_list())

    s = {k: v["id"] for k, v in seeded.items()}
    assert ids() == set(s.values())
    assert ids(type="commitment") == {s["anna_commitment"]}
    assert ids(type=["preference", "note"]) == {s["bob"], s["shared"]}
    assert ids(subject="anna") == {s["anna_fact"], s["anna_commitment"]}
    assert ids(shared="true") == {s["shared"]}
    created = {k: datetime.fromisoformat(v["created_at"]) for k, v in seeded.items()}
    cut = created["bob"]
    assert ids(after=cut.isoformat()) == {s["bob"], s["shared"]}
    assert ids(before=cut.isoformat()) == {s["anna_fact"], s["anna_commitment"]}
    assert ids(after=(cut + timedelta(days=1)).isoformat()) == set()
    # Any offset an instant may carry, also one PostgreSQL does not read (beyond ±15:59); an instant with no UTC
    # time in years 1–9999 is refused, as on every route (PLT-15).
    assert ids(before="1075-07-31T15:33:51+22:22") == set()
    assert ids(after=cut.astimezone(timezone(timedelta(hours=23, minutes=59))).isoformat()) == {s["bob"], s["shared"]}
    assert ids(after="0001-01-02T00:00:00+22:22") == set(s.values())
    for name, value in (("after", "0001-01-01T00:00:00+22:22"), ("before", "0001-01-01T00:00:00+05:00"),
                        ("before", "9999-12-31T23:00:00-22:22")):
        assert_error(client.get("/memory/export", params={"format": "ndjson", name: value}, headers=admin), 422,
                     "validation_failed", name)
    assert ids(metadata="source:chat") == {s["anna_fact"]}  # JSONB parameters reach the COPY statement
    assert ids(metadata="n:5", label="team:red", tag="DOCKER") == {s["anna_fact"]}
    assert ids(metadata="source:mail") == set()
    # Another index of the same organisation is not in this index's export.
    other = export(client, admin, "ndjson", type="note")
    assert s["shared"] in other["id"].to_list()
    assert_error(client.get("/memory/export", params={"subject": "anna", "shared": "true"}, headers=admin), 422,
                 "subject_and_shared", "shared")
    assert_error(client.get("/memory/export", params={"format": "xlsx"}, headers=admin), 422, "invalid_format",
                 "format")


def test_exp_2_a_person_gets_only_what_get_memory_shows_her(mem, seeded, client):
    anna = export(client, mem.anna(), "parquet", index_id=mem.index_id)
    listed = set(mem.list(mem.anna()))
    assert set(anna["id"].to_list()) == listed
    assert seeded["bob"]["id"] not in anna["id"].to_list()
    assert set(anna["subject"].drop_nulls().to_list()) == {"anna"}
    # A person's request may not name another with `subject`.
    assert_error(client.get("/memory/export", params={"subject": "bob"}, headers=mem.anna()), 403,
                 "subject_filter_forbidden")


def test_exp_2_subject_token_key_without_management_and_other_org(mem, seeded, client, org, other_org):
    token = org.subject_token(mem.key, "anna")
    assert_error(client.get("/memory/export", headers=bearer(token)), 403, "subject_token_forbidden")
    plain = org.make_key(["knowledge", "memory"])["secret"]
    assert_error(client.get("/memory/export", headers=bearer(plain)), 403)
    assert_error(client.get("/memory/export", params={"index_id": mem.index_id}, headers=other_org.admin), 404)
    theirs = export(client, other_org.admin, "parquet")
    assert not set(theirs["id"].to_list()) & {r["id"] for r in seeded.values()}
    theirs_key = export(client, bearer(other_org.key), "ndjson")
    assert theirs_key.height == 0


def test_exp_2_route_is_not_taken_for_a_record_id(mem, seeded, client):
    """`/memory/export` reaches the export handler, not `GET /memory/{record_id}`."""
    response = client.get("/memory/export", params={"format": "ndjson", "index_id": mem.index_id},
                          headers=mem.admin)
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/x-ndjson"
    assert len(response.text.strip().splitlines()) == len(seeded)


def test_exp_2_admin_export_is_audited(mem, seeded, client):
    export(client, mem.admin, "csv", index_id=mem.index_id, type="fact", subject="anna")
    response = client.get("/audit", params={"action": "memory.export"}, headers=mem.admin)
    assert response.status_code == 200, response.text
    event = response.json()["data"][0]
    assert event["action"] == "memory.export"
    assert event["actor"]["type"] == "admin"
    detail = event["detail"]
    assert detail["route"] == "GET /memory/export" and detail["format"] == "csv" and detail["count"] == 1
    assert detail["filters"]["index_id"] == mem.index_id and detail["filters"]["type"] == ["fact"]
    assert "anna" not in json.dumps(event)  # the person is named only by her keyed hash


def test_exp_2_exports_use_the_organisations_half_lives(mem, client, db, database_url, settings, tmp_path):
    """MEM-9: administrators' exports and the CLI use the organisation's decay; the stored value stays."""
    row = mem.write(mem.anna(), "Old fact", confidence=0.8)
    db.execute("UPDATE memory_records SET updated_at = now() - interval '10 days' WHERE id = %s", (row["id"],))
    decayed = client.patch(f"/tenants/{mem.org.org_id}", json={"memory": {"decay": {"fact": {"half_life_days": 10}}}},
                           headers=mem.admin)
    assert decayed.status_code == 200, decayed.text
    try:
        frame = export(client, mem.admin, "parquet", index_id=mem.index_id)
        mine = frame.filter(pl.col("id") == row["id"]).row(0, named=True)
        assert mine["effective_confidence"] == pytest.approx(0.4, rel=1e-3)
        assert mine["confidence"] == 0.8
        out = tmp_path / "decayed.parquet"
        done = _cli(database_url, settings.secret, "records", "--org", mem.org.org_id, "--out", str(out),
                    "--index", mem.index_id)
        assert done.returncode == 0, done.stderr
        assert pl.read_parquet(out)["effective_confidence"][0] == pytest.approx(0.4, rel=1e-3)
    finally:
        client.patch(f"/tenants/{mem.org.org_id}", json={"memory": {"decay": {}}}, headers=mem.admin)


def test_mem_9_a_keys_export_uses_the_organisations_half_lives_unless_it_names_a_key(mem, client, db):
    """MEM-9: a key reads with its own half-lives, but exports (like administrators and maintenance) use the
    organisation's unless `key_id` names whose to apply."""
    row = mem.write(mem.anna(), "Old fact", confidence=0.8)
    db.execute("UPDATE memory_records SET updated_at = now() - interval '10 days' WHERE id = %s", (row["id"],))
    decaying = mem.org.make_key(memory={"decay": {"fact": {"half_life_days": 10}}})
    headers = bearer(decaying["secret"])
    listed = client.get(f"/memory/{row['id']}", headers=headers).json()
    assert listed["effective_confidence"] == pytest.approx(0.4, rel=1e-3)  # its reads: its own half-lives
    frame = export(client, headers, "parquet", index_id=mem.index_id)
    assert frame.filter(pl.col("id") == row["id"])["effective_confidence"][0] == pytest.approx(0.8)
    named = export(client, headers, "parquet", index_id=mem.index_id, key_id=decaying["id"])
    assert named.filter(pl.col("id") == row["id"])["effective_confidence"][0] == pytest.approx(0.4, rel=1e-3)
    assert_error(client.get("/memory/export", params={"key_id": "key_unknown"}, headers=headers), 404,
                 param="key_id")


# ---------------------------------------------------------------- CLI (EXP-1)

def _cli(database_url: str, secret: str, *args: str) -> subprocess.CompletedProcess[str]:
    from sqlalchemy.engine import make_url

    plain = make_url(database_url).set(drivername="postgresql").render_as_string(hide_password=False)
    env = {**os.environ, "CORE_DATABASE_URL": plain, "CORE_SECRET": secret}
    return subprocess.run([sys.executable, "-m", "backend.cli", "export", *args], env=env, capture_output=True,
                          text=True, timeout=180)


@pytest.mark.parametrize("fmt", ["parquet", "csv", "ndjson"])
def test_exp_1_cli_writes_records_in_every_format(mem, seeded, client, database_url, settings, tmp_path, fmt):
    out = tmp_path / f"records.{fmt}"
    done = _cli(database_url, settings.secret, "records", "--org", mem.org.org_id, "--format", fmt, "--out",
                str(out), "--index", mem.index_id)
    assert done.returncode == 0, done.stderr
    assert f"{len(seeded)} records written" in done.stdout
    frame = read(out.read_bytes(), fmt)
    assert frame.schema == pl.Schema(RECORD_SCHEMA)
    assert frame.equals(export(client, mem.admin, "parquet", index_id=mem.index_id))
    shared = _cli(database_url, settings.secret, "records", "--org", mem.org.org_id, "--out", str(out),
                  "--index", mem.index_id, "--shared")
    assert shared.returncode == 0, shared.stderr
    assert pl.read_parquet(out)["id"].to_list() == [seeded["shared"]["id"]]


def test_exp_1_cli_filters_and_refusals(mem, seeded, database_url, settings, tmp_path):
    out = tmp_path / "anna.parquet"
    done = _cli(database_url, settings.secret, "records", "--org", mem.org.org_id, "--out", str(out), "--index",
                mem.index_id, "--subject", "anna", "--type", "commitment")
    assert done.returncode == 0, done.stderr
    assert pl.read_parquet(out)["id"].to_list() == [seeded["anna_commitment"]["id"]]
    both = _cli(database_url, settings.secret, "records", "--org", mem.org.org_id, "--out", str(out),
                "--subject", "anna", "--shared")
    assert both.returncode != 0 and "exclude each other" in both.stderr
    naive = _cli(database_url, settings.secret, "records", "--org", mem.org.org_id, "--out", str(out),
                 "--since", "2026-01-01T00:00:00")
    assert naive.returncode != 0 and "offset" in naive.stderr
    past_the_calendar = _cli(database_url, settings.secret, "records", "--org", mem.org.org_id, "--out", str(out),
                             "--until", "9999-12-31T23:00:00-22:22")
    assert past_the_calendar.returncode == 2 and "years 1–9999" in past_the_calendar.stderr, past_the_calendar.stderr
    misspelt = _cli(database_url, settings.secret, "records", "--org", mem.org.org_id, "--out", str(out),
                    "--type", "commitment", "--type", "Fact!")
    assert misspelt.returncode == 2 and "'Fact!' is no type name" in misspelt.stderr, misspelt.stderr
    missing = _cli(database_url, settings.secret, "records", "--org", "org_nope", "--out", str(tmp_path / "x"))
    assert missing.returncode != 0 and "No organisation" in missing.stderr
    assert not (tmp_path / "x").exists()


def test_exp_1_cli_finds_the_organisation_from_the_index_or_thread(mem, seeded, org, client, database_url,
                                                                      settings, tmp_path):
    """EXP-1 names no `--org`: the index (or thread) says whose export it is; `--org` is asked for only when
    the organisation is ambiguous (this database holds two)."""
    out = tmp_path / "by-index.parquet"
    done = _cli(database_url, settings.secret, "records", "--out", str(out), "--index", mem.index_id)
    assert done.returncode == 0, done.stderr
    assert sorted(pl.read_parquet(out)["id"].to_list()) == sorted(r["id"] for r in seeded.values())
    thread = new_thread(client, bearer(org.key, "erin"), items=[msg("user", "hello")])
    by_thread = _cli(database_url, settings.secret, "thread-items", "--out", str(out), "--thread", thread["id"])
    assert by_thread.returncode == 0, by_thread.stderr
    assert pl.read_parquet(out)["thread_id"].to_list() == [thread["id"]]
    ambiguous = _cli(database_url, settings.secret, "records", "--out", str(out))
    assert ambiguous.returncode == 2 and "--org" in ambiguous.stderr
    unknown = _cli(database_url, settings.secret, "records", "--out", str(out), "--index", "idx_nope")
    assert unknown.returncode != 0 and "idx_nope" in unknown.stderr
    mismatch = _cli(database_url, settings.secret, "records", "--org", mem.org.org_id, "--out", str(out), "--index",
                    mem.index_id.replace(mem.index_id[-4:], "zzzz"))
    assert mismatch.returncode != 0


def test_exp_1_cli_exports_thread_items(org, client, database_url, settings, tmp_path, db):
    headers = bearer(org.key, "carla")
    thread = new_thread(client, headers, items=[msg("user", TRICKY), msg("assistant", "Noted, Carla.")])
    other = new_thread(client, bearer(org.key, "dave"), items=[msg("user", "Hello")])
    out = tmp_path / "items.csv"
    done = _cli(database_url, settings.secret, "thread-items", "--org", org.org_id, "--format", "csv", "--out",
                str(out), "--thread", thread["id"])
    assert done.returncode == 0, done.stderr
    frame = read(out.read_bytes(), "csv", ITEM_SCHEMA)
    assert frame.schema == pl.Schema(ITEM_SCHEMA)
    assert frame["position"].to_list() == [1, 2]
    assert frame["text"].to_list()[0] == TRICKY
    assert frame["subject"].to_list()[0] == "carla"
    stored = db.execute("SELECT id, body, created_at FROM thread_items WHERE thread_id = %s ORDER BY position",
                        (thread["id"],)).fetchall()
    assert frame["id"].to_list() == [r[0] for r in stored]
    assert [json.loads(b) for b in frame["body"].to_list()] == [r[1] for r in stored]
    assert frame["created_at"].to_list() == [r[2] for r in stored]
    by_person = _cli(database_url, settings.secret, "thread-items", "--org", org.org_id, "--out", str(out),
                     "--subject", "dave")
    assert by_person.returncode == 0, by_person.stderr
    assert set(pl.read_parquet(out)["thread_id"].to_list()) == {other["id"]}
    events = db.execute("SELECT actor_type, detail FROM audit_events WHERE org_id = %s AND action = "
                        "'thread_items.export' ORDER BY seq", (org.org_id,)).fetchall()
    assert events[-1][0] == "system" and events[-1][1]["count"] == 1


# ---------------------------------------------------------------- helper (EXP-4)

def test_exp_4_records_frame_over_real_http(mem, seeded, live_api):
    from shared.client import ApiError, records_frame

    frame = records_frame(live_api, mem.org.admin_token, index_id=mem.index_id)
    assert frame.schema == pl.Schema(RECORD_SCHEMA)
    assert sorted(frame["id"].to_list()) == sorted(r["id"] for r in seeded.values())
    only = records_frame(live_api, mem.org.key, index_id=mem.index_id, type="commitment")
    assert only["id"].to_list() == [seeded["anna_commitment"]["id"]]
    since = datetime.fromisoformat(seeded["bob"]["created_at"])
    shared = records_frame(live_api, mem.org.admin_token, index_id=mem.index_id, shared=True, after=since)
    assert shared["id"].to_list() == [seeded["shared"]["id"]]
    assert shared.schema == pl.Schema(RECORD_SCHEMA)
    token = mem.org.subject_token(mem.key, "anna")
    with pytest.raises(ApiError) as refused:
        records_frame(live_api, token)
    assert refused.value.status == 403 and refused.value.code == "subject_token_forbidden"


def test_exp_1_tiny_blocks_cut_only_between_rows(mem, seeded, client, database_url, settings, tmp_path):
    """Blocks far smaller than a row still split only at row ends, also inside quoted multi-line text."""
    from backend.domains.exports.repository import _row_end
    from backend.domains.exports.to_file import export_to_file
    from shared.schemas.memory import MemoryQuery

    block = b'a,"x\ny ""q""\nz",1\nb,"\n",2\nc,"open'
    assert block[:_row_end(block, len(block)) + 1] == b'a,"x\ny ""q""\nz",1\nb,"\n",2\n'
    assert _row_end(b'a,"x\ny', 7) == -1
    reference = export(client, mem.admin, "parquet", index_id=mem.index_id)
    for fmt in ("parquet", "csv", "ndjson"):
        out = tmp_path / f"tiny.{fmt}"
        rows = export_to_file(database_url, settings.secret, "records", fmt, str(out), org_id=mem.org.org_id,
                              records=MemoryQuery(index_id=mem.index_id), block_bytes=16)
        assert rows == len(seeded)
        assert read(out.read_bytes(), fmt).equals(reference)



def test_exp_1_stream_stopped_early_ends_its_copy(mem, seeded, database_url):
    """A reader that goes away closes the COPY's connection, also while a read is in flight (cancelled)."""
    import threading
    import time

    from sqlalchemy import func, select
    from sqlalchemy.dialects.postgresql import psycopg as dialect
    from sqlalchemy.engine import make_url

    from backend.domains.exports.repository import CsvBlocks

    conninfo = make_url(database_url).set(drivername="postgresql").render_as_string(hide_password=False)
    # Rows of 20 kB, one every half second: the server flushes each, so the COPY starts and a read waits.
    slow = select(func.repeat("x", 20_000), func.pg_sleep(0.5)).select_from(func.generate_series(1, 60))
    blocks = CsvBlocks(conninfo, dialect.dialect(), slow, 2**20)
    blocks.open()
    failed: list[BaseException] = []

    def read() -> None:
        try:
            blocks.read()
        except BaseException as exc:
            failed.append(exc)

    reader = threading.Thread(target=read)
    reader.start()
    time.sleep(0.3)
    started = time.monotonic()
    blocks.abort()
    reader.join(10)
    assert not reader.is_alive() and time.monotonic() - started < 5
    assert failed and blocks._conn.closed
    assert blocks.read() is None

    idle = CsvBlocks(conninfo, dialect.dialect(), select(func.pg_sleep(0)), 16)
    idle.open()
    idle.abort()
    assert idle._conn.closed and idle.read() is None


def test_exp_2_the_audited_count_is_exactly_the_files_rows_despite_writes_in_between(mem, seeded, database_url,
                                                                                     settings, db):
    """The rows are counted in the snapshot they are read from: a record written after the audit event and
    before the first byte is in neither the count nor the file (it was the known gap of stop 8)."""
    import asyncio

    from backend.domains.exports import service
    from shared.schemas.memory import MemoryQuery
    from tests.helpers import as_request

    async def begin_export(ctx: Any) -> Any:
        return await service.for_request(ctx, MemoryQuery(index_id=mem.index_id), "ndjson")

    export, rows = as_request(database_url, settings, mem.key, None, begin_export)
    late = mem.write(mem.nobody, "Written after the count, before the first byte", type="note")

    async def drain() -> bytes:
        return b"".join([chunk async for chunk in service.encoded(export, rows, "ndjson")])

    frame = read(asyncio.run(drain()), "ndjson")
    event = db.execute("SELECT detail FROM audit_events WHERE action = 'memory.export' ORDER BY seq DESC LIMIT 1"
                       ).fetchone()[0]
    assert event["route"] == "GET /memory/export" and event["count"] == len(seeded) == frame.height
    assert late["id"] not in frame["id"].to_list()
