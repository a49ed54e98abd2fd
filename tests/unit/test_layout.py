"""The suite's own layout: no test module imports another test module. What tests share lives in
tests/support/ (imported as tests.support.…) or in conftest.py fixtures, so moving or deleting one test
file never breaks another."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def _imported(tree: ast.AST) -> list[str]:
    """Every absolute module name an import statement names (relative imports are named with dots)."""
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names.append("." * node.level + (node.module or ""))
    return names


def _bad(name: str, local: set[str]) -> bool:
    top = name.split(".")[0]
    if name.startswith("."):
        return True                                  # relative: always within the test tree
    if top == "tests":
        return not (name == "tests.support" or name.startswith("tests.support."))
    return top in local or top.startswith("test_") or top == "conftest"


def test_no_test_module_imports_another_test_module() -> None:
    files = sorted(TESTS.rglob("*.py"))
    # a bare import of a file's stem that is not the standard library's: a sibling module on sys.path
    local = {p.stem for p in files} - {"__init__"} - sys.stdlib_module_names
    assert any(p.name == "test_layout.py" for p in files)
    offenders = [f"{p.relative_to(TESTS)}: {name}"
                 for p in files for name in _imported(ast.parse(p.read_text(), str(p)))
                 if _bad(name, local)]
    assert offenders == []


def test_the_check_catches_sibling_and_package_imports() -> None:
    local = {"test_store_pg", "report_support", "agent"}
    for name in ("test_store_pg", "report_support", "tests.unit.store.test_store", "tests.pg.conftest",
                 "conftest", ".test_store", "test_anything"):
        assert _bad(name, local), name
    for name in ("tests.support", "tests.support.pg", "pytest", "netprobe.agent", "os.path"):
        assert not _bad(name, local), name
