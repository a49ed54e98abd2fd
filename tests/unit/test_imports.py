"""The package's import graph (issue #11 point 4): no import cycles between modules (issue #33:
counting imports inside functions and under TYPE_CHECKING), no private name
(`_x`) imported out of another package — what packages share is public — and no command importing
another command's CLI module (netprobe.cli wires them by name; what commands share is a library)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import netprobe

PACKAGE = Path(netprobe.__file__).resolve().parent


def _modules(root: Path) -> dict[str, Path]:
    """Dotted name → file, for every module under `root` (a package named root.name)."""
    out = {}
    for path in root.rglob("*.py"):
        parts = [root.name, *path.relative_to(root).with_suffix("").parts]
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _imports(name: str, path: Path, known: set[str]) -> Iterator[tuple[str, str]]:
    """(module imported, name taken from it or "") for each import in the module, wherever it is: in a
    function and under `if TYPE_CHECKING:` too, since a lazy import still ties the two modules."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            yield from ((alias.name, "") for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join([*up, *([base] if base else [])])
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                yield (sub, "") if sub in known else (base, alias.name)


def _owner(name: str, known: set[str]) -> str | None:
    """The module of ours a dotted name lies in (the longest known prefix), None for other packages."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def _top(module: str) -> str:
    """A module's top-level package within ours (netprobe.store.rollups → netprobe.store)."""
    return ".".join(module.split(".")[:2])


def _graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    known = set(modules)
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for m, path in modules.items():
        for imported, _ in _imports(m, path, known):
            owner = _owner(imported, known)
            if owner is not None and owner != m:
                graph[m].add(owner)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on.add(start)
        while work:
            v, edges = work[-1]
            w = next(edges, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def _private_imports(modules: dict[str, Path]) -> list[str]:
    known = set(modules)
    out = []
    for m, path in sorted(modules.items()):
        for imported, name in _imports(m, path, known):
            owner = _owner(imported, known)
            private = name.startswith("_") and not name.startswith("__")
            if private and owner is not None and _top(owner) != _top(m):
                out.append(f"{m}: {name} from {owner}")
    return out


def _cli_imports(modules: dict[str, Path]) -> list[str]:
    """Imports of a command's CLI module (`cli`, `*_cli`, a probe's `command`) by any other module
    but the probe's spec, which hands its command to `netprobe probe` (ProbeSpec.cli)."""
    known = set(modules)
    out = []
    for m, path in sorted(modules.items()):
        stem = m.removesuffix("spec")
        own = {stem + "cli", stem + "command"} if stem != m else set()
        for imported, _ in _imports(m, path, known):
            owner = _owner(imported, known)
            last = (owner or "").rpartition(".")[2]
            if owner is not None and owner != m and owner not in own and (
                    last in ("cli", "command") or last.endswith("_cli")):
                out.append(f"{m}: {owner}")
    return sorted(set(out))


def test_no_import_cycles() -> None:
    modules = _modules(PACKAGE)
    assert "netprobe.store.rollups" in modules and "netprobe.probes" in modules
    assert _cycles(_graph(modules)) == []


def test_no_private_name_imported_across_packages() -> None:
    assert _private_imports(_modules(PACKAGE)) == []


def test_no_command_imports_another_commands_cli_module() -> None:
    assert _cli_imports(_modules(PACKAGE)) == []


def test_the_checks_see_a_cycle_and_a_private_import(tmp_path: Path) -> None:
    root = tmp_path / "pkg"
    for d in ("a", "b"):
        (root / d).mkdir(parents=True)
        (root / d / "__init__.py").write_text("")
    (root / "__init__.py").write_text("")
    (root / "a" / "one.py").write_text("from pkg.b.two import helper, _draw\n\n\ndef _own() -> None: ...\n")
    (root / "a" / "three.py").write_text("from .one import _own\n")           # same package: fine
    (root / "a" / "cli.py").write_text("from pkg.b import two_cli\n")
    (root / "b" / "two_cli.py").write_text("from pkg.b import cli_shared\n")
    (root / "b" / "cli_shared.py").write_text("")
    (root / "c").mkdir()
    (root / "c" / "__init__.py").write_text("")
    (root / "c" / "spec.py").write_text("def cli() -> None:\n    from pkg.c import command\n")  # its own
    (root / "c" / "command.py").write_text("")
    (root / "c" / "other.py").write_text("from pkg.c import command\n")
    (root / "b" / "two.py").write_text(
        "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from pkg.a import three\n"
        "from pkg.a import one\n\n\ndef helper() -> None: ...\n\n\ndef _draw() -> None: ...\n")
    (root / "a" / "four.py").write_text("from pkg.b import five\n")
    (root / "b" / "five.py").write_text("def late() -> None:\n    from pkg.a import four\n")
    modules = _modules(root)
    # three is in it by a type-only import, four and five by one inside a function: both count
    assert sorted(_cycles(_graph(modules))) == [["pkg.a.four", "pkg.b.five"],
                                                ["pkg.a.one", "pkg.a.three", "pkg.b.two"]]
    assert _private_imports(modules) == ["pkg.a.one: _draw from pkg.b.two"]
    assert _cli_imports(modules) == ["pkg.a.cli: pkg.b.two_cli", "pkg.c.other: pkg.c.command"]
