"""SQL lives in netprobe/store/ (issue #11 point 3): no module outside it imports SQLAlchemy or the
schema; the rest of netprobe asks the store's query modules typed questions."""

from __future__ import annotations

import ast
from pathlib import Path

import netprobe

PACKAGE = Path(netprobe.__file__).resolve().parent
STORE = PACKAGE / "store"


def _module(path: Path) -> list[str]:
    """The dotted package path of a file (netprobe/alerts/values.py → ["netprobe", "alerts", "values"])."""
    return ["netprobe", *path.relative_to(PACKAGE).with_suffix("").parts]


def _imported(tree: ast.AST, module: list[str], is_package: bool) -> list[str]:
    """Every module an import statement names, relative imports resolved, and for `from M import N`
    also M.N (N may be a submodule: `from netprobe.store import schema`)."""
    names: list[str] = []
    package = module if is_package else module[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            target = ".".join([*base, *(node.module.split(".") if node.module else [])])
            names.append(target)
            names += [f"{target}.{alias.name}" for alias in node.names]
    return names


def _forbidden(name: str) -> bool:
    return name == "sqlalchemy" or name.startswith("sqlalchemy.") or name == "netprobe.store.schema"


def _offenders(root: Path) -> list[str]:
    out = []
    for path in sorted(root.rglob("*.py")):
        if path.is_relative_to(STORE):
            continue
        tree = ast.parse(path.read_text(), str(path))
        out += [f"{path.relative_to(root)}: {name}"
                for name in _imported(tree, _module(path), path.name == "__init__.py") if _forbidden(name)]
    return out


def test_no_module_outside_store_imports_sqlalchemy_or_the_schema() -> None:
    assert (STORE / "schema.py").exists() and (PACKAGE / "alerts").is_dir()
    assert _offenders(PACKAGE) == []


def test_the_scan_sees_every_form_of_import() -> None:
    forms = {
        "import sqlalchemy": True,
        "import sqlalchemy.exc as e": True,
        "from sqlalchemy import select": True,
        "from sqlalchemy.dialects.postgresql import insert": True,
        "from netprobe.store.schema import targets": True,
        "from netprobe.store import schema": True,
        "from ..store import schema": True,
        "from ..store.schema import targets": True,
        "def f():\n    from sqlalchemy import text": True,
        "from netprobe.store import Store": False,
        "from netprobe.store.fleet import load_agents": False,
        "from . import values": False,
    }
    for source, bad in forms.items():
        names = _imported(ast.parse(source), ["netprobe", "alerts", "values"], False)
        assert any(_forbidden(n) for n in names) is bad, source
