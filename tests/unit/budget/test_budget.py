"""Budget arithmetic, checked by hand (docs/reports.md, docs/api.md)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from netprobe.budget.compute import BudgetParams, Candidate, budget_row, budget_rows

HK = Candidate(agent="sh-ct-1", region="cn-east", target="hk-cn2", datacenter="hk", line="cn2-gia",
               rtt_p50_ms=30.0, rtt_p95_ms=36.0)


@pytest.mark.parametrize(("params", "trips", "network", "gpu"), [
    (BudgetParams(ttft_ms=1000), 3, 108.0, 1000 - 108 - 6),              # new TCP + TLS 1.3
    (BudgetParams(ttft_ms=1000, tls="1.2"), 4, 144.0, 1000 - 144 - 6),    # TLS 1.2: one more trip
    (BudgetParams(ttft_ms=1000, keepalive=True), 1, 36.0, 1000 - 36 - 6),  # warm connection
    (BudgetParams(ttft_ms=1000, calls=3), 3, 324.0, 1000 - 324 - 18),     # three calls in series
])
def test_network_share_and_gpu_budget(params: BudgetParams, trips: int, network: float, gpu: float) -> None:
    row = budget_row(HK, params)
    assert (row.network_floor_ms, row.round_trips, row.network_ms) == (36.0, trips, network)
    assert row.jitter_source == "rtt" and row.gpu_budget_ms == pytest.approx(gpu)
    assert row.feasible and row.why == ""


def test_sse_delay_variation_sets_the_margin_and_openai_streams_check_the_gpu() -> None:
    c = Candidate(agent=HK.agent, region=HK.region, target=HK.target, datacenter=HK.datacenter,
                  line=HK.line, rtt_p50_ms=30.0, rtt_p95_ms=36.0, delay_var_p50_ms=0.5, delay_var_p95_ms=4.5,
                  server_first_ms=950.0, tpot_ms=25.0, gap_p95_ms=40.0, stalls_per_min=0.0)
    row = budget_row(c, BudgetParams(ttft_ms=1000, tpot_ms=50))
    assert (row.jitter_margin_ms, row.jitter_source) == (4.0, "sse")
    assert row.gpu_budget_ms == pytest.approx(1000 - 108 - 4)
    assert row.gpu_measured_ms == 950.0 and not row.feasible and row.why == "gpu"  # the GPU is too slow
    assert row.tpot_ok is True
    slow_stream = budget_row(c, BudgetParams(ttft_ms=2000, tpot_ms=30))
    assert slow_stream.tpot_ok is False and slow_stream.why == "tpot"   # gap P95 40 ms > 30 ms
    # with owd, the way back's delay variation sets it: the network's share, where tokens travel
    both = replace(c, ret_delay_var_p50_ms=0.25, ret_delay_var_p95_ms=2.75)
    row = budget_row(both, BudgetParams(ttft_ms=1000, tpot_ms=50))
    assert (row.jitter_margin_ms, row.jitter_source) == (2.5, "owd-ret")
    assert row.gpu_budget_ms == pytest.approx(1000 - 108 - 2.5)


def test_the_network_alone_can_spend_the_whole_target() -> None:
    far = Candidate(agent="sh-ct-1", region="cn-east", target="us-163", datacenter="us-west", line="163",
                    rtt_p50_ms=200.0, rtt_p95_ms=340.0)
    row = budget_row(far, BudgetParams(ttft_ms=1000))
    assert row.network_ms == 1020.0 and row.gpu_budget_ms == pytest.approx(1000 - 1020 - 140)
    assert not row.feasible and row.why == "network"


def test_ranking_is_per_region_by_gpu_budget() -> None:
    def cand(region: str, target: str, p95: float) -> Candidate:
        return Candidate(agent=f"a-{region}", region=region, target=target, datacenter="dc", line="x",
                         rtt_p50_ms=p95, rtt_p95_ms=p95)

    cands = [cand("cn-east", "tokyo", 60), cand("cn-east", "hk", 36), cand("cn-north", "hk", 50),
             cand("cn-east", "us", 180), cand("cn-north", "tokyo", 45)]
    rows = budget_rows(cands, BudgetParams(ttft_ms=1000))
    ranks = {(r.region, r.target): r.rank for r in rows}
    assert ranks == {("cn-east", "hk"): 1, ("cn-east", "tokyo"): 2, ("cn-east", "us"): 3,
                     ("cn-north", "tokyo"): 1, ("cn-north", "hk"): 2}


# -- the command, on a generated dataset through the real store ---------------------------------------
def test_budget_command_takes_the_floor_from_the_peak_report(tmp_path: Path) -> None:
    from tests.support.report import dataset, write_all

    now = datetime.now(UTC)
    url = f"sqlite:///{tmp_path / 'b.db'}"
    asyncio.run(write_all(url, dataset(now=now, days=3, agents=["sh-ct-1"], targets=["hk-cn2", "us-163"],
                                       extras=False)))
    report = json.loads(_cli("report", "peak", "--db", url, "--format", "json", "--days", "2").stdout)
    done = _cli("budget", "--db", url, "--ttft-ms", "1000", "--days", "2", "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    peak = {r["target"]: r["peak"] for r in report["rows"]}
    rows = {r["target"]: r for r in doc["rows"]}
    assert set(rows) == {"hk-cn2", "us-163"}
    for target, row in rows.items():
        for key in ("region", "target", "network_floor_ms", "round_trips", "network_ms", "jitter_margin_ms",
                    "gpu_budget_ms", "feasible", "rank"):  # the pinned fields
            assert key in row
        p95, p50 = peak[target]["rtt_p95_ms"], peak[target]["rtt_p50_ms"]
        assert row["network_floor_ms"] == p95 and row["round_trips"] == 3
        assert row["network_ms"] == pytest.approx(3 * p95)
        assert row["jitter_margin_ms"] == pytest.approx(p95 - p50)
        assert row["gpu_budget_ms"] == pytest.approx(1000 - 3 * p95 - (p95 - p50))
    assert (rows["hk-cn2"]["rank"], rows["us-163"]["rank"]) == (1, 2)
    warm = json.loads(_cli("budget", "--db", url, "--ttft-ms", "1000", "--days", "2", "--keepalive",
                           "--calls", "4", "--json").stdout)
    hk = next(r for r in warm["rows"] if r["target"] == "hk-cn2")
    assert hk["round_trips"] == 1 and hk["network_ms"] == pytest.approx(4 * peak["hk-cn2"]["rtt_p95_ms"])
    tls12 = json.loads(_cli("budget", "--db", url, "--ttft-ms", "800", "--tls", "1.2", "--calls", "2",
                            "--region", "cn-east", "--json").stdout)
    assert tls12["rows"] and tls12["tls"] == "1.2"
    table = _cli("budget", "--db", url, "--ttft-ms", "1000", "--days", "2")
    assert table.returncode == 0 and "hk-cn2" in table.stdout and "feasible" in table.stdout
    assert "floor p95" in table.stdout
    bad = _cli("budget", "--db", url, "--ttft-ms", "1000", "--tls", "1.1")
    assert bad.returncode == 2 and "--tls" in bad.stderr
    none = _cli("budget", "--db", url)
    assert none.returncode == 2 and "--ttft-ms" in none.stderr and "Traceback" not in none.stderr
    typed = _cli("budget", "--db", url, "--calls", "x")      # click's message
    assert typed.returncode == 2 and "valid integer" in " ".join(typed.stderr.split())


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "250"}
    return subprocess.run([sys.executable, "-m", "netprobe.cli", *args], capture_output=True, text=True,
                          timeout=120, env=env)
