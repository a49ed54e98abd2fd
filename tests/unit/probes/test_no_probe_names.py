"""Outside netprobe/probes/ no module tests a probe's name: config, scheduler, store, rollups, alerts,
reports and the CLI read what they need of a probe from its spec (issue #11 point 1)."""

from __future__ import annotations

import ast
from pathlib import Path

import netprobe
from netprobe.probes import REGISTRY, base

PACKAGE = Path(netprobe.__file__).parent
# netprobe/mtr/ compares trace *modes* ("icmp", "udp", "tcp": the protocol of mtr's probes), not probes
NOT_PROBE_NAMES = {PACKAGE / "mtr"}


def _name_tests(path: Path) -> list[str]:
    """`x == "mtr"`, `"sse" in probes`, `probe != "icmp"`, a `case "tcp":` … in one module."""
    names = set(REGISTRY)
    where = path.relative_to(PACKAGE.parent) if PACKAGE in path.parents else path.name
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        operands: list[ast.expr] = []
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
        elif isinstance(node, ast.MatchValue):
            operands = [node.value]
        for operand in operands:
            for sub in ast.walk(operand):
                if isinstance(sub, ast.Constant) and sub.value in names:
                    found.append(f"{where}:{node.lineno}: tests {sub.value!r}")
    return found


def test_no_module_outside_probes_tests_a_probe_name() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if PACKAGE / "probes" in path.parents or any(d in path.parents for d in NOT_PROBE_NAMES):
            continue
        found += _name_tests(path)
    assert found == []


def test_the_scan_sees_a_name_test(tmp_path: Path) -> None:
    module = tmp_path / "scanned.py"
    module.write_text('def f(p, ps):\n    return p.probe == "mtr" or "sse" in ps\n', encoding="utf-8")
    assert [f.split(": ", 1)[1] for f in _name_tests(module)] == ["tests 'mtr'", "tests 'sse'"]


def test_probe_run_is_typed_over_the_spec() -> None:
    # ProbeRun's settings and result are the spec's type variables, not Any
    assert "Any" not in str(base.ProbeSpec.__dataclass_fields__["run"].type)
    for spec in REGISTRY.values():
        assert spec.result_type is not None and spec.settings_model is not None
