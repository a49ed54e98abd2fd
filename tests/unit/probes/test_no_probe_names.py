"""Outside netprobe/probes/ no module tests a probe's name: config, scheduler, store, rollups, alerts,
reports and the CLI read what they need of a probe from its spec (issue #11 point 1)."""

from __future__ import annotations

import ast
from pathlib import Path

import netprobe
from netprobe.probes import REGISTRY, base

PACKAGE = Path(netprobe.__file__).parent
# `netprobe diagnose` is a command with a fixed recipe built from probe libraries (an icmp round, an
# mtr trace, tcp connects when ICMP is not answered, sse requests), as `netprobe probe tcp` is built
# from tcp; its JSON's pinned `method` values (peak, icmp, tcp, none) list two of them. It may list
# them; it still may not test a probe's name.
LISTS_ALLOWED = {PACKAGE / "diagnose"}


def _names_in(node: ast.expr, names: set[str]) -> list[str]:
    """The probe-name constants of a display (tuple, list, set, dict keys), nested displays included."""
    if isinstance(node, ast.Constant):
        return [node.value] if isinstance(node.value, str) and node.value in names else []
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return [n for e in node.elts for n in _names_in(e, names)]
    if isinstance(node, ast.Dict):
        return [n for k in node.keys if k is not None for n in _names_in(k, names)]
    return []


def _name_tests(path: Path, lists: bool = True) -> list[str]:
    """`x == "mtr"`, `"sse" in probes`, `probe != "icmp"`, a `case "tcp":`, a per-probe table such
    as `("tcp", "sse")`, `{"icmp": …, "tcp": …}` or `for p, what in (("tcp", …), ("sse", …))`, and a
    lookup of one probe by name (`REGISTRY["sse"]`) … in one module."""
    names = set(REGISTRY)
    where = path.relative_to(PACKAGE.parent) if PACKAGE in path.parents else path.name
    found = []
    inner: set[int] = set()      # displays inside a display already reported
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        operands: list[ast.expr] = []
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
        elif isinstance(node, ast.MatchValue):
            operands = [node.value]
        elif isinstance(node, ast.Subscript):
            operands = [node.slice] if isinstance(node.slice, ast.Constant) else []
        elif lists and isinstance(node, ast.Tuple | ast.List | ast.Set | ast.Dict) and id(node) not in inner:
            listed = _names_in(node, names)
            inner.update(id(sub) for sub in ast.walk(node))
            if len(set(listed)) >= 2:      # one name beside other values is a label, not a table
                found.append(f"{where}:{node.lineno}: lists {', '.join(map(repr, listed))}")
        for operand in operands:
            for sub in ast.walk(operand):
                if isinstance(sub, ast.Constant) and sub.value in names:
                    found.append(f"{where}:{node.lineno}: tests {sub.value!r}")
    return found


def test_no_module_outside_probes_tests_a_probe_name() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if PACKAGE / "probes" in path.parents:
            continue
        found += _name_tests(path, lists=not any(d in path.parents for d in LISTS_ALLOWED))
    assert found == []


def test_the_scan_sees_a_name_test(tmp_path: Path) -> None:
    module = tmp_path / "scanned.py"
    module.write_text('def f(p, ps):\n    return p.probe == "mtr" or "sse" in ps\n', encoding="utf-8")
    assert [f.split(": ", 1)[1] for f in _name_tests(module)] == ["tests 'mtr'", "tests 'sse'"]


def test_the_scan_sees_per_probe_tables_not_labels(tmp_path: Path) -> None:
    module = tmp_path / "scanned.py"
    module.write_text(
        'FIGURED = ("tcp", "sse")\n'
        'def f(rows, by):\n'
        '    for probe, what in (("tcp", "TCP connect"), ("sse", "SSE streams")):\n'
        '        rows.append(probe)\n'
        '    what = {"icmp": 1, "tcp": 2}\n'
        '    return by["owd"], ["mtr", "rmtr"], what\n'
        # labels: one name beside other values, a keyword argument, a name inside a longer string
        'def g(x, n):\n'
        '    n(probe="icmp", modes=("icmp", "udp"))\n'
        '    return x, "sse", f"probes = [{x}]", "mtr: path loss"\n', encoding="utf-8")
    assert sorted(f.split(": ", 1)[1] for f in _name_tests(module)) == [
        "lists 'icmp', 'tcp'", "lists 'mtr', 'rmtr'", "lists 'tcp', 'sse'", "lists 'tcp', 'sse'",
        "tests 'owd'"]
    assert [f.split(": ", 1)[1] for f in _name_tests(module, lists=False)] == ["tests 'owd'"]


def test_probe_run_is_typed_over_the_spec() -> None:
    # ProbeRun's settings and result are the spec's type variables, not Any
    assert "Any" not in str(base.ProbeSpec.__dataclass_fields__["run"].type)
    for spec in REGISTRY.values():
        assert spec.result_type is not None and spec.settings_model is not None
