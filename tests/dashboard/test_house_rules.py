"""House rule 7: the dashboard talks to the API only; DSH-11: the registry names real page files."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from dashboard import navigation

DASHBOARD = Path(__file__).resolve().parents[2] / "dashboard"
FORBIDDEN = ("sqlalchemy", "psycopg", "backend", "asyncpg", "pgserver")


def imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_house_rule_7_dashboard_imports_no_database_or_backend_code() -> None:
    files = sorted(DASHBOARD.rglob("*.py"))
    assert len(files) >= 6
    offending = {str(f.relative_to(DASHBOARD)): sorted(m for m in imported_modules(f) if m.split(".")[0] in FORBIDDEN)
                 for f in files}
    assert {f: m for f, m in offending.items() if m} == {}


def test_dsh_11_every_registered_page_is_a_file_and_every_page_file_is_registered() -> None:
    registered = {page.path for page in navigation.all_pages()}
    on_disk = {str(p.relative_to(DASHBOARD)) for p in (DASHBOARD / "app_pages").glob("*.py")}
    assert registered == on_disk
    assert len({page.url_path for page in navigation.all_pages()}) == len(registered)


SPEC_ID = re.compile(r"\b(PLT|MEM|INJ|EXT|THR|TRN|DSH|EXP)-\d+")


def test_house_rule_13_page_text_names_no_spec_ids() -> None:
    """Administrators read plain words: no string a page shows (docstrings aside) cites a requirement id."""
    found = []
    shown = [p for p in DASHBOARD.rglob("*.py") if p.name != "navigation.py"]  # the registry's ids are not shown
    assert len(shown) >= 20
    for path in sorted(shown):
        tree = ast.parse(path.read_text())
        docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                      if isinstance(node, ast.Module | ast.FunctionDef | ast.ClassDef) and node.body
                      and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
        found += [f"{path.name}:{node.lineno}: {node.value}" for node in ast.walk(tree)
                  if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
                  and SPEC_ID.search(node.value)]
    assert found == []
