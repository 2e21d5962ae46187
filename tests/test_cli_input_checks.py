"""PLT-3/PLT-19: the command line checks its options by the API's rules and says which option is wrong, with no
traceback and nothing written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

from tests.helpers import Org


def _cli(database_url: str, secret: str, *args: str) -> subprocess.CompletedProcess[str]:
    from sqlalchemy.engine import make_url

    plain = make_url(database_url).set(drivername="postgresql").render_as_string(hide_password=False)
    env = {**os.environ, "CORE_DATABASE_URL": plain, "CORE_SECRET": secret}
    return subprocess.run([sys.executable, "-m", "backend.cli", *args], env=env, capture_output=True, text=True,
                          timeout=120)


def _refused(done: subprocess.CompletedProcess[str], option: str) -> str:
    assert done.returncode != 0 and done.stdout == "", done.stdout
    assert f"Invalid value for {option}" in done.stderr or f"Invalid value for '{option}'" in done.stderr, \
        done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    return done.stderr


def test_plt_3_bootstrap_takes_only_a_name_and_address_the_api_accepts(
        org: Org, client: Any, database_url: str, settings: Any, db: Any) -> None:
    def counts() -> Any:
        return db.execute("SELECT (SELECT count(*) FROM orgs), (SELECT count(*) FROM admins)").fetchone()

    before = counts()
    _refused(_cli(database_url, settings.secret, "bootstrap", "--org", "", "--admin", "boss@initech.test"), "--org")
    _refused(_cli(database_url, settings.secret, "bootstrap", "--org", "A" * 201, "--admin", "boss@initech.test"),
             "--org")
    # Login takes an address of 3 to 320 characters: "x" could never log in.
    _refused(_cli(database_url, settings.secret, "bootstrap", "--org", "Initech", "--admin", "x"), "--admin")
    _refused(_cli(database_url, settings.secret, "bootstrap", "--org", "Initech", "--admin", ""), "--admin")
    assert counts() == before
    # The API's bounds themselves are accepted, and she logs in.
    made = _cli(database_url, settings.secret, "bootstrap", "--org", "I" * 200, "--admin", "b@c")
    assert made.returncode == 0, made.stderr
    login = {"email": "b@c", "password": json.loads(made.stdout)["admin_password"]}
    assert client.post("/admin/login", json=login).status_code == 200


def test_plt_19_commands_refuse_an_organisation_or_index_that_does_not_exist(
        org: Org, database_url: str, settings: Any) -> None:
    verify = _cli(database_url, settings.secret, "audit", "verify", "--org", "org_nonexistent")
    assert verify.returncode == 1
    assert "org_nonexistent" in _refused(verify, "--org") and "intact" not in verify.stdout
    assert "intact" in _cli(database_url, settings.secret, "audit", "verify", "--org", org.org_id).stdout
    reembed = _cli(database_url, settings.secret, "memory", "reembed", "--org", "org_nonexistent")
    assert reembed.returncode == 1 and "org_nonexistent" in _refused(reembed, "--org")
    reembed = _cli(database_url, settings.secret, "memory", "reembed", "--index", "idx_nonexistent")
    assert reembed.returncode == 1 and "idx_nonexistent" in _refused(reembed, "--index")


def test_exp_1_export_refuses_an_output_directory_that_does_not_exist(
        org: Org, client: Any, database_url: str, settings: Any, tmp_path: Any, db: Any) -> None:
    index = client.post("/indexes", headers=org.full, json={"name": "notes"}).json()["id"]
    missing = tmp_path / "no-such-dir" / "o.parquet"
    done = _cli(database_url, settings.secret, "export", "records", "--out", str(missing), "--index", index)
    message = _refused(done, "--out")
    assert done.returncode == 2 and str(missing.parent) in message and "does not exist" in message
    assert not missing.parent.exists()
    # Nothing was exported, so nothing is audited as exported.
    assert db.execute("SELECT count(*) FROM audit_events WHERE action = 'memory.export'").fetchone()[0] == 0
    unknown = _cli(database_url, settings.secret, "export", "records", "--out", str(tmp_path / "o.csv"), "--org",
                   "org_nonexistent")
    assert unknown.returncode == 1 and "org_nonexistent" in _refused(unknown, "--org")
