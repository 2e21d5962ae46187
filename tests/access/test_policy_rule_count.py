"""PLT-4/PLT-8: a policy given through the API holds at most 1,000 rules (`policy.MAX_RULES`), wherever it is given:
a key's policy by an administrator or a management key (POST and PATCH /tenants/{org}/keys, PUT /key/policy) and
the organisation's. Every request evaluates its key's rules, and checking what a management key may grant compares
rule with rule: a policy of 8,000 rules built to overlap took 45 s there, on the event loop. The 1,000th rule is
fine; the 1,001st is 422 `invalid_policy` at it, naming the limit."""

from __future__ import annotations

from typing import Any

from backend.access.policy import MAX_RULES, default_policy
from tests.helpers import Org, assert_error, bearer


def _policy(rules: int) -> dict[str, Any]:
    policy = default_policy()
    extra = rules - len(policy["rules"])
    policy["rules"] += [{"id": f"hr{i}", "effect": "deny", "kind": "memory_record",
                         "match": {"labels": {"department": f"team {i}"}}} for i in range(extra)]
    return policy


def _refused(response: Any) -> None:
    body = assert_error(response, 422, "invalid_policy", f"policy.rules[{MAX_RULES}]")
    assert "at most 1,000 rules" in body["message"] and "holds 1,001" in body["message"], body


def test_plt_4_a_policy_of_more_than_1000_rules_is_refused_wherever_it_is_given(org: Org, client: Any) -> None:
    keys = f"/tenants/{org.org_id}/keys"
    _refused(client.post(keys, headers=org.admin, json={"name": "big", "capabilities": ["knowledge"],
                                                        "policy": _policy(MAX_RULES + 1)}))
    created = client.post(keys, headers=org.admin, json={"name": "full", "capabilities": ["knowledge", "management"],
                                                         "policy": _policy(MAX_RULES)})
    assert created.status_code == 201, created.text
    manager = bearer(created.json()["secret"])
    _refused(client.patch(f"{keys}/{created.json()['id']}", headers=org.admin, json={"policy": _policy(1001)}))
    _refused(client.put("/key/policy", headers=manager, json=_policy(MAX_RULES + 1)))
    assert client.put("/key/policy", headers=manager, json=_policy(MAX_RULES)).status_code == 200
    _refused(client.patch(f"/tenants/{org.org_id}", headers=org.admin, json={"policy": _policy(MAX_RULES + 1)}))
    assert client.get("/key", headers=manager).json()["policy"] == _policy(MAX_RULES)
