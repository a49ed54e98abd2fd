"""Paced sends on the lab (issue #10 point 3): with many targets from a file, no target's mean RTT
depends on where it sits in the file. Sent as one burst per interval, later echoes queued behind
earlier ones (+2.8 ms at the median of 500 targets, +4.8 ms at the worst, growing with position)."""

from __future__ import annotations

import itertools
import json
import statistics
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.lab import LabState, agent_exec, running_lab

pytestmark = pytest.mark.lab

N = 500
SPEC: dict[str, Any] = {
    "lab": {"seed": 5},
    "routes": [{"id": "flat", "datacenter": "hk", "line": "cn2-gia",
                "forward": {"delay_ms": 10.0}, "reverse": {"delay_ms": 10.0}},
               {"id": "hops", "datacenter": "sg", "line": "cn2-gia",
                "forward": {"delay_ms": 5.0}, "reverse": {"delay_ms": 5.0},
                "hops": ["59.43.1.1", "59.43.1.2", "59.43.1.3"]}],
}

TRACE = """
import asyncio, json, sys
from netprobe.probes.mtr.engine import TraceEngine

async def main():
    engine = TraceEngine()
    out = await engine.trace(sys.argv[1], cycles=3, interval=0.4, timeout=1.0)
    engine.close()
    print(json.dumps([[p.cycle, p.ttl, p.sent_ns, p.kind] for p in out.probes]))

asyncio.run(main())
"""


@pytest.fixture(scope="module")
def lab() -> Iterator[LabState]:
    with running_lab(SPEC) as state:
        yield state


def test_mean_rtt_does_not_grow_with_position_in_the_file(lab: LabState) -> None:
    route = lab.routes["flat"]
    hosts = route.ipv4_hosts(N)
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write("\n".join(hosts) + "\n")
    try:
        proc = agent_exec([sys.executable, "-m", "netprobe.cli", "probe", "icmp", "-f", f.name,
                           "--count", "5", "--interval", "1", "--timeout", "1", "--json"], timeout=120)
    finally:
        Path(f.name).unlink()
    assert proc.returncode == 0, proc.stderr
    results = json.loads(proc.stdout)["results"]
    assert [r["host"] for r in results] == hosts
    assert all(r["sent"] == 5 and r["received"] == 5 for r in results)  # no false loss
    means = [r["rtt_ms"]["avg"] for r in results]
    tenth = N // 10
    first, last = statistics.fmean(means[:tenth]), statistics.fmean(means[-tenth:])
    assert abs(last - first) <= 0.3, (first, last)
    slope = statistics.linear_regression(range(N), means).slope * N  # ms from first to last target
    assert abs(slope) <= 0.3, slope
    assert abs(statistics.median(means) - route.rtt_ms) <= 1.0, statistics.median(means)


def test_mtr_spreads_each_cycle_over_the_interval(lab: LabState) -> None:
    """TTL t of a cycle leaves at (t-1)·interval/n, n = hops to the destination once known (as mtr)."""
    route = lab.routes["hops"]
    proc = agent_exec([sys.executable, "-c", TRACE, route.ipv4], timeout=60)
    assert proc.returncode == 0, proc.stderr
    probes = json.loads(proc.stdout)
    dest_ttl = min(ttl for _, ttl, _, kind in probes if kind == "reached")
    assert dest_ttl == 5  # the isp, three hops, the destination
    for cycle in (1, 2):
        sent = sorted((ttl, ns) for c, ttl, ns, _ in probes if c == cycle)
        assert [ttl for ttl, _ in sent] == list(range(1, dest_ttl + 1))  # none beyond the destination
        gaps = [(b - a) / 1e9 for (_, a), (_, b) in itertools.pairwise(sent)]
        assert all(gap == pytest.approx(0.4 / dest_ttl, abs=0.01) for gap in gaps), gaps
