"""The `coremem` command line (PLT-3, PLT-19, EXP-1) and the export (EXP-1 … EXP-3) with bad arguments
and odd data: every refusal is one clear line and a non-zero exit (never a traceback), nothing is written half,
and every format reads back to the rows the database holds, as many as `GET /memory/stats` counts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import polars as pl

from backend.domains.exports.formats import ITEM_SCHEMA, RECORD_SCHEMA
from tests.export.test_export import read
from tests.helpers import bearer
from tests.memory import conftest as _memory
from tests.threads.util import msg, new_thread

REPO = Path(__file__).resolve().parent.parent
# The memory tests' module-scoped database, app and organisations (fast), as tests/export/conftest.py takes them.
client, database_url, db, mem, org, settings = (_memory.client, _memory.database_url, _memory.db, _memory.mem,
                                                _memory.org, _memory.settings)
UNREACHABLE = "postgresql://coremem@127.0.0.1:1/nowhere"
DATA_DIR = tempfile.mkdtemp(prefix="coremem-cli-edges-")  # the commands' CORE_DATA_DIR, outside the checkout


def _plain(database_url: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(database_url).set(drivername="postgresql").render_as_string(hide_password=False)


def _cli(url: str, secret: str, *args: str | bytes, cwd: Path | None = None,
         timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CORE_DATABASE_URL": url, "CORE_SECRET": secret, "CORE_DATA_DIR": DATA_DIR,
           "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-m", "backend.cli", *args], env=env, capture_output=True, text=True,
                          errors="replace", timeout=timeout, cwd=str(cwd) if cwd else str(REPO))


def _exports(db: Any) -> int:
    return int(db.execute("SELECT count(*) FROM audit_events WHERE action IN ('memory.export', 'thread_items.export')"
                          ).fetchone()[0])


# ---------------------------------------------------------------- the command line


def test_plt_19_a_database_url_that_is_wrong_or_unreachable_is_one_line_not_a_traceback(settings, tmp_path):
    """PLT-19: configuration comes from CORE_*; a CORE_DATABASE_URL nobody answers at, or that is no URL, must be
    said in one line naming it, not a psycopg/SQLAlchemy traceback."""
    commands = [
        ("export", "records", "--format", "csv", "--out", str(tmp_path / "r.csv")),
        ("audit", "verify"),
        ("bootstrap", "--org", "Initech", "--admin", "boss@initech.test"),
        ("migrate",),
        ("memory", "reembed"),
        ("models", "remove", "some-model"),
        ("worker",),
    ]
    problems = []
    for url in (UNREACHABLE, "this is not a database url"):
        for args in commands:
            done = _cli(url, settings.secret, *args, cwd=tmp_path, timeout=60)
            if done.returncode == 0 or "Traceback" in done.stderr or not done.stderr.strip():
                last = done.stderr.strip().splitlines()[-1:] or [""]
                problems.append(f"CORE_DATABASE_URL={url!r} coremem {' '.join(args)}: exit {done.returncode}, "
                                f"traceback={'Traceback' in done.stderr}, last line {last[0]!r}")
    assert not problems, "PLT-19/PLT-14: a bad or unreachable database URL gives a traceback:\n" + "\n".join(problems)
    assert not list(tmp_path.iterdir()), "nothing may be written when the database cannot be reached"


def test_plt_19_a_database_without_the_schema_says_run_migrate(postgres, settings, tmp_path):
    """PLT-19: pointed at a database that exists but was never migrated, a command other than `migrate` should say
    `coremem migrate` (as `worker` does), not fail with an UndefinedTable traceback."""
    name = f"probe_empty_{os.getpid()}"
    postgres.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    postgres.execute(f'CREATE DATABASE "{name}"')
    try:
        url = _plain(postgres.url_for(name))
        problems = []
        for args in (("export", "records", "--format", "csv", "--out", str(tmp_path / "r.csv")), ("audit", "verify"),
                     ("memory", "reembed"), ("models", "remove", "m"), ("worker",)):
            done = _cli(url, settings.secret, *args, cwd=tmp_path, timeout=60)
            if done.returncode == 0 or "Traceback" in done.stderr or "migrate" not in done.stderr:
                problems.append(f"coremem {' '.join(args[:2])}: exit {done.returncode}, traceback="
                                f"{'Traceback' in done.stderr}, last line {done.stderr.strip().splitlines()[-1:]}")
        assert not problems, "PLT-19: an unmigrated database:\n" + "\n".join(problems)
    finally:
        postgres.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_exp_1_an_out_path_that_cannot_be_written_is_refused_cleanly_and_writes_nothing(
        mem, database_url, settings, db, tmp_path):
    """EXP-1 (decision: `export --out` must be in an existing, writable directory; exit 2, click's message; a
    failed export leaves no half file): `--out ""` and a file name the system takes but whose `.part` twin is
    too long end in a traceback after the export was already audited as done."""
    mem.write(mem.anna(), "Likes tea")
    work = tmp_path / "cwd"
    work.mkdir()
    problems = []
    long_name = "r" * 250 + ".csv"  # 254 bytes: a legal file name (255 at most); `<name>.part` is 259
    (work / long_name).write_text("")  # the system takes the name
    (work / long_name).unlink()
    for out in ("", str(work / long_name)):
        before = _exports(db)
        done = _cli(_plain(database_url), settings.secret, "export", "records", "--org", mem.org.org_id, "--index",
                    mem.index_id, "--format", "csv", "--out", out, cwd=work)
        left = sorted(p.name for p in work.iterdir())
        wrote_it = done.returncode == 0 and out and Path(out).exists()
        if wrote_it:
            continue  # writing a legal file name is a fine answer too
        if done.returncode == 0 or "Traceback" in done.stderr:
            problems.append(f"--out {out[:40]!r}…: exit {done.returncode}, traceback={'Traceback' in done.stderr}: "
                            f"{done.stderr.strip().splitlines()[-1:]}")
        if left:
            problems.append(f"--out {out[:40]!r}…: left files behind: {left}")
        if _exports(db) != before:
            problems.append(f"--out {out[:40]!r}…: the trail says an export of rows happened, no file was written")
    assert not problems, "EXP-1: an --out that cannot be written:\n" + "\n".join(problems)


def test_plt_19_undecodable_bytes_in_an_option_are_refused_naming_the_option(org, database_url, settings, db,
                                                                               tmp_path):
    """PLT-19: a name or id given in a non-UTF-8 terminal (bytes Python keeps as lone surrogates) reaches
    PostgreSQL, which cannot encode it: a UnicodeEncodeError traceback. bootstrap's own check (the API's Name)
    lets it through, so its refusal is no longer the API's 422 either."""
    url = _plain(database_url)
    orgs_before = db.execute("SELECT count(*) FROM orgs").fetchone()[0]
    cases = [
        ("--subject", ("export", "records", "--org", org.org_id, "--format", "csv", "--out",
                       str(tmp_path / "s.csv"), "--subject", b"caf\xe9")),
        ("--org", ("audit", "verify", "--org", b"org_\xff")),
        ("--index", ("export", "records", "--format", "csv", "--out", str(tmp_path / "i.csv"), "--index",
                     b"idx_\xff")),
        ("--org", ("bootstrap", "--org", b"Caf\xe9 Oost", "--admin", "boss@cafe.test")),
    ]
    problems = []
    for option, args in cases:
        done = _cli(url, settings.secret, *args, cwd=tmp_path)
        if done.returncode == 0 or "Traceback" in done.stderr or option not in done.stderr:
            problems.append(f"coremem {' '.join(a if isinstance(a, str) else repr(a) for a in args[:2])} "
                            f"{option} <bytes>: exit {done.returncode}, traceback={'Traceback' in done.stderr}, "
                            f"last line {done.stderr.strip().splitlines()[-1:]}")
    assert not problems, "PLT-19: undecodable option values:\n" + "\n".join(problems)
    assert db.execute("SELECT count(*) FROM orgs").fetchone()[0] == orgs_before
    assert not list(tmp_path.glob("*.csv*"))


