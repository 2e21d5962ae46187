"""TRN-5 through shared.client against the running API, and the routes in the OpenAPI document (PLT-16)."""

from __future__ import annotations

import pytest

from shared.client import ApiError, CoreClient
from shared.schemas.agents import AgentCreate, AgentOut, AgentPatch, AgentVersionOut
from shared.schemas.compaction import CompactionSettings
from tests.helpers import Org


def test_trn_5_the_typed_client_manages_agents_and_reads_versions(live_api: str, org: Org) -> None:
    with CoreClient(live_api, org.admin_token) as client:
        created = client.create_agent(AgentCreate(name="helpdesk", model="chat-small", instructions="Be brief.",
                                                  compaction=CompactionSettings(mode="window")))
        assert isinstance(created, AgentOut) and created.version == 1
        assert created.compaction == CompactionSettings(mode="window")
        changed = client.update_agent(created.id, AgentPatch(instructions="Be kind.", compaction=None))
        assert (changed.version, changed.instructions, changed.compaction) == (2, "Be kind.", None)
        assert client.agent(created.id) == changed
        assert [a.id for a in client.all_agents(page_size=1)] == [created.id]
        versions = client.agent_versions(created.id, limit=1)
        assert [v.version for v in versions.data] == [2] and versions.next_cursor
        older = client.agent_versions(created.id, cursor=versions.next_cursor)
        assert [v.version for v in older.data] == [1] and older.next_cursor is None
        first = client.agent_version(created.id, 1)
        assert isinstance(first, AgentVersionOut) and first.instructions == "Be brief."
        with pytest.raises(ApiError) as refused:
            client.create_agent({"name": "x", "model": "m", "instructions": "", "compaction": {"keep_recent": 2}})
        assert (refused.value.status, refused.value.param) == (422, "compaction.keep_recent")
        client.delete_agent(created.id)
        with pytest.raises(ApiError) as gone:
            client.agent(created.id)
        assert (gone.value.status, gone.value.code) == (404, "agent_not_found")


def test_plt_16_agent_routes_are_described(client) -> None:
    paths = client.get("/schema/openapi.json").json()["paths"]
    expected = {"/agents": {"get", "post"}, "/agents/{agent_id}": {"get", "patch", "delete"},
                "/agents/{agent_id}/versions": {"get"}, "/agents/{agent_id}/versions/{version}": {"get"}}
    for path, methods in expected.items():
        assert set(paths[path]) == methods, path
