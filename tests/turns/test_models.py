"""EXT-1: the model registry (GET /models, POST/DELETE /admin/models, `coremem models`) and the providers."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from typing import Any

import pytest

from backend.providers.chat import CallOptions, ModelError, ModelSpec, complete
from tests.helpers import Org, assert_error, bearer


def _spec(server: Any, **extra: Any) -> ModelSpec:
    return ModelSpec(id="scripted", provider="openai_compatible", model="scripted-model", base_url=server.url,
                     **extra)


def test_ext_1_models_offered_to_the_organisation_and_withdrawn(client: Any, org: Org, other_org: Org,
                                                                 model_server: Any) -> None:
    body = {"id": "local-llm", "provider": "openai_compatible", "base_url": model_server.url,
            "model": "llama-3.1-8b"}
    created = client.post("/admin/models", json=body, headers=org.admin)
    assert created.status_code == 201, created.text
    assert created.json()["org_id"] == org.org_id and created.json()["model"] == "llama-3.1-8b"
    listed = client.get("/models", headers=org.full).json()["data"]
    assert [m["id"] for m in listed] == ["local-llm"]
    assert listed[0]["label"].startswith("OpenAI-compatible server at ")
    # another organisation is not offered it
    assert client.get("/models", headers=other_org.full).json()["data"] == []
    # an administrator offers to her own organisation only
    assert_error(client.post("/admin/models", json={**body, "org_id": other_org.org_id}, headers=org.admin),
                 403, "other_organisation")
    # a key, even with management, is not an administrator
    assert_error(client.post("/admin/models", json=body, headers=org.full), 403, "admin_required")
    assert client.delete("/admin/models/local-llm", headers=org.admin).status_code == 204
    assert client.get("/models", headers=org.full).json()["data"] == []
    assert_error(client.delete("/admin/models/local-llm", headers=org.admin), 404, "not_found")
    actions = [e["action"] for e in client.get("/audit", headers=org.admin).json()["data"]]
    assert "model.offered" in actions and "model.withdrawn" in actions


def test_ext_1_replay_models_are_labelled_and_name_a_shipped_recording(client: Any, org: Org) -> None:
    created = client.post("/admin/models", json={"id": "demo", "provider": "replay"}, headers=org.admin)
    assert created.status_code == 201, created.text
    assert "replay" in created.json()["label"] and "not a live model" in created.json()["label"]
    refused = client.post("/admin/models", json={"id": "x", "provider": "replay", "model": "nope"}, headers=org.admin)
    assert_error(refused, 422, "validation_failed", param="model")
    assert "demo" in refused.json()["message"]
    no_url = client.post("/admin/models", json={"id": "x", "provider": "openai_compatible"}, headers=org.admin)
    assert_error(no_url, 422, "validation_failed", param="base_url")
    bad_id = client.post("/admin/models", json={"id": "has space", "provider": "replay"}, headers=org.admin)
    assert_error(bad_id, 422, "validation_failed", param="id")


def test_ext_1_cli_adds_for_every_organisation_and_an_organisation_entry_wins(
        client: Any, org: Org, other_org: Org, settings: Any, database_url: str, model_server: Any) -> None:
    env = {**os.environ, "CORE_DATABASE_URL": database_url, "CORE_SECRET": settings.secret}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "backend.cli", "models", *args], env=env, capture_output=True,
                              text=True, timeout=60)

    added = cli("add", "shared-llm", "--provider", "openai_compatible", "--base-url", model_server.url)
    assert added.returncode == 0, added.stderr
    for who in (org, other_org):
        assert [m["id"] for m in client.get("/models", headers=who.full).json()["data"]] == ["shared-llm"]
    own = cli("add", "shared-llm", "--provider", "replay", "--model", "demo", "--org", org.org_id)
    assert own.returncode == 0, own.stderr
    assert client.get("/models", headers=org.full).json()["data"][0]["provider"] == "replay"
    assert client.get("/models", headers=other_org.full).json()["data"][0]["provider"] == "openai_compatible"
    bad = cli("add", "x", "--provider", "openai_compatible")
    assert (bad.returncode != 0 and "base_url" in bad.stderr + bad.stdout) or "--base-url" in bad.stderr
    assert cli("remove", "shared-llm").returncode == 0
    assert client.get("/models", headers=other_org.full).json()["data"] == []
    assert cli("remove", "shared-llm").returncode == 1


def test_ext_1_openai_compatible_call_sends_the_model_name_and_reads_usage(model_server: Any) -> None:
    model_server.reset()
    model_server.reply("Hello there", usage=(42, 3))
    os.environ["SCRIPTED_TEST_KEY"] = "sk-test-123"
    answer = asyncio.run(complete(_spec(model_server, api_key_env="SCRIPTED_TEST_KEY"),
                                  [{"role": "user", "content": "hi"}]))
    assert (answer.content, answer.input_tokens, answer.output_tokens) == ("Hello there", 42, 3)
    assert model_server.last["model"] == "scripted-model"
    assert model_server.headers[-1]["authorization"] == "Bearer sk-test-123"


def test_ext_1_retries_honour_retry_after_then_succeed(model_server: Any) -> None:
    model_server.reset()
    model_server.fail(429, headers={"Retry-After": "1"}).reply("after the wait")
    started = time.monotonic()
    answer = asyncio.run(complete(_spec(model_server), [{"role": "user", "content": "hi"}]))
    assert answer.content == "after the wait"
    assert len(model_server.requests) == 2
    assert time.monotonic() - started >= 0.9  # it waited as the server asked


@pytest.mark.parametrize(("script", "code"), [
    (lambda s: s.fail(500).fail(500).fail(500), "model_error"),
    (lambda s: s.fail(429, headers={"Retry-After": "0"}).fail(429, headers={"Retry-After": "0"})
     .fail(429, headers={"Retry-After": "0"}), "rate_limited"),
    (lambda s: s.malformed(), "invalid_model_output"),
    (lambda s: s.stall(3), "model_timeout"),
])
def test_ext_1_failures_become_model_errors(model_server: Any, script: Any, code: str) -> None:
    model_server.reset()
    script(model_server)
    options = CallOptions(timeout_seconds=1.0, max_retries=2 if code != "model_timeout" else 0)
    with pytest.raises(ModelError) as raised:
        asyncio.run(complete(_spec(model_server), [{"role": "user", "content": "hi"}], options=options))
    assert raised.value.code == code


def test_ext_1_unreachable_server_is_model_unavailable() -> None:
    spec = ModelSpec(id="gone", provider="openai_compatible", model="m", base_url="http://127.0.0.1:9/v1")
    with pytest.raises(ModelError) as raised:
        asyncio.run(complete(spec, [{"role": "user", "content": "hi"}], options=CallOptions(max_retries=0)))
    assert raised.value.code == "model_unavailable"


def test_ext_1_replay_answers_from_the_recording() -> None:
    spec = ModelSpec(id="demo", provider="replay", model="demo")
    answer = asyncio.run(complete(spec, [{"role": "user", "content": "Hello!"}]))
    assert answer.content == "Hello! What can I do for you today?"
    fallback = asyncio.run(complete(spec, [{"role": "user", "content": "zzz"}]))
    assert fallback.content is not None and "recording" in fallback.content
    assert answer.input_tokens > 0 and answer.output_tokens > 0


def test_ext_1_models_route_needs_a_credential(client: Any) -> None:
    assert_error(client.get("/models", headers=bearer("ck_nope")), 401, "bad_credential")


def test_plt_18_the_typed_client_reads_models_turns_and_usage(live_api: str, org: Org, scripted: Any) -> None:
    from shared.client import CoreClient
    from shared.schemas.turns import ResponseCreate, UsageQuery

    with CoreClient(live_api, org.admin_token) as admin, CoreClient(live_api, org.key) as key:
        assert [m.id for m in key.models().data] == ["scripted"]
        answer = key.create_response(ResponseCreate(input="Hello", model="scripted", store=False))
        assert answer.status == "completed" and answer.output_text == scripted.DEFAULT
        report = admin.usage(UsageQuery(key_id=org.key_id))
        assert report.totals.calls == 1 and report.data[0].model == "scripted"
        assert admin.usage(UsageQuery(key_id="key_other")).totals.calls == 0