def _demo_admin_taken(database_url: str, settings: Any) -> None:
    """An organisation whose administrator is admin@demo.local: the address `demo --org` derives for "" and "日本"
    (so the current code stops at bootstrap instead of building a whole demo)."""
    made = _cli(_plain(database_url), settings.secret, "bootstrap", "--org", "Demo owner", "--admin",
                "admin@demo.local")
    assert made.returncode == 0, made.stderr


def test_plt_19_demo_checks_its_org_name_like_bootstrap(org, database_url, settings, db, tmp_path):
    """PLT-3/PLT-19 (decision: the CLI checks --org as the API's Name, 1–200 characters, before touching the
    database, exit 2 naming the option): `coremem demo --org` has no such check, so "" fails late (here with a
    traceback) and a 201-character name creates an organisation the API could never name, with a whole demo."""
    _demo_admin_taken(database_url, settings)
    problems = []
    for name in ("", "D" * 201):
        done = _cli(_plain(database_url), settings.secret, "demo", "--org", name, cwd=tmp_path, timeout=300)
        if done.returncode != 2 or "--org" not in done.stderr or "Traceback" in done.stderr:
            problems.append(f"demo --org {name[:12]!r}… ({len(name)} characters): exit {done.returncode}, traceback="
                            f"{'Traceback' in done.stderr}, last line {done.stderr.strip().splitlines()[-1:]}")
    names = [r[0] for r in db.execute("SELECT name FROM orgs").fetchall()]
    if "" in names or "D" * 201 in names:
        problems.append("an organisation with a name the API refuses was created")
    assert not problems, "PLT-19: coremem demo --org:\n" + "\n".join(problems)


