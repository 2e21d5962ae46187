"""DSH-2: the overview shows every store's extraction state with its fix and, over the last 30 days, the extraction
windows by the state they ended in (counted by the API)."""

from __future__ import annotations

import polars as pl

from tests.dashboard.conftest import log_in, no_exception
from tests.dashboard.extraction_seed import expected, seed_windows
from tests.extraction.util import conversation, new_store, switch_on


def test_dsh_2_each_store_shows_its_extraction_state_and_the_windows_per_day(app, org, db, scripted):
    people = new_store(org, "people")
    switch_on(org, people)
    seed_windows(db, org.org_id, people, 500, conversation(org, "anna", ("user", "Hello.")))
    paused = new_store(org, "paused")
    switch_on(org, paused, enabled=False)
    new_store(org, "fresh")
    at = log_in(app, org.admin_email, org.admin_password)
    no_exception(at)
    badges = [m.value for m in at.markdown if "-badge[:material/circle:" in m.value]
    assert badges == [":green-badge[:material/circle: active]", ":gray-badge[:material/circle: off]",
                      ":gray-badge[:material/circle: not set up]"]
    fixes = [c.value for c in at.caption]
    assert any(f.startswith("Switched off: tick *Enabled*") for f in fixes)
    assert any(f.startswith("Extraction was never switched on for this store") for f in fixes)
    want = expected(500)["states"]
    charts = [c for c in at.get("vega_lite_chart")
              if {"ready", "failed"} & set(pl.read_ipc_stream(c.proto.datasets[0].data.data)["name"])]
    assert len(charts) == 1
    counted = pl.read_ipc_stream(charts[0].proto.datasets[0].data.data).group_by("name").agg(pl.col("count").sum())
    assert dict(counted.iter_rows()) == {"ready": want["ready"], "failed": want["failed"]}
    at.button(key=f"overview_extraction_{paused}").click().run()
    no_exception(at)
    assert [t.value for t in at.title] == ["Extraction health"]
    assert at.selectbox(key="extraction_store").value == paused


def test_dsh_2_no_store_with_extraction_offers_to_set_it_up(app, org):
    new_store(org, "people")
    at = log_in(app, org.admin_email, org.admin_password)
    no_exception(at)
    assert any(i.value.startswith("No store has extraction set up") for i in at.info)
    at.button(key="overview_go_extraction").click().run()
    no_exception(at)
    assert [t.value for t in at.title] == ["Extraction health"]
    assert any("not set up" in i.value for i in at.info)
