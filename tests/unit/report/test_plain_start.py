"""A plain `report peak …` runs without typer and click (netprobe.plain_args) and prints
what the typer command prints for the same words; anything that is not plain goes to typer as before."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from netprobe.cli import build_app
from netprobe.plain_args import plain_options
from netprobe.probes import REGISTRY
from netprobe.report.run import plain_peak
from tests.support.report import dataset, write_all

SPEC: dict[str, Any] = {"--db": ("db", "str"), "--days": ("days", "int"), "--ms": ("ms", "float"),
                        "--json": ("json", "flag")}


@pytest.mark.parametrize(("args", "parsed"), [
    ([], {}),
    (["--db", "sqlite:///a.db", "--days", "90"], {"db": "sqlite:///a.db", "days": 90}),
    (["--days=7", "--json", "--ms", "1e3"], {"days": 7, "json": True, "ms": 1000.0}),
    (["--db=postgresql://u@h/d?x=1"], {"db": "postgresql://u@h/d?x=1"}),
])
def test_plain_options(args: list[str], parsed: dict[str, Any]) -> None:
    assert plain_options(args, SPEC) == parsed


@pytest.mark.parametrize("args", [
    ["--help"], ["--db"], ["--days", "x"], ["--days", "7", "--days", "8"], ["--json=yes"], ["extra"],
    ["--days", "-1"], ["--db", "--json"], ["--db", ""], ["--nope", "1"], ["-d", "7"],
])
def test_anything_else_goes_to_typer(args: list[str]) -> None:
    """None: the typer command parses these and gives its own messages, as before."""
    assert plain_options(args, SPEC) is None


def test_the_commands_words() -> None:
    assert plain_peak(["--db", "x", "--format", "json", "--out", "r.json", "--window", "22-2"]) == {
        "db": "x", "fmt": "json", "out": Path("r.json"), "window": "22-2"}
    assert plain_peak(["--format", "json", "vram"]) is None
    assert plain_peak(["--slo-ttft-ms", "800"]) == {"slo_ttft_ms": 800.0}


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    envs = dataset(now=datetime.now(UTC), days=3, agents=["sh-ct-1"], targets=["hk-cn2", "us-163"])
    url = f"sqlite:///{tmp_path_factory.mktemp('plain') / 'plain.db'}"
    asyncio.run(write_all(url, envs))
    yield url


_MODULES = """
import json, os, sys
sys.argv = ["netprobe", *sys.argv[2:]]
from netprobe.cli import main
try:
    main()
finally:
    with open(os.environ["MODS"], "w") as fh:
        json.dump(sorted(sys.modules), fh)
"""


def _plain(args: list[str], mods: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", _MODULES, "-", *args], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "MODS": str(mods), "COLUMNS": "200"})


def _typer(args: list[str]) -> str:
    done = CliRunner().invoke(build_app(args[0]), args, catch_exceptions=False)
    assert done.exit_code == 0, done.output
    return done.stdout


def _report(text: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(text)
    doc.pop("generated_at")          # the one thing that differs between two runs
    return doc


@pytest.mark.parametrize("args", [
    ["report", "peak", "--format", "json", "--days", "2"],
    ["report", "peak", "--format", "json", "--window", "22-2", "--region", "cn-east"],
    ["report", "peak", "--format", "json", "--slo-ttft-ms", "600"],
])
def test_plain_and_typer_print_the_same_without_typer(db: str, args: list[str], tmp_path: Path) -> None:
    words = [*args, "--db", db]
    plain = _plain_without(words, tmp_path, {"typer", "click", "sqlalchemy"})
    typed = _typer(words)
    assert _report(plain) == _report(typed)
    assert _report(plain)["rows"]


def _plain_without(words: list[str], tmp_path: Path, packages: set[str]) -> str:
    """The plain way's output, checked to have succeeded without importing `packages` (top-level
    names) or anything of RUNTIME_ONLY."""
    mods = tmp_path / "modules.json"
    plain = _plain(words, mods)
    assert plain.returncode == 0, plain.stderr
    modules = set(json.loads(mods.read_text()))
    assert not {m.split(".")[0] for m in modules} & packages
    assert not modules & RUNTIME_ONLY
    return plain.stdout


# What the reports and the budget never use: pydantic (the probes' settings), the probes' runtime
# modules (engines, packet code; their specs' runtime) and the rows' wire validator.
RUNTIME_ONLY = {"pydantic", "netprobe.store.wire", "netprobe.config.agent",
                *(spec.runtime for spec in REGISTRY.values() if spec.runtime is not None)}


@pytest.mark.parametrize("args", [
    ["budget", "--ttft-ms", "800", "--json", "--days", "2"],
    ["budget", "--slo-ttft-ms", "900", "--server-ttft-ms", "300,600", "--keepalive", "--json"],
    ["budget", "--ttft-ms", "800", "--tls", "1.2", "--calls", "2", "--region", "cn-east", "--json"],
])
def test_plain_budget_prints_what_typer_prints(db: str, args: list[str], tmp_path: Path) -> None:
    words = [*args, "--db", db]
    plain = _plain_without(words, tmp_path, {"typer", "click", "sqlalchemy", "rich"})
    assert json.loads(plain) == json.loads(_typer(words))
    assert json.loads(plain)["rows"]


def test_plain_budget_table_and_errors(db: str, tmp_path: Path) -> None:
    table = _plain(["budget", "--db", db, "--ttft-ms", "800"], tmp_path / "m.json")
    assert table.returncode == 0, table.stderr
    assert "floor p95" in table.stdout and "hk-cn2" in table.stdout
    none = _plain(["budget", "--db", db], tmp_path / "m.json")
    assert none.returncode == 2 and "--ttft-ms" in none.stderr and "Traceback" not in none.stderr
    typed = _plain(["budget", "--db", db, "--calls", "x"], tmp_path / "m.json")   # typer's message
    assert typed.returncode == 2 and "valid integer" in " ".join(typed.stderr.split())


def test_errors_are_the_same_either_way(db: str, tmp_path: Path) -> None:
    bad = _plain(["report", "peak", "--db", db, "--window", "20-20"], tmp_path / "m.json")
    assert bad.returncode == 2 and "--window" in bad.stderr and "Traceback" not in bad.stderr
    slo = _plain(["report", "peak", "--db", db, "--slo-ttft-ms", "0"], tmp_path / "m.json")
    assert slo.returncode == 2 and "--slo-ttft-ms" in slo.stderr
    typed = _plain(["report", "peak", "--db", db, "--days", "x"], tmp_path / "m.json")   # typer's message
    assert typed.returncode == 2 and "valid integer" in " ".join(typed.stderr.split())
