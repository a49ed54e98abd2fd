"""owd on the lab against each direction's configured impairment (docs/probes.md, issue 12 point 6):
`netprobe target --udp` in each datacenter namespace, `netprobe probe owd` in the agent's, every
packet through the relay's per-direction delay, jitter and loss."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.farend import issue
from tests.support.lab import LabState, agent_exec, ping_summary, running_lab, wait_healthy
from tests.support.schema import assert_schema_valid

pytestmark = pytest.mark.lab

PORT = 8473
CLEAN = (10.0, 15.0)            # forward, reverse delay (ms)
RET_LOSS_PCT = 10.0
SPEC: dict[str, Any] = {
    "lab": {"seed": 11},
    "routes": [   # one route per datacenter: each namespace's reflector has one way back
        {"id": "clean", "datacenter": "hk", "line": "cn2-gia",
         "forward": {"delay_ms": CLEAN[0]}, "reverse": {"delay_ms": CLEAN[1]}},
        {"id": "retloss", "datacenter": "tokyo", "line": "163",
         "forward": {"delay_ms": 5.0}, "reverse": {"delay_ms": 5.0, "loss_pct": RET_LOSS_PCT}},
        {"id": "retjitter", "datacenter": "singapore", "line": "163",
         "forward": {"delay_ms": 5.0}, "reverse": {"delay_ms": 5.0, "jitter_ms": 4.0}},
    ],
}


@pytest.fixture(scope="module")
def lab() -> Iterator[tuple[LabState, Path]]:
    with tempfile.TemporaryDirectory(prefix="netprobe-owd-") as tmp, running_lab(SPEC) as state:
        tokens, token = Path(tmp) / "tokens.json", Path(tmp) / "agent.token"
        token.write_text(issue(tokens, "sh-ct-1"))
        serve = [sys.executable, "-m", "netprobe.cli", "target", "--listen", f"0.0.0.0:{PORT}",
                 "--udp", f"0.0.0.0:{PORT}", "--tokens", str(tokens)]
        servers = [subprocess.Popen(["ip", "netns", "exec", ns, *serve], stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL)
                   for ns in sorted({r.namespace for r in state.routes.values()})]
        try:
            for route in state.routes.values():
                wait_healthy(route.ipv4, PORT)
            yield state, token
        finally:
            for s in servers:
                s.terminate()
            for s in servers:
                s.wait(timeout=10)


def owd(lab: tuple[LabState, Path], route: str, count: int, *extra: str) -> dict[str, Any]:
    state, token = lab
    out = agent_exec([sys.executable, "-m", "netprobe.cli", "probe", "owd",
                      f"{state.routes[route].ipv4}:{PORT}", "--token-file", str(token), "--count", str(count),
                      "--interval", "10ms", "--json", *extra], timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    result: dict[str, Any] = json.loads(out.stdout)
    # what an agent would upload of this round: the collector's envelope schema takes it
    assert_schema_valid([{"id": "owd-1", "probe": "owd", "started_at": result["started_at"],
                          "agent": {"id": "lab-agent"}, "target": {"id": route}, "result": result}])
    return result


def test_rtt_agrees_with_iputils_ping(lab: tuple[LabState, Path]) -> None:
    state, _ = lab
    address = state.routes["clean"].ipv4
    pinged = ping_summary(agent_exec(["ping", "-n", "-q", "-c", "200", "-i", "0.01", address],
                                     timeout=60).stdout)
    r = owd(lab, "clean", 200)
    assert r["received"] == 200 and pinged["received"] == 200
    assert abs(r["rtt_ms"]["avg"] - pinged["avg"]) <= 0.3, (r["rtt_ms"], pinged)
    assert abs(r["rtt_ms"]["avg"] - sum(CLEAN)) <= 1.0


def test_one_clock_gives_each_configured_delay(lab: tuple[LabState, Path]) -> None:
    """On the lab agent and reflector share one clock: with clock_sync the absolute one-way delays are
    the configured ones; without it they are withheld."""
    r = owd(lab, "clean", 100, "--clock-sync")
    assert abs(r["fwd_ms"] - CLEAN[0]) <= 0.5 and abs(r["ret_ms"] - CLEAN[1]) <= 0.5, r
    assert owd(lab, "clean", 5)["fwd_ms"] is None


def test_loss_on_the_way_back_only(lab: tuple[LabState, Path]) -> None:
    n = 1000
    r = owd(lab, "retloss", n)
    assert r["fwd_loss_pct"] == 0.0
    p = RET_LOSS_PCT / 100.0
    bound = 4.0 * math.sqrt(n * p * (1 - p))             # four standard deviations of a binomial count
    lost = r["ret_loss_pct"] * n / 100.0
    assert abs(lost - n * p) <= bound, r
    assert r["loss_pct"] == pytest.approx(r["fwd_loss_pct"] + r["ret_loss_pct"])


def test_delay_variation_only_on_the_jittery_direction(lab: tuple[LabState, Path]) -> None:
    r = owd(lab, "retjitter", 300)
    assert r["ret_delay_var_ms"]["p95"] > 3.0, r["ret_delay_var_ms"]
    assert r["fwd_delay_var_ms"]["p95"] < 0.5, r["fwd_delay_var_ms"]
    clean = owd(lab, "clean", 300)
    assert clean["fwd_delay_var_ms"]["p95"] < 0.5 and clean["ret_delay_var_ms"]["p95"] < 0.5, clean
