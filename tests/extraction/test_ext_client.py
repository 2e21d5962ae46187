"""EXT-4, EXT-15 through shared.client against the running API: the switch, runs, windows and proposals."""

from __future__ import annotations

from typing import Any

import pytest

from shared.client import ApiError, CoreClient
from shared.schemas.extraction import ExtractionSwitchIn, WindowQuery
from shared.schemas.proposals import ProposalQuery
from tests.extraction.maintenance_util import improvements_on, maintain, store_settings, write
from tests.extraction.util import new_store


def test_ext_4_ext_15_the_typed_client_reads_and_sets_extraction_and_proposals(
        live_api: str, org: Any, scripted: Any, run_jobs: Any, database_url: str) -> None:
    index_id = new_store(org)
    improvements_on(org, helper=False)
    store_settings(org, index_id, promotion={"enabled": True, "labels": {}})
    for person in ("anna", "bob"):
        write(org, index_id, person, "The office closes at six.")
    with CoreClient(live_api, org.admin_token) as client:
        switch = client.set_extraction_switch(index_id, ExtractionSwitchIn(enabled=True, model="scripted",
                                                                             episodes=True))
        assert (switch.state, switch.episodes) == ("active", True)
        assert client.extraction_switch(index_id) == switch
        run = client.run_extraction(index_id)
        assert [r.id for r in client.extraction_runs(index_id).data] == [run.run_id]
        windows = client.extraction_windows(index_id, WindowQuery(bucket="day", buckets=2))
        assert windows.data == [] and len(windows.buckets) == 0
        maintain(database_url, run_jobs)
        found = client.proposals(ProposalQuery(index_id=index_id))
        assert [(p.text, p.people, len(p.evidence)) for p in found.data] == [("The office closes at six.", 2, 2)]
        dismissed = client.dismiss_proposal(found.data[0].id)
        assert dismissed.status == "dismissed"
        with pytest.raises(ApiError) as refused:
            client.apply_proposal(found.data[0].id)
        assert (refused.value.status, refused.value.code) == (409, "proposal_decided")
        assert client.proposals().data == []
        assert [p.status for p in client.proposals(ProposalQuery(status="all")).data] == ["dismissed"]


def test_plt_16_proposal_routes_are_described(client: Any) -> None:
    paths = client.get("/schema/openapi.json").json()["paths"]
    assert set(paths["/memory/proposals"]) == {"get"}
    assert set(paths["/memory/proposals/{proposal_id}/apply"]) == {"post"}
    assert set(paths["/memory/proposals/{proposal_id}/dismiss"]) == {"post"}
