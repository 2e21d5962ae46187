"""Foundation behaviour found broken while building threads, pinned here."""

from tests.helpers import assert_error


def test_plt_15_audit_refuses_a_query_instant_without_offset(client, org):
    assert_error(client.get("/audit?from=2026-01-01T00:00:00", headers=org.admin), 422, param="from")
    assert client.get("/audit?from=2026-01-01T00:00:00Z", headers=org.admin).status_code == 200


def test_plt_14_nested_unknown_field_names_its_path(client, org):
    body = assert_error(client.post("/indexes", json={"name": "x", "embedding": {"provider": "hashing", "model": "m",
                                                                                 "dimensions": 3, "extra": 1}},
                                    headers=org.full), 422)
    assert body["param"] == "embedding.extra"


def test_plt_16_openapi_document_renders(client):
    assert client.get("/schema/openapi.json").status_code == 200
