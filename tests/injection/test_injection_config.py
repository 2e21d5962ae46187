"""INJ-1/INJ-2: the key's injection block, an agent's block replacing it whole, and checks where blocks are saved."""

from __future__ import annotations

import asyncio

import pytest

from backend.access.actor import Actor
from backend.access.policy import default_policy
from backend.access.principal import Principal
from backend.access.scope import build_scope
from backend.db.engine import make_engine, make_sessionmaker
from backend.db.tenant import use_org
from backend.domains.injection.config import check_saved_block, choose_block
from backend.errors import ValidationFailed
from tests.helpers import assert_error


def _principal(org_id, capabilities, policy, injection=None):
    key = {"id": "key_x", "org_id": org_id, "policy": policy, "capabilities": capabilities,
           "memory": {"injection": injection}}
    return Principal("key", org_id, Actor("key", "key_x"), frozenset(capabilities), None, key=key)


def _two_indexes(client, org):
    a = client.post("/indexes", headers=org.full, json={"name": "a"}).json()["id"]
    b = client.post("/indexes", headers=org.full, json={"name": "b"}).json()["id"]
    return a, b


def test_inj_1_key_block_is_validated_where_the_key_is_saved(org, client):
    a, _ = _two_indexes(client, org)
    created = org.make_key(["knowledge", "memory"], memory={"injection": {"index_id": a}})
    assert created["memory"]["injection"] == {"index_id": a, "enabled": True, "types": [], "metadata": {},
                                              "min_confidence": None, "limit": 20, "budget_tokens": 1500}
    bad = client.post(f"/tenants/{org.org_id}/keys", headers=org.admin, json={
        "name": "x", "capabilities": ["knowledge", "memory"], "memory": {"injection": {"index_id": "idx_nope"}}})
    assert_error(bad, 422, "index_not_found", "memory.injection.index_id")
    bad = client.post(f"/tenants/{org.org_id}/keys", headers=org.admin, json={
        "name": "x", "capabilities": ["knowledge", "memory"],
        "memory": {"injection": {"index_id": a, "min_confidence": 1.5}}})
    assert_error(bad, 422, param="memory.injection.min_confidence")


def test_inj_2_agent_block_replaces_the_key_block_whole(org, client):
    a, b = _two_indexes(client, org)
    principal = _principal(org.org_id, ["knowledge", "memory"], default_policy(),
                           injection={"index_id": a, "types": ["fact"], "limit": 3})
    scope = build_scope(principal, None)
    assert choose_block(principal, scope).block.index_id == a
    agent = choose_block(principal, scope, {"index_id": b})
    assert agent.block.index_id == b and agent.block.types == [] and agent.block.limit == 20
    disabled = choose_block(principal, scope, {"index_id": b, "enabled": False})
    assert disabled.reason == "disabled"


def test_inj_2_without_memory_nothing_is_injected(org, client):
    a, _ = _two_indexes(client, org)
    principal = _principal(org.org_id, ["knowledge"], default_policy(), injection={"index_id": a})
    assert choose_block(principal, build_scope(principal, None)).reason == "capability_missing"


def test_inj_2_store_not_named_by_the_key_policy_is_silent_at_turn_time(org, client):
    a, b = _two_indexes(client, org)
    policy = default_policy()
    policy["indexes"] = [a]
    principal = _principal(org.org_id, ["knowledge", "memory"], policy)
    chosen = choose_block(principal, build_scope(principal, None), {"index_id": b})
    assert chosen.reason == "index_not_named"


def test_inj_2_saving_an_agent_block_needs_a_store_the_key_policy_names(org, client, database_url):
    a, b = _two_indexes(client, org)
    policy = default_policy()
    policy["indexes"] = [a]
    scope = build_scope(_principal(org.org_id, ["knowledge", "memory"], policy), None)

    async def check(raw):
        engine = make_engine(database_url, pool_size=1)
        try:
            async with make_sessionmaker(engine)() as session:
                await use_org(session, org.org_id)  # row-level security: as the request's context sets it
                return await check_saved_block(session, scope, raw, "memory_injection")
        finally:
            await engine.dispose()

    assert asyncio.run(check({"index_id": a})).index_id == a
    for raw, param in (({"index_id": b}, "memory_injection.index_id"),
                       ({"index_id": "idx_missing"}, "memory_injection.index_id"),
                       ({"index_id": a, "limit": -1}, "memory_injection.limit")):
        with pytest.raises(ValidationFailed) as raised:
            asyncio.run(check(raw))
        assert raised.value.param == param
