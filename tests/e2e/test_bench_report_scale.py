"""bench/report_scale.py at a tiny scale on SQLite: the rows its generator loads through the real schema,
and `report peak` over them (every route reported, with its detected line and its evening peak)."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
AGENTS, TARGETS, DAYS, MTR_ROUNDS = 2, 4, 2, 2


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("report_scale", ROOT / "bench" / "report_scale.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["report_scale"] = module       # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def test_generator_loads_a_fleet_the_report_reads(tmp_path: Path) -> None:
    rs = _bench()
    fleet = rs.build_fleet(AGENTS, TARGETS, DAYS, seed=1)
    assert {a["timezone"] for a in fleet.agents} == {"Asia/Shanghai", "Europe/Berlin"}   # a DST zone
    pools = rs.build_pools(fleet, 3, seed=1, progress=False)
    path = tmp_path / "fleet.db"
    url = f"sqlite:///{path}"
    rs.run_netprobe("db", "upgrade", "--db", url)
    rows = rs.load_sqlite(path, fleet, pools, seed=1)
    hours = DAYS * 24
    assert rows == AGENTS * TARGETS * len(rs.PROBES) * hours
    assert asyncio.run(rs.write_mtr_rounds(url, fleet, MTR_ROUNDS, seed=1)) == AGENTS * TARGETS * MTR_ROUNDS
    counts = asyncio.run(rs.table_counts(url))
    assert counts["rollups_hourly"] == rows
    assert counts["probe_results"] == AGENTS * TARGETS * MTR_ROUNDS

    with sqlite3.connect(path) as db:
        per_series = db.execute("SELECT probe, count(*), min(rounds), max(rounds), sum(rtt_count) / count(*) "
                                "FROM rollups_hourly GROUP BY agent_id, target_id, probe").fetchall()
        assert len(per_series) == AGENTS * TARGETS * len(rs.PROBES)
        for probe, n, lo, hi, samples in per_series:
            assert n == hours
            # the default schedule: icmp/tcp a round a minute, mtr/sse one per 5 minutes (plus the mtr
            # rounds written through the store into the last hour)
            expected = 60 if probe in ("icmp", "tcp") else 12
            assert lo == expected and hi == expected + (MTR_ROUNDS if probe == "mtr" else 0)
            assert samples > {"icmp": 1100, "tcp": 280, "mtr": 110, "sse": 10}[probe]
        extras = db.execute("SELECT extras FROM rollups_hourly WHERE probe = 'sse' AND extras IS NOT NULL "
                            "LIMIT 50").fetchall()
        names = set().union(*(json.loads(e) for (e,) in extras))
        assert {"gap_p95_ms", "delay_var_p50_ms", "delay_var_p95_ms", "stalls", "stream_s",
                "server_first_ms", "tpot_ms"} <= names

    command = ["report", "peak", "--db", url, "--days", str(DAYS), "--format", "json"]
    proc = subprocess.run([sys.executable, "-m", "netprobe.cli", *command], capture_output=True, text=True,
                          cwd=ROOT, timeout=60)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)["rows"]
    assert len(report) == AGENTS * TARGETS
    for row in report:
        assert row["detected_line"] is not None
        assert row["peak"]["rounds"] > 0 and row["offpeak"]["rounds"] > 0
        assert row["peak"]["tcp_connect_p95_ms"] is not None
        assert row["peak"]["sse_first_event_p95_ms"] is not None
        if row["line"] == "163":     # the congested line: slower and lossier in the evening
            assert row["peak"]["rtt_p50_ms"] > 1.2 * row["offpeak"]["rtt_p50_ms"]
            assert row["peak"]["loss_pct"] > row["offpeak"]["loss_pct"]



def test_commands_are_timed_in_rounds_and_days_compared_round_by_round(tmp_path: Path,
                                                                         monkeypatch: Any) -> None:
    """Each round times every command once (a VM that changes speed between rounds slows them alike),
    and --days 7 against --days 90 is the median of the rounds' ratios."""
    rs = _bench()
    order: list[str] = []
    speed = iter([1.0] * 8 + [1.6] * 8 + [1.0] * 8)          # the machine slows in the second round

    def fake(args: list[str], out: Path, timeout: float, pg: bool) -> tuple[Any, str]:
        order.append(" ".join(args[2:]))
        out.write_text("x")
        cost = 1.0 if "--days" in args and args[args.index("--days") + 1] in ("7", "90") else 0.3
        return rs.Run(cost * next(speed), 0.5, 50.0, None, 0), ""

    monkeypatch.setattr(rs, "time_process", fake)
    monkeypatch.setattr(rs, "compile_package", lambda: None)
    timings = rs.time_commands("sqlite:///x.db", None, 3, 60.0, tmp_path)
    names = [name for name, _ in rs.commands("sqlite:///x.db")]
    assert [t.name for t in timings] == names
    assert order == [" ".join(a[2:]) for _, a in rs.commands("sqlite:///x.db")] * 3
    by = {t.name: t for t in timings}
    assert rs.paired_ratio(by["report peak --days 7"], by["report peak --days 90 --format table"]) == 1.0
    assert rs.verdict("sqlite", timings)
    long, short = by["budget --days 90"], by["budget --days 7"]
    dearer = (1.2, 1.0, 1.2)          # two rounds of three 1.2× the same round's --days 90
    short.runs = [rs.Run(r.wall_s * k, 0.5, 50.0, None, 0) for r, k in zip(long.runs, dearer, strict=True)]
    assert rs.paired_ratio(short, long) == pytest.approx(1.2)
    assert not rs.verdict("sqlite", timings)


def test_imported_fleet_is_timed_after_db_import(tmp_path: Path) -> None:
    """--fleet imported: the history written as envelopes, loaded by `db import` (which folds the
    prefix rollups), then every command timed on it."""
    args = ["--fleet", "imported", "--agents", "2", "--targets", "3", "--days", "2", "--db", "sqlite",
            "--repeat", "1"]
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "report_scale.py"), *args],
                         capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert "Traceback" not in out.stderr, out.stderr[-3000:]
    assert "history: 288 hourly icmp rounds" in out.stdout, out.stdout
    assert "sqlite: db import" in out.stdout and "probe_results 288" in out.stdout, out.stdout
    assert "rollups_prefix 0" not in out.stdout and "report peak --days 90 --format json" in out.stdout
