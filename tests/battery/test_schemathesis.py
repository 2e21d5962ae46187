"""Issue 17 item 4, PLT-14/PLT-16: schemathesis over `/schema/openapi.json`, every operation, every check.

The API runs under uvicorn; schemathesis (from the package index) reads the published document and sends
generated requests, valid (positive) and invalid (negative), once with a full key and once with a read-only key,
running all of its registered checks on every answer. Pass: no server error and no schema violation.
"""

from __future__ import annotations

import contextlib
import gc
import re
from collections import Counter
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis.checks import CHECKS, load_all_checks
from schemathesis.config import SchemathesisConfig
from schemathesis.core.failures import AcceptedNegativeData
from schemathesis.generation import GenerationMode
from schemathesis.generation.meta import negated_parameters

from tests.battery.conftest import scaled
from tests.helpers import DroppedConnections, bearer, bootstrap_org

# Checks that judge something other than this API's answers: the response time (the suite runs on a shared
# two-core machine), and stateful checks that need links between operations the document does not declare.
SKIPPED_CHECKS = {"max_response_time"}
# PLT-14: rules a JSON Schema cannot state (a cursor the server handed out, a policy's atoms, a NUL character,
# `subject` with `shared`) are refused with 400 or 422; a schema-valid request may get those, never anything else.
RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}")
CONFIG = """
[checks.positive_data_acceptance]
expected-statuses = ["2xx", "3xx", "400", "401", "403", "404", "409", "422", "429"]

# A body over CORE_MAX_BODY_BYTES (a batch past its `maxItems`) is refused before it is read: 413.
[checks.negative_data_rejection]
expected-statuses = ["400", "401", "403", "404", "405", "406", "409", "413", "415", "422", "428", "429", "5xx"]
"""


def _read_only_policy(index_id: str) -> dict[str, Any]:
    return {"indexes": [index_id], "rules": [
        {"id": "see-records", "effect": "permit", "kind": "memory_record", "actions": ["see"]},
        {"id": "see-threads", "effect": "permit", "kind": "thread", "actions": ["see"]}], "settings": {}}


@pytest.fixture(scope="module")
def keys(live_api: str, settings: Any, database_url: str) -> dict[str, str]:
    import httpx

    http = httpx.Client(base_url=live_api, timeout=30)
    org = bootstrap_org(http, settings, database_url, "Fuzz", "admin@fuzz.test")
    index = http.post("/indexes", json={"name": "fuzz"}, headers=org.admin).json()["id"]
    http.post("/memory", json={"index_id": index, "type": "fact", "text": "fuzz seed record"}, headers=org.full)
    read_only = org.make_key(["knowledge", "memory", "threads"], policy=_read_only_policy(index))["secret"]
    return {"full": org.key, "read_only": read_only}


@pytest.fixture(scope="module")
def dropped() -> Any:
    """The connections dropped unreturned while this module's API runs."""
    with DroppedConnections() as handler:
        yield handler


@pytest.fixture(scope="module")
def live_api(settings: Any, database_url: str, dropped: DroppedConnections) -> Any:
    """The API under uvicorn for the whole module (the root fixture of the same name is per test)."""
    import threading
    import time

    import httpx
    import uvicorn

    from backend.app import create_app
    from tests.conftest import _free_port

    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(settings, database_url), host="127.0.0.1", port=port,
                                           log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not server.started:
        time.sleep(0.05)
    assert httpx.get(f"{base}/health").status_code == 200
    yield base
    server.should_exit = True
    thread.join(timeout=10)


def _string_fits(raw: str, schema: dict[str, Any]) -> bool:
    """Whether a query string value is valid for a parameter schema, read as the server reads query strings."""
    alternatives = schema.get("oneOf") or schema.get("anyOf") or [schema]
    for alt in alternatives:
        kind = alt.get("type")
        if kind == "array" and _string_fits(raw, alt.get("items", {})):
            return True
        if kind == "string" and (alt.get("format") != "date-time" or RFC3339.match(raw)) and \
                len(raw) >= alt.get("minLength", 0) and len(raw) <= alt.get("maxLength", len(raw)) and \
                (alt.get("pattern") is None or re.search(alt["pattern"], raw)) and \
                raw in alt.get("enum", [raw]):
            return True
        if kind == "boolean" and raw in ("true", "false"):
            return True
        if kind == "null" and raw == "null":  # the schema's null alternative, which the server reads as absent
            return True
        if kind in ("integer", "number"):
            try:
                number = int(raw) if kind == "integer" else float(raw)
            except ValueError:
                continue
            if alt.get("minimum", number) <= number <= alt.get("maximum", number):
                return True
    return False


