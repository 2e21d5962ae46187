"""Administration of organisations, indexes and model servers: names that clash, extreme half-lives, and the
operator's credentials, which no administrator or key may send to a server of its choosing."""

from __future__ import annotations

from typing import Any

from backend.access.policy import writer_policy
from tests.helpers import assert_error, bearer, operator_headers


def _age(db: Any, record_id: str, days: float) -> None:
    db.execute("UPDATE memory_records SET updated_at = now() - make_interval(secs => %s) WHERE id = %s",
               (days * 86400, record_id))


def test_plt_14_renaming_an_organisation_to_a_taken_name_is_409_and_changes_nothing(org, other_org, client, db):
    """PATCH /tenants/{org_id} {"name": "Globex"} by Acme's administrator, while another organisation is named
    "Globex", hit the unique constraint `uq_orgs_name`: a 500. Now 409 `name_taken` on `name`, as index names
    answer (PLT-14), and nothing is changed."""
    response = client.patch(f"/tenants/{org.org_id}", headers=org.admin, json={"name": "Globex"})
    assert response.status_code != 500, f"PLT-14: a taken organisation name answered 500: {response.text[:200]}"
    assert_error(response, 409, "name_taken", "name")
    assert db.execute("SELECT name FROM orgs WHERE id = %s", (org.org_id,)).fetchone()[0] == "Acme"


def test_mem_9_a_half_life_of_1e_minus_308_days_decays_to_zero_without_a_500(org, client, db):
    """MEM-9: H is any positive number ("fractions allowed"), and PATCH /tenants/{id}
    {"memory": {"decay": {"fact": {"half_life_days": 1e-308}}}} is accepted (200). Then a month-old `fact` made
    every read that computes the effective confidence fail: `age_days / H` overflowed float8 in PostgreSQL
    ("value out of range: overflow", `memory/expressions.py::halved` divided before `least` capped the exponent), so
    GET /memory, /memory/{id}, /memory/search, /memory/recall and the injection preview answered 500. Now 200 with
    an effective confidence of (about) 0, as a 0.01-day half-life gives."""
    index_id = client.post("/indexes", headers=org.full, json={"name": "store"}).json()["id"]
    accepted = client.patch(f"/tenants/{org.org_id}", headers=org.admin,
                            json={"memory": {"decay": {"fact": {"half_life_days": 1e-308}}}})
    assert accepted.status_code == 200, accepted.text
    key = org.make_key(policy=writer_policy())
    anna = bearer(key["secret"], "anna")
    written = client.post("/memory", headers=anna, json={"index_id": index_id, "type": "fact",
                                                         "text": "Anna keeps bees.", "tags": ["bees"]})
    assert written.status_code == 201, written.text
    record_id = written.json()["id"]
    _age(db, record_id, 30)
    for path, extra in [("/memory", {}), ("/memory/recall", {}), ("/memory/search", {"q": "bees"})]:
        for who, headers in (("anna", anna), ("admin", org.admin)):
            response = client.get(path, params={"index_id": index_id, **extra}, headers=headers)
            assert response.status_code == 200, f"MEM-9/PLT-14: GET {path} ({who}) answered " \
                                                 f"{response.status_code}: {response.text[:200]}"
    one = client.get(f"/memory/{record_id}", headers=anna)
    assert one.status_code == 200, f"GET /memory/{{id}}: {one.text[:200]}"
    assert one.json()["effective_confidence"] < 1e-6
    preview = client.post(f"/memory/stores/{index_id}/injection/preview", headers=org.admin,
                          json={"subject": {"id": "anna"}, "key_id": key["id"], "store_override": True})
    assert preview.status_code == 200, f"INJ-12: the preview answered {preview.status_code}: {preview.text[:200]}"


