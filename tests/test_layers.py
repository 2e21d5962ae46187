"""House rule 11: layers only import downward, and `backend/access` knows nothing of the domains.

The import graph is read from the source (every `import`, also inside functions): a module may import backend
modules of its own layer or a lower one, never a higher one. Domains import one another (a domain is one layer).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Lowest first. A module belongs to the first layer whose prefix it starts with.
LAYERS: list[tuple[str, ...]] = [
    ("backend.errors", "backend.ids", "backend.config", "backend.params", "shared.schemas"),
    ("backend.db",),
    ("backend.access", "backend.providers"),
    ("backend.domains",),
    ("backend.http", "backend.contexts", "backend.openapi", "backend.jobs", "backend.mcp"),
    # the client calls the API; only the command uses its names. The demo writes through the client.
    ("backend.app", "backend.cli", "backend.demo", "shared.client"),
]


def layer_of(module: str) -> int | None:
    for depth, prefixes in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return depth
    return None


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def upward_imports() -> list[str]:
    problems = []
    for path in sorted((ROOT / "backend").rglob("*.py")):
        name = module_name(path)
        if "migrations" in path.parts or name == "backend":
            continue
        own = layer_of(name)
        assert own is not None, f"{name} belongs to no layer; add it to LAYERS"
        for target in sorted(imports(path)):
            if not target.startswith(("backend", "shared")):
                continue
            depth = layer_of(target)
            if depth is not None and depth > own:
                problems.append(f"{name} (layer {own}) imports {target} (layer {depth})")
    return problems


def test_house_rule_11_layers_only_import_downward() -> None:
    assert upward_imports() == []


def test_house_rule_11_access_imports_no_domain() -> None:
    offending = {module_name(p): sorted(i for i in imports(p) if i.startswith("backend.domains"))
                 for p in (ROOT / "backend" / "access").rglob("*.py")}
    assert {m: i for m, i in offending.items() if i} == {}


def test_the_layer_check_sees_an_upward_import(tmp_path: Path) -> None:
    """The check itself can fail: a service importing the HTTP plumbing is one layer too high."""
    source = tmp_path / "service.py"
    source.write_text("from backend.http import provide_context\n")
    assert "backend.http.provide_context" in imports(source)
    assert layer_of("backend.domains.memory.reads") == 3 and layer_of("backend.http") == 4


def test_no_backend_or_dashboard_file_is_over_400_lines() -> None:
    files = [*(ROOT / "backend").rglob("*.py"), *(ROOT / "dashboard").rglob("*.py")]
    long = {str(p.relative_to(ROOT)): n for p in files if (n := len(p.read_text().splitlines())) > 400}
    assert long == {}
