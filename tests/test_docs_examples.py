"""docs/api.md as a reader uses it (PLT-16): an example for every route the OpenAPI document lists, the one route
left out of the document named, and examples that use only the variables the page introduces."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
API_MD = ROOT / "docs" / "api.md"
METHODS = ("get", "post", "put", "patch", "delete")
# The routes the served application has but the document leaves out, as docs/api.md names them.
UNLISTED = {("POST", "/v1/messages")}


def _blocks(text: str) -> list[str]:
    return re.findall(r"```(?:sh|bash)\n(.*?)```", text, re.DOTALL)


def curl_examples(text: str) -> set[tuple[str, str]]:
    """(method, path) of every curl command in the page's shell blocks, the path as written after `$BASE`."""
    found = set()
    for block in _blocks(text):
        for command in re.split(r"(?=\bcurl )", block.replace("\\\n", " "))[1:]:
            command = command.split("\n#", 1)[0]
            explicit = re.search(r"-X (\w+)", command)
            sends = re.search(r"\s(-d|--data\S*)\s", command) and not re.search(r"\s(-G|--get)\s", command)
            method = explicit.group(1) if explicit else "POST" if sends else "GET"
            found |= {(method, path) for path in re.findall(r"\$BASE(/[^\s\"'?]*)", command)}
    return found


def missing_examples(document: dict[str, Any], examples: set[tuple[str, str]]) -> list[str]:
    missing = []
    for path, item in sorted(document["paths"].items()):
        pattern = re.compile("^" + re.sub(r"\\\{\w+\\\}", r"[^/]+", re.escape(path)) + "$")
        for method in (m for m in METHODS if m in item):
            if not any(m == method.upper() and pattern.match(p) for m, p in examples):
                missing.append(f"{method.upper()} {path}")
    return missing


def test_plt_16_api_md_has_an_example_for_every_route_in_the_openapi_document(client: Any) -> None:
    document = client.get("/schema/openapi.json").json()
    assert missing_examples(document, curl_examples(API_MD.read_text())) == []


def test_plt_16_the_routes_the_document_leaves_out_are_the_ones_api_md_names(client: Any) -> None:
    document = client.get("/schema/openapi.json").json()
    listed = {(m.upper(), p) for p, item in document["paths"].items() for m in item if m in METHODS}
    served = {(m, re.sub(r":\w+\}", "}", route.path)) for route in client.app.routes
              for m in getattr(route, "methods", ()) if m.lower() in METHODS
              and not route.path.startswith("/schema")}
    assert served - listed == UNLISTED
    intro = API_MD.read_text().split("\n## ", 1)[0]
    assert "except `POST /v1/messages`: an alias of `POST /messages`" in intro


def test_api_md_examples_use_base_and_the_variables_the_page_introduces() -> None:
    text = API_MD.read_text()
    intro = text.split("\n## ", 1)[0]
    introduced = set(re.findall(r"`([A-Z][A-Z0-9_]*)`", intro))
    for number, block in enumerate(_blocks(text)):
        assert "localhost:" not in block and "127.0.0.1:8000" not in block, f"block {number}: use $BASE"
        assigned = set(re.findall(r"\b([A-Z][A-Z0-9_]*)=", block))
        used = set(re.findall(r"\$\{?([A-Z][A-Z0-9_]*)", block))
        assert used - introduced - assigned == set(), f"block {number} uses variables the page never introduces"


def test_the_example_check_sees_a_missing_example_and_the_method() -> None:
    document = {"paths": {"/indexes/{index_id}": {"get": {}, "delete": {}}, "/mcp": {"post": {}}}}
    page = ("```sh\ncurl -s -H \"$H\" $BASE/indexes/$IDX\ncurl -s -H 'Accept: application/json' \\\n"
            "     -d '{\"jsonrpc\": \"2.0\"}' $BASE/mcp\n```\n")
    assert missing_examples(document, curl_examples(page)) == ["DELETE /indexes/{index_id}"]


def test_dashboard_md_describes_every_page_the_sidebar_offers() -> None:
    from dashboard.navigation import all_pages

    described = re.findall(r"^\| ([^|]+?) \|", (ROOT / "docs" / "dashboard.md").read_text(), re.MULTILINE)
    assert [p.title for p in all_pages() if p.title not in described] == []