def test_ext_1_only_an_operator_names_the_variable_holding_a_models_credential(
        org, client, model_server, monkeypatch, database_url, db):
    """EXT-1: an offered model's "base URL and API-key variable [are] configured by the operator". An
    organisation's administrator could POST /admin/models {"id", "provider": "openai_compatible", "base_url": <her
    server>, "api_key_env": <any variable of the API process>}: it was stored (201), and the next turn naming the
    model sent that variable's value as `Authorization: Bearer …` to her server, so she read the deployment's
    secrets, such as the provider key the operator set for another organisation. Now 403 `operator_required` on
    `api_key_env`, nothing stored; an operator's registration naming it is taken."""
    monkeypatch.setenv("OTHER_ORG_PROVIDER_KEY", "sk-globex-operator-secret")
    body = {"id": "mine", "provider": "openai_compatible", "base_url": model_server.url,
            "api_key_env": "OTHER_ORG_PROVIDER_KEY"}
    assert_error(client.post("/admin/models", headers=org.admin, json=body), 403, "operator_required", "api_key_env")
    assert db.execute("SELECT count(*) FROM models WHERE id = 'mine'").fetchone()[0] == 0
    operator = operator_headers(client, database_url)
    offered = client.post("/admin/models", headers=operator, json={**body, "org_id": org.org_id})
    assert offered.status_code == 201, offered.text
    assert offered.json()["api_key_env"] == "OTHER_ORG_PROVIDER_KEY"


def _capture_server():
    """A loopback OpenAI-compatible embeddings server that records each request's Authorization header."""
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            length = int(self.headers.get("content-length") or 0)
            payload = json.loads(self.rfile.read(length) or b"{}")
            seen.append(self.headers.get("authorization", ""))
            texts = payload.get("input") or [""]
            texts = [texts] if isinstance(texts, str) else texts
            dims = int(payload.get("dimensions") or 8)
            body = json.dumps({"object": "list", "model": payload.get("model", "m"),
                               "data": [{"object": "embedding", "index": i, "embedding": [0.5] * dims}
                                        for i in range(len(texts))],
                               "usage": {"prompt_tokens": 1, "total_tokens": 1}}).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, seen


def test_plt_13_the_deployments_openai_key_never_goes_to_an_embedding_server_a_key_chose(org, client, monkeypatch):
    """PLT-13: any key holding `knowledge` (here `knowledge` + `memory`, no `management`, no administrator) creates
    an index {"embedding": {"provider": "openai_compatible", "base_url": <its own server>}}; the embedding calls of
    that index (a search's query, a record's text) then carried the deployment's `OPENAI_API_KEY` as
    `Authorization: Bearer …` to that server (`providers/embeddings.py` fell back to os.environ["OPENAI_API_KEY"]
    for every base URL), so a narrow key read the operator's provider credential. Now the key goes only to the
    server at `OPENAI_BASE_URL` (OpenAI's by default); no request to the key's server carries it."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-operator-openai-secret")
    server, seen = _capture_server()
    try:
        narrow = bearer(org.make_key(["knowledge", "memory"], policy=writer_policy())["secret"])
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        created = client.post("/indexes", headers=narrow, json={"name": "mine", "embedding": {
            "provider": "openai_compatible", "model": "m", "dimensions": 8, "base_url": url}})
        assert created.status_code == 201, created.text
        index_id = created.json()["id"]
        client.post("/memory", headers=narrow, json={"index_id": index_id, "type": "fact", "text": "Bees."})
        client.get("/memory/search", headers=narrow, params={"index_id": index_id, "q": "bees"})
        assert seen, "the index's embedding server was never called (the probe did not exercise it)"
        assert not any("sk-operator-openai-secret" in h for h in seen), \
            f"the deployment's OPENAI_API_KEY reached a server the key chose: {seen}"
    finally:
        server.shutdown()


def test_ext_1_a_model_whose_id_holds_a_slash_can_be_withdrawn(org, client):
    """EXT-1: offered models are removed with DELETE /admin/models/{id}. The id's pattern admits `/`
    (`^[A-Za-z0-9][A-Za-z0-9._:/@-]*$`, as in `meta/llama`), and POST /admin/models {"id": "meta/llama", …} answers
    201, but DELETE /admin/models/meta%2Fllama (and …/meta/llama) answered 404 "There is no such route." (the route
    took one path segment), so the model stayed offered for good. Now 204, and GET /models no longer lists it."""
    body = {"id": "meta/llama", "provider": "openai_compatible", "base_url": "http://127.0.0.1:9/v1"}
    assert client.post("/admin/models", headers=org.admin, json=body).status_code == 201
    response = client.delete("/admin/models/meta%2Fllama", headers=org.admin)
    assert response.status_code == 204, response.text
    assert "meta/llama" not in [m["id"] for m in client.get("/models", headers=org.full).json()["data"]]
