"""TRN-5 as turns use it: `resolve` (the agent version a turn runs), the agent's block replacing the key's (INJ-2)
in turns and in the previewer (INJ-12, DSH-6), and the agent's compaction replacing the key's (TRN-6)."""

from __future__ import annotations

import pytest

from backend.domains.agents.service import AgentVersion, choose_compaction, resolve
from backend.domains.injection import service as injection
from backend.domains.injection.config import choose_block
from backend.domains.threads.state import validate_against_schema
from backend.errors import NotFound, ValidationFailed
from shared.schemas.compaction import CompactionSettings
from shared.schemas.platform import InjectionBlock
from tests.agents.conftest import make_agent, make_index
from tests.helpers import as_request, assert_error
from tests.injection.test_block import WORKED_BLOCK
from tests.injection.test_builder import _worked_store


def _resolve(database_url, settings, credential, agent_id, version=None, subject=None, **options):
    async def work(ctx) -> AgentVersion:
        return await resolve(ctx, agent_id, version, **options)

    return as_request(database_url, settings, credential, subject, work)


def _refusal(database_url, settings, credential, agent_id, version=None, **options) -> NotFound:
    with pytest.raises(NotFound) as raised:
        _resolve(database_url, settings, credential, agent_id, version, **options)
    return raised.value


def test_trn_5_resolve_gives_the_current_or_the_named_version(org, client, settings, database_url):
    index_id = make_index(client, org)
    schema = {"type": "object", "properties": {"step": {"type": "integer"}}}
    agent = make_agent(client, org.admin, memory_injection={"index_id": index_id, "limit": 4},
                       working_state_schema=schema, compaction={"mode": "window"})
    client.patch(f"/agents/{agent['id']}", headers=org.admin,
                 json={"instructions": "Version two.", "model": "chat-large"})
    current = _resolve(database_url, settings, org.key, agent["id"])
    assert (current.id, current.version, current.name, current.model, current.instructions) == \
        (agent["id"], 2, "helpdesk", "chat-large", "Version two.")
    assert current.memory_injection == InjectionBlock(index_id=index_id, limit=4)
    assert current.compaction == CompactionSettings(mode="window")
    assert current.working_state_schema == schema and current.deleted is False
    first = _resolve(database_url, settings, org.key, agent["id"], 1)
    assert (first.version, first.instructions, first.model) == (1, "Answer briefly.", "chat-small")
    assert first.created_at < current.created_at
    # A subject token's turn names agents too.
    token = org.subject_token(org.key, "anna")
    assert _resolve(database_url, settings, token, agent["id"]).version == 2
    missing = _refusal(database_url, settings, org.key, agent["id"], 3, param="agent_version")
    assert (missing.status, missing.code, missing.param) == (404, "agent_version_not_found", "agent_version")
    # The schema a turn gets is the one the threads domain applies to working-state writes (THR-11).
    validate_against_schema({"step": 3}, current.working_state_schema)
    with pytest.raises(ValidationFailed) as bad:
        validate_against_schema({"step": "three"}, current.working_state_schema)
    assert bad.value.param == "state.step"


def test_trn_5_resolve_refuses_other_organisations_and_deleted_agents(org, other_org, client, settings,
                                                                     database_url):
    agent = make_agent(client, org.admin)
    theirs = _refusal(database_url, settings, other_org.key, agent["id"])
    assert (theirs.status, theirs.code, theirs.param) == (404, "agent_not_found", "agent_id")
    assert _refusal(database_url, settings, org.key, "agt_unknown").code == "agent_not_found"
    assert client.delete(f"/agents/{agent['id']}", headers=org.admin).status_code == 204
    assert _refusal(database_url, settings, org.key, agent["id"]).code == "agent_not_found"
    assert _refusal(database_url, settings, org.key, agent["id"], 1).code == "agent_not_found"
    assert _refusal(database_url, settings, org.key, agent["id"], 7).code == "agent_not_found"
    # What an old response names can still be described (a trace reader asks for it on purpose).
    kept = _resolve(database_url, settings, org.key, agent["id"], 1, include_deleted=True)
    assert kept.deleted is True and kept.instructions == "Answer briefly."


def test_inj_2_an_agent_block_replaces_the_key_block_whole_in_a_turn(org, client, db, settings, database_url):
    index_id, _ = _worked_store(client, org, db)
    facts = org.make_key(["knowledge", "memory"], memory={"injection": {"index_id": index_id, "types": ["fact"]}})
    whole = make_agent(client, org.admin, name="whole", memory_injection={"index_id": index_id})
    silent = make_agent(client, org.admin, name="silent", memory_injection={"index_id": index_id, "enabled": False})
    off = make_agent(client, org.admin, name="off", memory_injection={"enabled": False})  # no store to name
    plain = make_agent(client, org.admin, name="plain")

    def turn(agent_id: str | None) -> tuple[str, str | None]:
        async def work(ctx):
            agent = await resolve(ctx, agent_id) if agent_id else None
            built = await injection.for_turn(ctx, agent_block=agent.memory_injection if agent else None,
                                             turn_input=None)
            return built.text, built.reason

        return as_request(database_url, settings, facts["secret"], "anna", work)

    key_only, _ = turn(None)
    assert "[about_this_person]" in key_only and "[commitments]" not in key_only  # the key's types: facts only
    assert turn(whole["id"]) == (WORKED_BLOCK, None)  # nothing of the key's block is merged in
    assert turn(silent["id"]) == ("", "disabled")
    assert turn(off["id"]) == ("", "disabled")
    assert turn(plain["id"])[0] == key_only  # an agent without a block uses the key's


