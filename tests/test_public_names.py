"""The shared package's public names are literal: `__all__` is one tuple of strings per module, written once,
naming exactly what the module defines (type checkers read literal tuples; `dir()` they cannot)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parents[1] / "shared"
MODULES = sorted(p for p in SHARED.rglob("*.py") if p.name != "__init__.py")


def _defined(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return {n for n in names if not n.startswith("_") and n != "__all__"}


@pytest.mark.parametrize("path", MODULES, ids=[str(p.relative_to(SHARED)) for p in MODULES])
def test_all_is_one_literal_tuple_of_the_modules_public_names(path: Path) -> None:
    tree = ast.parse(path.read_text())
    assignments = [node for node in tree.body if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign)
                   and any(isinstance(t, ast.Name) and t.id == "__all__"
                           for t in (node.targets if isinstance(node, ast.Assign) else [node.target]))]
    assert len(assignments) == 1, "assign __all__ exactly once"
    value = assignments[0].value
    assert isinstance(value, ast.Tuple) and all(isinstance(e, ast.Constant) and isinstance(e.value, str)
                                                for e in value.elts), "__all__ is a literal tuple of strings"
    listed = [e.value for e in value.elts if isinstance(e, ast.Constant)]
    assert len(listed) == len(set(listed))
    imported = {alias.asname or alias.name for node in tree.body if isinstance(node, ast.ImportFrom)
                for alias in node.names}
    assert set(listed) - imported == _defined(tree)