def test_plt_19_demo_says_in_one_line_that_its_administrator_address_is_taken(org, database_url, settings, db,
                                                                               tmp_path):
    """PLT-19: the administrator address `demo` derives (`admin@<slug>.local`; "日本" has no ASCII slug, so
    admin@demo.local) may belong to another organisation's administrator: bootstrap's 409 (backend ApiError)
    escapes `coremem demo` as a traceback, since only the client's ApiError is caught."""
    _demo_admin_taken(database_url, settings)
    before = db.execute("SELECT count(*) FROM orgs").fetchone()[0]
    done = _cli(_plain(database_url), settings.secret, "demo", "--org", "日本", cwd=tmp_path, timeout=300)
    assert "Traceback" not in done.stderr and (done.returncode == 0 or done.stderr.strip()), \
        (f"PLT-19: demo --org '日本': exit {done.returncode}, traceback={'Traceback' in done.stderr}, "
         f"last line {done.stderr.strip().splitlines()[-1:]}")
    if done.returncode != 0:
        assert db.execute("SELECT count(*) FROM orgs").fetchone()[0] == before


def test_plt_19_serve_refuses_a_port_out_of_range(database_url, settings, tmp_path):
    """PLT-19: `serve --port 70000` is taken as any int; uvicorn's bind then fails and the process neither serves
    nor exits. The option should be a port (0–65535), refused by click with exit 2 naming --port."""
    env = {**os.environ, "CORE_DATABASE_URL": _plain(database_url), "CORE_SECRET": settings.secret,
           "CORE_DATA_DIR": DATA_DIR, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "backend.cli", "serve", "--port", "70000"], env=env,
                            cwd=str(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    import time

    import httpx

    wrapped = None  # 70000 - 65536: where the API really listens if the port is taken modulo 2**16
    deadline = time.monotonic() + 45
    while proc.poll() is None and time.monotonic() < deadline and wrapped is None:
        try:
            wrapped = httpx.get("http://127.0.0.1:4464/health", timeout=1).status_code
        except httpx.HTTPError:
            time.sleep(0.5)
    hung = proc.poll() is None
    if hung:
        proc.kill()
    _, err = proc.communicate()
    assert not hung and proc.returncode == 2 and "--port" in err and "Traceback" not in err, \
        (f"PLT-19: serve --port 70000: {'still running' if hung else f'exit {proc.returncode}'}, "
         f"GET :4464/health answered {wrapped}, traceback={'Traceback' in err}, "
         f"last lines {err.strip().splitlines()[-2:]}")


# ---------------------------------------------------------------- odd data, every format

ODD_TEXTS = [
    "\u2028line separator\u2029paragraph separator",
    "\ufeffstarts with a byte order mark",
    "zero\u200bwidth\u200djoiner, \u202eright-to-left override\u202c, \u200fRLM",
    "e\u0301 combining; \ufb01 ligature; \U0001d518\U0001d52b\U0001d526; \U0001f469\u200d\U0001f469\u200d\U0001f467",
    "\t tab at both ends \t",
    '"',
    '""',
    "\\N",
    "a\rb (a lone carriage return)",
    "NULL",
    "NaN",
    "=1+1",
    "\x0b\x0c vertical tab and form feed",
    "\U0010ffff last code point, \ue000 private use",
    ("long " + 'with "quotes", commas,\nnewlines\r\n and ünïcödé ' * 200)[:7990] + "\"\n,",
]


def _db_rows(db: Any, ids: list[str]) -> dict[str, dict[str, Any]]:
    rows = db.execute("SELECT id, text, metadata, labels, tags, subject FROM memory_records WHERE id = ANY(%s)",
                      (ids,)).fetchall()
    return {r[0]: {"text": r[1], "metadata": r[2], "labels": r[3], "tags": r[4], "subject": r[5]} for r in rows}


def test_exp_3_odd_unicode_long_texts_and_wide_json_read_back_in_every_format(mem, client, db, database_url,
                                                                                 settings, tmp_path):
    written = []
    for i, text in enumerate(ODD_TEXTS):
        response = client.post("/memory", json={"index_id": mem.index_id, "type": "fact", "text": text},
                               headers=mem.anna() if i % 2 else mem.nobody)
        if response.status_code == 201:
            written.append(response.json()["id"])
        else:
            assert response.status_code in (400, 422), (text, response.text)
    assert len(written) >= len(ODD_TEXTS) - 3, "most odd texts are accepted"
    wide = mem.write(mem.bob(), "wide json", metadata={**{f"k{i}": f"v{i}" for i in range(400)},
                                                        "ключ": "значение", "🔑": ["a", {"b": None}]},
                     labels={**{f"l{i}": ["x", "y"] for i in range(30)}, "département": "ventes"},
                     tags=["ÄÖÜ", "日本語", "emoji🎉"])
    written.append(wide["id"])
    stored = _db_rows(db, written)
    reference = None
    for fmt in ("parquet", "csv", "ndjson"):
        response = client.get("/memory/export", params={"format": fmt, "index_id": mem.index_id}, headers=mem.admin)
        assert response.status_code == 200, response.text
        frame = read(response.content, fmt)
        assert frame.schema == pl.Schema(RECORD_SCHEMA), fmt
        assert sorted(frame["id"].to_list()) == sorted(written), fmt
        for row in frame.iter_rows(named=True):
            want = stored[row["id"]]
            assert row["text"] == want["text"], (fmt, row["text"][:80], want["text"][:80])
            assert json.loads(row["metadata"]) == want["metadata"], fmt
            assert json.loads(row["labels"]) == want["labels"], fmt
            assert row["tags"] == want["tags"], fmt
            assert row["subject"] == want["subject"], fmt
        if reference is None:
            reference = frame
        assert frame.equals(reference), fmt
        out = tmp_path / f"cli.{fmt}"
        done = _cli(_plain(database_url), settings.secret, "export", "records", "--index", mem.index_id, "--format",
                    fmt, "--out", str(out))
        assert done.returncode == 0, done.stderr
        assert read(out.read_bytes(), fmt).equals(reference), fmt


def test_exp_1_thread_items_with_empty_and_odd_text_read_back(org, client, db, database_url, settings, tmp_path):
    """EXP-3: a thread item's text is kept as written; an empty text must not come back as null."""
    texts = ["", " ", '""', *ODD_TEXTS[:5]]
    accepted = []
    headers = bearer(org.key, "zoe")
    for text in texts:
        response = client.post("/threads", json={"items": [msg("user", text)]}, headers=headers)
        if response.status_code == 201:
            accepted.append(response.json()["id"])
    thread = new_thread(client, headers, items=[msg("user", t) for t in texts[1:]])
    accepted.append(thread["id"])
    stored = {r[0]: r[1] for r in db.execute("SELECT id, text FROM thread_items WHERE thread_id = ANY(%s)",
                                             (accepted,)).fetchall()}
    for fmt in ("csv", "ndjson", "parquet"):
        out = tmp_path / f"items.{fmt}"
        done = _cli(_plain(database_url), settings.secret, "export", "thread-items", "--org", org.org_id,
                    "--subject", "zoe", "--format", fmt, "--out", str(out))
        assert done.returncode == 0, done.stderr
        frame = read(out.read_bytes(), fmt, ITEM_SCHEMA)
        got = dict(zip(frame["id"].to_list(), frame["text"].to_list(), strict=True))
        assert set(got) == set(stored), fmt
        wrong = {k: (got[k], v) for k, v in stored.items() if got[k] != v}
        assert not wrong, f"EXP-3 ({fmt}): item texts changed on the way out (got, stored): {wrong}"


# ---------------------------------------------------------------- counts and a person's export


def test_exp_2_counts_match_memory_stats_for_administrators_keys_and_a_person(mem, client, db):
    anna_fact = mem.write(mem.anna(), "Anna likes tea")
    mem.write(mem.anna(), "Anna promised a call", type="commitment")
    mem.write(mem.bob(), "Bob likes coffee")
    mem.write(mem.nobody, "Office opens at nine", type="note")
    gone = mem.write(mem.anna(), "Anna's old address")
    db.execute("UPDATE memory_records SET expires_at = now() - interval '1 day' WHERE id = %s", (gone["id"],))
    cases: list[tuple[dict[str, str], dict[str, Any]]] = [
        (mem.admin, {}), (mem.admin, {"subject": "anna"}), (mem.admin, {"shared": "true"}),
        (mem.admin, {"include_expired": "true"}), (mem.admin, {"type": "fact"}),
        (bearer(mem.org.key), {}), (bearer(mem.org.key, "anna"), {}), (bearer(mem.org.key, "bob"), {}),
        (bearer(mem.org.key, "anna"), {"include_expired": "true"}),
    ]
    for headers, params in cases:
        query = {"index_id": mem.index_id, **params}
        stats = client.get("/memory/stats", params=query, headers=headers)
        assert stats.status_code == 200, stats.text
        for fmt in ("ndjson", "csv", "parquet"):
            response = client.get("/memory/export", params={**query, "format": fmt}, headers=headers)
            assert response.status_code == 200, response.text
            frame = read(response.content, fmt)
            assert frame.height == stats.json()["records"], (params, fmt, frame.height, stats.json())
    anna = read(client.get("/memory/export", params={"index_id": mem.index_id, "format": "csv"},
                           headers=bearer(mem.org.key, "anna")).content, "csv")
    assert set(anna["subject"].drop_nulls().to_list()) == {"anna"} and anna_fact["id"] in anna["id"].to_list()