def test_inj_12_the_previewer_with_agent_id_shows_what_the_agents_turn_gets(org, client, db, settings, database_url):
    index_id, _ = _worked_store(client, org, db)
    facts = org.make_key(["knowledge", "memory"], memory={"injection": {"index_id": index_id, "types": ["fact"]}})
    whole = make_agent(client, org.admin, name="whole", memory_injection={"index_id": index_id})
    silent = make_agent(client, org.admin, name="silent", memory_injection={"index_id": index_id, "enabled": False})
    plain = make_agent(client, org.admin, name="plain")

    def preview(**body):
        response = client.post(f"/memory/stores/{index_id}/injection/preview", headers=org.admin,
                               json={"subject": {"id": "anna"}, **body})
        assert response.status_code == 200, response.text
        return response.json()

    shown = preview(key_id=facts["id"], agent_id=whole["id"])
    assert shown["block"] == WORKED_BLOCK and shown["store_override"] is False and shown["note"] is None

    async def agent_turn(ctx):
        agent = await resolve(ctx, whole["id"])
        return (await injection.for_turn(ctx, agent_block=agent.memory_injection, turn_input=None)).text

    assert as_request(database_url, settings, facts["secret"], "anna", agent_turn) == shown["block"]
    off = preview(key_id=facts["id"], agent_id=silent["id"])
    assert off["block"] == "" and off["trace"]["reason"] == "disabled" and "agent" in off["note"]
    assert preview(key_id=facts["id"], agent_id=plain["id"])["block"] == preview(key_id=facts["id"])["block"]
    # An administrator naming no key previews the agent's block under the default policy: a turn to mirror.
    no_key = preview(agent_id=whole["id"])
    assert no_key["block"] == WORKED_BLOCK and no_key["store_override"] is False
    events = client.get(f"/audit?action=injection.preview&object_id={index_id}", headers=org.admin).json()["data"]
    assert events[0]["detail"]["agent_id"] == whole["id"] and events[0]["detail"]["agent_version"] == 1
    unknown = client.post(f"/memory/stores/{index_id}/injection/preview", headers=org.admin,
                          json={"subject": None, "agent_id": "agt_unknown"})
    assert_error(unknown, 404, "agent_not_found", "agent_id")


def test_inj_12_an_agent_block_naming_another_store_is_previewed_from_that_store(org, client, db):
    index_id, _ = _worked_store(client, org, db)
    other = make_index(client, org, "other")
    stamps = client.post("/memory", headers=org.full | {"X-Core-Subject": '{"id": "anna"}'},
                         json={"index_id": other, "type": "fact", "text": "Collects stamps"}).json()["id"]
    agent = make_agent(client, org.admin, memory_injection={"index_id": other})
    shown = client.post(f"/memory/stores/{index_id}/injection/preview", headers=org.admin,
                        json={"subject": {"id": "anna"}, "agent_id": agent["id"]}).json()
    assert shown["trace"]["index_id"] == other and shown["trace"]["injected_ids"] == [stamps]
    assert shown["note"] == f"This agent injects from the store {other}, not from {index_id}; shown is what its " \
                            "turns get."
    here = client.post(f"/memory/stores/{index_id}/injection/preview", headers=org.admin,
                       json={"subject": {"id": "anna"}, "agent_id": agent["id"], "store_override": True}).json()
    assert here["trace"]["index_id"] == index_id and here["block"] == WORKED_BLOCK


def test_trn_6_an_agents_compaction_replaces_the_keys(org, client, settings, database_url):
    key = org.make_key(["threads", "compaction"], memory={"compaction": {"mode": "window", "keep_recent_turns": 9}})
    bare = org.make_key(["threads", "compaction"])
    without = org.make_key(["threads"], memory={"compaction": {"mode": "window"}})
    tiered = make_agent(client, org.admin, compaction={"mode": "tiered"})
    plain = make_agent(client, org.admin, name="plain")

    def chosen(secret: str, agent_id: str | None) -> CompactionSettings | None:
        async def work(ctx):
            agent = await resolve(ctx, agent_id) if agent_id else None
            return choose_compaction(ctx.principal, agent)

        return as_request(database_url, settings, secret, None, work)

    assert chosen(key["secret"], tiered["id"]) == CompactionSettings(mode="tiered")  # whole, nothing merged
    assert chosen(key["secret"], plain["id"]) == CompactionSettings(mode="window", keep_recent_turns=9)
    assert chosen(key["secret"], None) == CompactionSettings(mode="window", keep_recent_turns=9)
    assert chosen(bare["secret"], None) == CompactionSettings()
    assert chosen(without["secret"], tiered["id"]) is None  # the key lacks `compaction`


def test_inj_2_choose_block_takes_the_resolved_block_as_it_is(org, client, settings, database_url):
    index_id = make_index(client, org)
    agent = make_agent(client, org.admin, memory_injection={"index_id": index_id, "types": ["fact"]})

    async def work(ctx):
        resolved = await resolve(ctx, agent["id"])
        return choose_block(ctx.principal, ctx.scope, resolved.memory_injection)

    chosen = as_request(database_url, settings, org.key, None, work)
    assert chosen.reason is None and chosen.block == InjectionBlock(index_id=index_id, types=["fact"])
