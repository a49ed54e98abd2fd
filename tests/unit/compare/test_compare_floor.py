"""`compare --db`: the route's network floor (the stored target's evening-peak RTT) taken off TTFT."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.support.farend import target_served
from tests.support.report import dataset, write_all


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "netprobe.cli", *args], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "COLUMNS": "250"})


@pytest.fixture(scope="module")
def target() -> Iterator[str]:
    with target_served("--prefill-ms", "150", "--token-ms", "5") as url:
        yield url


def test_the_peak_rtt_of_the_matching_target_comes_off_ttft(target: str, tmp_path: Path) -> None:
    envs = dataset(now=datetime.now(UTC), days=3, agents=["sh-ct-1"], targets=["hk-cn2", "us-163"],
                   extras=False)
    for env in envs:        # hk-cn2 stands for the loopback endpoint
        if env["target"]["id"] == "hk-cn2":
            env["target"] = {**env["target"], "host": "127.0.0.1"}
    db = f"sqlite:///{tmp_path / 'agent.db'}"
    asyncio.run(write_all(db, envs))
    peak = {r["target"]: r["peak"] for r in json.loads(
        _cli("report", "peak", "--db", db, "--format", "json", "--days", "2").stdout)["rows"]}
    port = target.rsplit(":", 1)[1]
    other = f"http://localhost:{port}"      # same server, a host no stored target has
    done = _cli("compare", target, other, "--db", db, "--days", "2", "--requests", "4",
                "--output-tokens", "3", "--json")
    assert done.returncode == 0, done.stderr
    matched, unmatched = json.loads(done.stdout)["endpoints"]
    floor = matched["network_floor"]
    assert floor["target"] == "hk-cn2" and floor["agent"] == "sh-ct-1"
    assert floor["rtt_p50_ms"] == peak["hk-cn2"]["rtt_p50_ms"]
    assert floor["rtt_p95_ms"] == peak["hk-cn2"]["rtt_p95_ms"]
    level = matched["levels"][0]
    for q in ("p50", "p95", "p99"):
        assert level["server_ttft_ms"][q] == pytest.approx(level["ttft_ms"][q] - floor["rtt_p50_ms"])
    assert unmatched["network_floor"] is None and unmatched["levels"][0]["server_ttft_ms"] is None
    assert unmatched["network_floor_note"] == "no stored target with host localhost"
    table = _cli("compare", target, other, "--db", db, "--days", "2", "--requests", "2",
                 "--output-tokens", "2")
    assert table.returncode == 0, table.stderr
    assert "server p50" in table.stdout and "target hk-cn2" in table.stdout
    assert "no network floor: no stored target with host localhost" in table.stdout
