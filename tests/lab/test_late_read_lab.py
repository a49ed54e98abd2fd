"""mtr traces whose event loop stalls past the wait for late replies: a reply the kernel stamped in time
counts with the path's RTT however late it is read; one stamped after the wait is lost."""

from __future__ import annotations

import json
import statistics
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.lab import LabState, agent_exec, running_lab

pytestmark = pytest.mark.lab

RTT_TOLERANCE_MS = 1.5
STALL_FREE_MS = 20.0  # the most one sample may exceed the path's RTT (the stall is 500 ms)
SPEC: dict[str, Any] = {
    "lab": {"seed": 7},
    "routes": [
        {"id": "near", "datacenter": "hk", "line": "cn2-gia", "rtt_ms": 30.0},
        {"id": "far", "datacenter": "us", "line": "163", "rtt_ms": 300.0},
    ],
}


@pytest.fixture(scope="module")
def lab() -> Iterator[LabState]:
    with running_lab(SPEC) as state:
        yield state


def assert_kernel_rtts(got: list[float], rtt_ms: float) -> None:
    """The path's RTT, not the stall: median within tolerance; no sample carries the 500 ms stall (the
    relay's own ms hiccups on a busy host are tolerated)."""
    assert abs(statistics.median(got) - rtt_ms) <= RTT_TOLERANCE_MS, got
    assert min(got) >= rtt_ms - RTT_TOLERANCE_MS and max(got) < rtt_ms + STALL_FREE_MS, got


def stalled_trace(address: str, mode: str, timeout: float, stall: float, where: str) -> list[dict[str, Any]]:
    """One cycle of an mtr trace whose loop blocks `stall` s once it waits for its replies
    (tests/support/stall.py); its probe records."""
    proc = agent_exec([sys.executable, "-m", "tests.support.stall", "mtr", address, mode, str(timeout),
                       str(stall), where])
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["took"] >= stall and out["error_kind"] is None, out
    probes: list[dict[str, Any]] = out["probes"]
    return probes


@pytest.mark.parametrize("where", ["loop", "select"])
@pytest.mark.parametrize("mode", ["icmp", "tcp"])
def test_destination_read_after_a_stall_is_reached_with_its_kernel_rtt(lab: LabState, mode: str,
                                                                       where: str) -> None:
    """30 ms path, 0.2 s wait, the loop blocked 0.5 s while the destination's replies come."""
    route = lab.routes["near"]
    probes = stalled_trace(route.ipv4, mode, 0.2, 0.5, where)
    reached = [p for p in probes if p["kind"] == "reached"]
    assert reached, probes
    assert_kernel_rtts([p["rtt_ms"] for p in reached], route.rtt_ms)


@pytest.mark.parametrize("where", ["loop", "select"])
@pytest.mark.parametrize("mode", ["icmp", "tcp"])
def test_destination_past_the_wait_is_lost_when_read_in_a_stall(lab: LabState, mode: str, where: str) -> None:
    """300 ms path, 0.2 s wait, the loop blocked 0.5 s: the destination answers within the stall but
    after the wait, and is lost as it is without a stall; the first hop (the ISP, µs away) still counts."""
    probes = stalled_trace(lab.routes["far"].ipv4, mode, 0.2, 0.5, where)
    assert not [p for p in probes if p["kind"] == "reached"], probes
    assert probes[0]["kind"] == "ttl" and probes[0]["rtt_ms"] < 50, probes[0]


def stalled_connects(address: str, count: int, timeout: float, stall: float) -> list[dict[str, Any]]:
    proc = agent_exec([sys.executable, "-m", "tests.support.stall", "tcp", address, "443", str(count),
                       str(timeout), str(stall)])
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["took"] >= count * stall, out
    attempts: list[dict[str, Any]] = out["attempts"]
    return attempts


def test_connect_seen_late_keeps_the_kernels_handshake_time(lab: LabState) -> None:
    """30 ms path, 0.2 s timeout, the loop blocked 0.5 s after each connect starts: the handshakes count
    with the path's RTT (the kernel's figure), not the ~500 ms the loop took to see them."""
    route = lab.routes["near"]
    attempts = stalled_connects(route.ipv4, 3, 0.2, 0.5)
    assert all(a["kind"] is None for a in attempts), attempts
    assert_kernel_rtts([a["connect_ms"] for a in attempts], route.rtt_ms)


def test_connect_completed_past_the_timeout_is_a_timeout_when_seen_in_a_stall(lab: LabState) -> None:
    """300 ms path, 0.2 s timeout, the loop blocked 0.5 s: the handshakes complete within the stall but
    after their deadline, and are timeouts as they are without a stall."""
    attempts = stalled_connects(lab.routes["far"].ipv4, 3, 0.2, 0.5)
    assert [a["kind"] for a in attempts] == ["timeout"] * 3, attempts