def _serialisation_artefact(case: Any, response: Any) -> bool:
    """A negative case whose only invalid parts are query values that, once written into the URL, are valid
    strings after all (`type=false` sends the string "false", a fine type name). Not a finding."""
    mutated = list(negated_parameters(case.meta))
    if not mutated or any(location.value != "query" for _, location in mutated):
        return False
    sent = parse_qs(urlsplit(response.request.url).query, keep_blank_values=True)
    schemas = {p["name"]: p.get("schema", {}) for p in case.operation.definition.raw.get("parameters", [])
               if p.get("in") == "query"}
    return all(name in schemas and all(_string_fits(raw, schemas[name]) for raw in sent.get(name, []))
               for name, _ in mutated)


def _describe(failure: BaseException) -> str:
    inner = getattr(failure, "exceptions", None)
    if inner:
        return " | ".join(f"{type(e).__name__}: {e}" for e in inner) + "\n" + str(failure)
    return f"{type(failure).__name__}: {failure}"


def _run_operation(strategy: Any, examples: int, name: str, base_url: str, headers: dict[str, str],
                   checks: list[Any], tally: Tally) -> None:
    @settings(max_examples=examples, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(case=strategy)
    def run(case: Any) -> None:
        response = case.call(base_url=base_url, headers=headers)
        tally.statuses[response.status_code] += 1
        try:
            case.validate_response(response, checks=checks, headers=headers,
                                   transport_kwargs={"base_url": base_url, "headers": headers})
        except (Exception, BaseExceptionGroup) as failure:  # a check failed: keep the first of each kind, go on
            found = list(getattr(failure, "exceptions", [failure]))
            if all(isinstance(e, AcceptedNegativeData) for e in found) and _serialisation_artefact(case, response):
                tally.artefacts += 1
                return
            text = _describe(failure)
            tally.failures.setdefault(f"{name}: {text.strip().splitlines()[0][:160]}", text[:1500])

    with contextlib.suppress(Unsatisfiable):  # negative mode, but nothing to make invalid (no parameters, no body)
        run()


class Tally:
    def __init__(self) -> None:
        self.statuses: Counter[int] = Counter()
        self.failures: dict[str, str] = {}
        self.artefacts = 0


def _fuzz(live_api: str, secret: str, examples: int, report: Any, dropped: DroppedConnections,
          share: tuple[int, int] = (0, 1)) -> None:
    """Every operation (or every `share[1]`-th, from `share[0]`) in both generation modes."""
    load_all_checks()
    checks = [c for c in CHECKS.get_all() if getattr(c, "__name__", "") not in SKIPPED_CHECKS]
    schema = schemathesis.openapi.from_url(f"{live_api}/schema/openapi.json",
                                           config=SchemathesisConfig.from_str(CONFIG))
    headers = bearer(secret)
    tally = Tally()
    operations = 0
    for n, result in enumerate(schema.get_all_operations()):
        operation = result.ok()
        if n % share[1] != share[0]:
            continue
        if operation.path == "/admin/logout":
            continue  # administrators only; a key's 403 there is pinned by the platform tests
        operations += 1
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            _run_operation(operation.as_strategy(generation_mode=mode), examples,
                           f"{operation.method.upper()} {operation.path} [{mode}]", live_api, headers, checks, tally)
    report(operations=operations, requests=sum(tally.statuses.values()), statuses=dict(sorted(tally.statuses.items())),
           checks=len(checks), server_errors=sum(n for s, n in tally.statuses.items() if s >= 500),
           failures=len(tally.failures), query_serialisation_artefacts=tally.artefacts)
    gc.collect()  # an unreturned connection is reported when its session is collected
    assert dropped.count == 0, f"{dropped.count} requests left their connection checked out"
    assert not tally.failures, "\n".join(tally.failures) + "\n\n" + "\n\n".join(
        f"{k}\n{v}" for k, v in list(tally.failures.items())[:8])
    assert not any(status >= 500 for status in tally.statuses)


def test_plt_16_schemathesis_both_keys_quick(live_api: str, keys: dict[str, str], report: Any,
                                             dropped: DroppedConnections) -> None:
    """The quick variant: every operation once, alternately with the full and the read-only key."""
    _fuzz(live_api, keys["full"], 1, report, dropped, share=(0, 2))
    _fuzz(live_api, keys["read_only"], 1, report, dropped, share=(1, 2))


@pytest.mark.slow
def test_plt_16_schemathesis_full_key_long(live_api: str, keys: dict[str, str], report: Any,
                                           dropped: DroppedConnections) -> None:
    _fuzz(live_api, keys["full"], scaled(6, 40), report, dropped)


@pytest.mark.slow
def test_plt_16_schemathesis_read_only_key_long(live_api: str, keys: dict[str, str], report: Any,
                                                dropped: DroppedConnections) -> None:
    _fuzz(live_api, keys["read_only"], scaled(6, 40), report, dropped)
