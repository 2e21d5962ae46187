"""EXP-1: with one organisation in the database, `coremem export` needs no `--org` at all."""

from __future__ import annotations

import polars as pl

from tests.export.test_export import _cli
from tests.helpers import bearer


def test_exp_1_the_only_organisation_needs_no_org_option(org, client, database_url, settings, tmp_path):
    index = client.post("/indexes", json={"name": "notes"}, headers=org.admin).json()["id"]
    written = client.post("/memory", json={"index_id": index, "type": "fact", "text": "Likes tea"},
                          headers=bearer(org.key, "anna"))
    assert written.status_code == 201, written.text
    out = tmp_path / "all.csv"
    done = _cli(database_url, settings.secret, "records", "--format", "csv", "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert pl.read_csv(out)["id"].to_list() == [written.json()["id"]]
