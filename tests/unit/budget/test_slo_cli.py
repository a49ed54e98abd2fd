"""`netprobe budget --slo-ttft-ms` and the report's attainment, through the real store and the CLI
(the pinned JSON fields of docs/api.md, the figures of docs/numbers.md)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "250"}
    return subprocess.run([sys.executable, "-m", "netprobe.cli", *args], capture_output=True, text=True,
                          timeout=180, env=env)


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> str:
    from tests.support.report import dataset, write_all

    path = tmp_path_factory.mktemp("slo") / "b.db"
    db = f"sqlite:///{path}"
    asyncio.run(write_all(db, dataset(now=datetime.now(UTC), days=3, agents=["sh-ct-1"],
                                      targets=["hk-cn2", "us-163"], extras=False)))
    return db


def test_budget_slo_json_has_the_pinned_fields_and_ranks_by_attainment(url: str) -> None:
    done = _cli("budget", "--db", url, "--slo-ttft-ms", "1000", "--server-ttft-ms", "300,600", "--days", "2",
                "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    rows = {r["target"]: r for r in doc["rows"]}
    for row in rows.values():
        for key in ("attainment_pct", "offpeak_attainment_pct", "e2e_ttft_ms", "gpu_budget_at_pct_ms",
                    "hours", "network_floor_ms", "gpu_budget_ms", "rank"):
            assert key in row, key
        assert set(row["e2e_ttft_ms"]) == {"p50", "p95", "p99"}
        assert [h["hour"] for h in row["hours"]] == list(range(24))
        assert row["server"] == "given"
    hk, us = rows["hk-cn2"], rows["us-163"]
    assert hk["attainment_pct"] > us["attainment_pct"] and (hk["rank"], us["rank"]) == (1, 2)
    assert hk["e2e_ttft_ms"]["p50"] < hk["e2e_ttft_ms"]["p95"] < hk["e2e_ttft_ms"]["p99"]
    # the server's P95 may take what the network's distribution leaves at 95 %: less than the target
    assert 0 < hk["gpu_budget_at_pct_ms"] < 1000 - 3 * hk["network_floor_ms"] + 200
    assert us["offpeak_attainment_pct"] > us["attainment_pct"]      # the peak is where it hurts
    # a tighter SLO can only lower attainment; a looser one raise it
    tight = json.loads(_cli("budget", "--db", url, "--slo-ttft-ms", "600", "--server-ttft-ms", "300,600",
                            "--days", "2", "--json").stdout)
    assert next(r for r in tight["rows"] if r["target"] == "hk-cn2")["attainment_pct"] < hk["attainment_pct"]
    table = _cli("budget", "--db", url, "--slo-ttft-ms", "1000", "--days", "2")
    assert table.returncode == 0, table.stderr
    assert "SLO: first token within 1000 ms" in table.stdout and "Worst case, P95s added" in table.stdout


def test_the_report_row_attainment_matches_the_model_on_its_own_bins(url: str) -> None:
    """The report's figure is the model's on the row's merged RTT bins and loss (no server measured)."""
    doc = json.loads(_cli("report", "peak", "--db", url, "--format", "json", "--days", "2",
                          "--slo-ttft-ms", "1300").stdout)
    assert doc["slo_ttft_ms"] == 1300
    us = next(r for r in doc["rows"] if r["target"] == "us-163")
    assert us["slo"]["server"] == "none" and us["attainment_pct"] == us["slo"]["attainment_pct"]
    # a step where three peak RTTs reach 1.3 s: between the share of P50 (< 1.3 s) and all of them
    assert 3 * us["peak"]["rtt_p50_ms"] < 1300 < 3 * us["peak"]["rtt_p99_ms"]
    assert 50 <= us["attainment_pct"] < 100


@pytest.mark.parametrize(("args", "needle"), [
    (["--slo-ttft-ms", "0"], "--slo-ttft-ms"),
    (["--slo-ttft-ms", "1000", "--attainment", "100"], "--attainment"),
    (["--slo-ttft-ms", "1000", "--server-ttft-ms", "600,300"], "--server-ttft-ms"),
    (["--ttft-ms", "1000", "--server-ttft-ms", "300,600"], "needs --slo-ttft-ms"),
    ([], "--ttft-ms"),
])
def test_bad_slo_options_name_themselves(url: str, args: list[str], needle: str) -> None:
    done = _cli("budget", "--db", url, *args)
    assert done.returncode == 2 and needle in done.stderr, done.stderr


def test_server_samples_file(url: str, tmp_path: Path) -> None:
    """--server-ttft-ms FILE: the samples are the server's distribution; a faster server can only help."""
    slow, fast = tmp_path / "slow.txt", tmp_path / "fast.txt"
    slow.write_text("\n".join(str(v) for v in (400, 450, 500, 550, 900)) + "\n")
    fast.write_text("\n".join(str(v) for v in (40, 45, 50, 55, 90)) + "\n")
    got = {}
    for name, path in (("slow", slow), ("fast", fast)):
        done = _cli("budget", "--db", url, "--slo-ttft-ms", "700", "--server-ttft-ms", str(path),
                    "--days", "2", "--json")
        assert done.returncode == 0, done.stderr
        got[name] = next(r for r in json.loads(done.stdout)["rows"] if r["target"] == "hk-cn2")
    assert got["fast"]["attainment_pct"] > got["slow"]["attainment_pct"]
    assert got["fast"]["e2e_ttft_ms"]["p50"] < got["slow"]["e2e_ttft_ms"]["p50"] - 300
    bad = tmp_path / "bad.txt"
    bad.write_text("12\nfast\n")
    done = _cli("budget", "--db", url, "--slo-ttft-ms", "700", "--server-ttft-ms", str(bad))
    assert done.returncode == 2 and "--server-ttft-ms" in done.stderr
