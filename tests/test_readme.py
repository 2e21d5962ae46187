"""The README as a newcomer reads it: plain words, links that lead somewhere, and a curl tour whose every
variable is set by a line before it (tests/e2e/test_run_command.py runs that tour against a live server)."""

from __future__ import annotations

import re
from pathlib import Path

from backend.cli.demo import write_env_file

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
TOUR_HEADING = "## The API with curl"
SPEC_ID = re.compile(r"\b(?:PLT|MEM|INJ|EXT|THR|TRN|DSH|EXP)-\d+")
SCREENSHOTS = ["overview", "records", "stores", "previewer", "threads", "audit", "keys", "people", "indexes",
               "extraction"]


def curl_tour(text: str | None = None) -> str:
    """The bash blocks of the README's tour section, in order, as one script."""
    text = README.read_text() if text is None else text
    section = text.split(TOUR_HEADING, 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```bash\n(.*?)```", section, re.DOTALL)
    assert blocks, f"no ```bash block under {TOUR_HEADING!r}"
    return "\n".join(block.rstrip("\n") for block in blocks)


def unset_before_use(script: str, given: set[str]) -> list[str]:
    """Upper-case shell variables a line reads before any line (or `given`) sets them; `${X:-default}` is fine."""
    assigned = set(given)
    problems = []
    for number, line in enumerate(script.splitlines(), start=1):
        code = line.split("  #", 1)[0]
        used = {m.group(1) for m in re.finditer(r"\$\{?([A-Z][A-Z0-9_]*)(?![A-Z0-9_]|:-)", code)}
        problems += [f"line {number}: ${name} is used before it is set" for name in sorted(used - assigned)]
        assigned |= set(re.findall(r"\b([A-Z][A-Z0-9_]*)=", code))
    return problems


def test_readme_names_no_requirement_ids() -> None:
    assert SPEC_ID.findall(README.read_text()) == []


def test_readme_tour_sets_every_variable_before_using_it(tmp_path: Path) -> None:
    env_file = tmp_path / "demo.env"
    write_env_file(env_file, {"org_id": "org_x", "key": "ck_x", "admin_email": "a@b.c", "admin_password": "p"})
    from_file = set(re.findall(r"^([A-Z_]+)=", env_file.read_text(), re.MULTILINE))
    tour = curl_tour()
    assert re.search(r'^\. "\$\{CORE_DATA_DIR:-\.coremem\}/demo\.env"', tour, re.MULTILINE), "the tour reads demo.env"
    assert unset_before_use(tour, from_file) == []
    assert "localhost:8000" not in tour and "127.0.0.1:8000" not in tour.split("\n", 1)[1], "one BASE, set once"


def test_the_variable_check_sees_a_variable_used_too_early() -> None:
    script = 'curl -s $BASE/memory/$MEM_ID\nBASE=http://x\nMEM_ID=$(curl -s $BASE | py \'d["id"]\')'
    assert unset_before_use(script, set()) == ["line 1: $BASE is used before it is set",
                                               "line 1: $MEM_ID is used before it is set"]
    assert unset_before_use('. "${CORE_DATA_DIR:-.coremem}/demo.env"', set()) == []


def test_readme_links_lead_to_existing_documents_and_the_browser_tests_screenshots() -> None:
    text = README.read_text()
    documents = re.findall(r"\]\((docs/[\w./-]+\.md)\)", text)
    assert {"docs/api.md", "docs/operations.md", "docs/export.md", "docs/decisions.md"} <= set(documents)
    assert [d for d in documents if not (ROOT / d).exists()] == []
    shots = re.findall(r"!\[[^\]]*\]\((docs/screenshots/[\w-]+\.png)\)", text)
    assert sorted(shots) == sorted(f"docs/screenshots/{name}.png" for name in SCREENSHOTS)
