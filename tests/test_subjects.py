"""PLT-7: naming the person a request is for."""

from __future__ import annotations

import json
import time

import jwt
import pytest

from backend.access.credentials import SUBJECT_TOKEN_PREFIX
from tests.conftest import SECRET
from tests.helpers import as_subject, assert_error, bearer


def test_plt_7_two_different_subjects_are_400(org, client):
    token = org.subject_token(org.key, "anna")
    headers = {**bearer(token), **as_subject("bob")}
    assert_error(client.get("/indexes", headers=headers), 400, "conflicting_subjects")
    same = {**bearer(token), **as_subject("anna")}
    assert client.get("/indexes", headers=same).status_code == 200


def test_plt_7_subjects_required_refuses_a_request_naming_nobody(org, client):
    policy = {"indexes": ["*"], "rules": [], "settings": {"subjects_required": True}}
    key = org.make_key(["knowledge"], policy=policy)
    assert_error(client.get("/indexes", headers=bearer(key["secret"])), 400, "subject_required")
    assert client.get("/indexes", headers=bearer(key["secret"], subject="anna")).status_code == 200
    token = org.subject_token(key["secret"], "anna")
    assert client.get("/indexes", headers=bearer(token)).status_code == 200


def test_plt_7_malformed_subject_header_is_400_naming_the_header(org, client):
    for value in ("not json", json.dumps({"id": ""}), json.dumps({"id": "x" * 257}), json.dumps({"id": "a\nb"}),
                  json.dumps({"id": "a", "attributes": {"d": "payroll"}}), json.dumps(["anna"])):
        response = client.get("/indexes", headers={**org.full, "X-Core-Subject": value})
        body = assert_error(response, 400, "invalid_subject")
        assert body["param"].startswith("X-Core-Subject")


def test_plt_7_subject_token_carries_person_and_is_barred_from_management(org, client):
    token = org.subject_token(org.key, "anna", {"department": ["payroll"]})
    assert token.startswith("cst_")
    assert client.get("/indexes", headers=bearer(token)).status_code == 200
    assert_error(client.get(f"/tenants/{org.org_id}/keys", headers=bearer(token)), 403, "subject_token_forbidden")
    assert_error(client.put(f"/tenants/{org.org_id}/vocabulary", json={}, headers=bearer(token)), 403)
    assert_error(client.post("/subject-tokens", json={"subject": {"id": "bob"}}, headers=bearer(token)), 403)
    assert_error(client.post("/indexes", json={"name": "x"}, headers=bearer(token)), 403)


def test_plt_7_subject_token_dies_with_its_key_and_cannot_be_forged(org, client):
    key = org.make_key(["knowledge"])
    token = org.subject_token(key["secret"], "anna")
    client.post(f"/tenants/{org.org_id}/keys/{key['id']}/revoke", headers=org.admin)
    assert_error(client.get("/indexes", headers=bearer(token)), 401, "key_revoked")
    forged = org.subject_token(org.key, "anna")[:-4] + "AAAA"
    assert_error(client.get("/indexes", headers=bearer(forged)), 401, "bad_credential")


@pytest.mark.parametrize("claims", [
    {"sub": 7}, {"sub": ""}, {"sub": "a\x00b"}, {"kid": ["x"]}, {"org": None}, {"attrs": ["team"]},
    {"attrs": {"team": "payroll"}}, {"attrs": {"team": [1]}}, {"attrs": {"team": ["a\x00"]}}])
def test_plt_7_a_signed_token_with_claims_of_the_wrong_shape_is_401_not_500(org, client, claims):
    """A token signed with the server's secret but not minted by it (another tool sharing the secret) with an id
    that is not a string, or attributes that are not lists of strings, was a 500; now 401 `bad_credential`."""
    good = {"iss": "coremem", "org": org.org_id, "kid": org.key_id, "sub": "anna", "attrs": {},
            "exp": int(time.time()) + 600}
    token = SUBJECT_TOKEN_PREFIX + jwt.encode({**good, **claims}, SECRET, algorithm="HS256")
    assert_error(client.get("/indexes", headers=bearer(token)), 401, "bad_credential")
    fine = SUBJECT_TOKEN_PREFIX + jwt.encode(good, SECRET, algorithm="HS256")
    assert client.get("/indexes", headers=bearer(fine)).status_code == 200


def test_plt_7_subject_token_ttl_is_bounded(org, client):
    response = client.post("/subject-tokens", headers=org.full,
                           json={"subject": {"id": "anna"}, "ttl_seconds": 10**9})
    assert_error(response, 422, param="ttl_seconds")


def test_plt_7_a_nul_in_a_subject_attribute_is_400_naming_where_it_is(org, client):
    index_id = client.post("/indexes", headers=org.full, json={"name": "i1"}).json()["id"]
    policy = {"indexes": ["*"], "rules": [
        {"id": "dept", "effect": "permit", "kind": "memory_record", "actions": ["see"],
         "when": [{"atom": "label_among", "label": "department", "attribute": "department"}]}]}
    key = org.make_key(["knowledge", "memory", "threads"], policy=policy)["secret"]
    bad_value = json.dumps({"id": "anna", "attributes": {"department": ["sales", "pay\u0000roll"]}})
    bad_name = json.dumps({"id": "anna", "attributes": {"depart\u0000ment": ["payroll"]}})
    for method, path, body in (("GET", "/memory", None), ("GET", "/threads", None),
                               ("POST", "/memory", {"index_id": index_id, "type": "fact", "text": "x"})):
        for value, param in ((bad_value, "X-Core-Subject.attributes.department[1]"),
                             (bad_name, "X-Core-Subject.attributes")):
            response = client.request(method, path, json=body, headers={**bearer(key), "X-Core-Subject": value})
            refused = assert_error(response, 400, "invalid_subject", param=param)
            assert "NUL" in refused["message"]
    # Minting a token and previewing a block take the subject in the body: refused there too, naming the place.
    attributes = {"department": ["sales", "pay\u0000roll"]}
    for path, headers, body in (
            ("/subject-tokens", bearer(key), {"subject": {"id": "anna", "attributes": attributes}}),
            (f"/memory/stores/{index_id}/injection/preview", org.admin,
             {"subject": {"id": "anna", "attributes": attributes}})):
        refused = assert_error(client.post(path, headers=headers, json=body), 400, "invalid_subject",
                               param="subject.attributes.department[1]")
        assert "NUL" in refused["message"]
    # The same person without the NUL is served as before.
    fine = json.dumps({"id": "anna", "attributes": {"department": ["payroll"]}})
    assert client.get("/memory", headers={**bearer(key), "X-Core-Subject": fine}).status_code == 200


def test_plt_7_a_subject_header_nested_past_the_decoders_depth_is_400(org, client):
    """`X-Core-Subject` holding JSON nested past the decoder's depth (a few kilobytes of `[`) makes
    `subjects.subject_from_header` raise RecursionError, where only `ValueError` was caught: a 500. Now 400
    `invalid_subject` naming the header, as every other malformed `X-Core-Subject` (PLT-7, PLT-14)."""
    key = org.make_key(["knowledge"])
    for nested in ("[" * 3000 + "]" * 3000, '{"id": "anna", "attributes": ' + '{"a": ' * 2000 + "1" + "}" * 2001):
        response = client.get("/indexes", headers={**bearer(key["secret"]), "X-Core-Subject": nested})
        assert_error(response, 400, "invalid_subject", "X-Core-Subject")
