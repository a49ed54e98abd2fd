"""The sse probe on the lab: `netprobe target` in each datacenter namespace, the probe in the agent's,
every byte through the relay's delay, jitter and loss."""

from __future__ import annotations

import asyncio
import json
import statistics
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.lab import LabState, agent_exec, agent_process, running_lab, target_in, wait_healthy
from tests.support.schema import assert_schema_valid
from tests.support.store import window_stats

pytestmark = pytest.mark.lab

PORT = 8473
SPEC: dict[str, Any] = {
    "lab": {"seed": 3},
    "routes": [
        {"id": "clean", "datacenter": "hk", "line": "cn2-gia", "rtt_ms": 20.0},
        {"id": "jittery", "datacenter": "tokyo", "line": "163",
         "forward": {"delay_ms": 10.0, "jitter_ms": 4.0}, "reverse": {"delay_ms": 10.0, "jitter_ms": 4.0}},
        {"id": "lossy", "datacenter": "singapore", "line": "163",
         "forward": {"delay_ms": 10.0, "loss_pct": 8.0}, "reverse": {"delay_ms": 10.0, "loss_pct": 8.0}},
    ],
}
FIRST_EVENT_TOLERANCE_MS = 2.0


@pytest.fixture(scope="module")
def lab() -> Iterator[LabState]:
    with running_lab(SPEC) as state:  # which keeps the vCPUs awake: timing to the millisecond
        servers = [target_in(ns, PORT) for ns in sorted({r.namespace for r in state.routes.values()})]
        try:
            for route in state.routes.values():
                wait_healthy(route.ipv4, PORT)
            yield state
        finally:
            for s in servers:
                s.terminate()
            for s in servers:
                s.wait(timeout=10)


def read(url: str, netns: str | None = None, **settings: Any) -> dict[str, Any]:
    """One stream read from the agent namespace (or `netns`) through the probe's own API."""
    script = (
        "import asyncio, json, sys\n"
        "from netprobe.probes.base import ProbeContext, ProbeTarget\n"
        "from netprobe.probes.sse.runtime import SseSettings, run\n"
        "from netprobe.net.resolve import Resolver\n"
        "url, settings = sys.argv[1], json.loads(sys.argv[2])\n"
        "r = asyncio.run(run(ProbeTarget(id='t', host='x', url=url), SseSettings(**settings),\n"
        "                    ProbeContext(resolver=Resolver())))\n"
        "print(json.dumps(r.to_dict()))\n")
    cmd = [sys.executable, "-c", script, url, json.dumps(settings)]
    out = (agent_exec(cmd, timeout=120) if netns is None else
           subprocess.run(["ip", "netns", "exec", netns, *cmd], capture_output=True, text=True, timeout=120))
    assert out.returncode == 0, out.stderr
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def test_first_event_is_rtt_plus_think_time(lab: LabState) -> None:
    """Through the route: the server's think time (as it really is: the same server read over its own
    loopback, where asyncio's timers oversleep by up to a millisecond or two on this VM) plus the RTT."""
    route = lab.routes["clean"]
    for think in (0, 150):
        query = f"/sse?count=5&interval_ms=20&think_ms={think}"
        local = [read(f"http://127.0.0.1:{PORT}{query}", netns=route.namespace) for _ in range(3)]
        remote = [read(f"http://{route.ipv4}:{PORT}{query}") for _ in range(3)]
        assert all(r["status"] == "ok" for r in local + remote), local + remote
        think_real = statistics.median(r["first_event_ms"] for r in local)
        assert think <= think_real <= think + 3.0
        first = statistics.median(r["first_event_ms"] for r in remote)
        assert abs(first - (route.rtt_ms + think_real)) <= FIRST_EVENT_TOLERANCE_MS, (first, think_real)
        ttfb = statistics.median(r["ttfb_ms"] for r in remote)
        assert abs(ttfb - route.rtt_ms) <= FIRST_EVENT_TOLERANCE_MS  # headers leave before the think


def test_a_server_pause_is_exactly_one_stall(lab: LabState) -> None:
    route = lab.routes["clean"]
    r = read(f"http://{route.ipv4}:{PORT}/sse?count=40&interval_ms=20&pause_at=20&pause_ms=500")
    assert r["status"] == "ok" and r["events"] == 40
    assert r["stalls"] == 1 and abs(r["stall_ms_total"] - 520) <= 10, r


def test_delay_variation_rises_with_jitter(lab: LabState) -> None:
    calm = read(f"http://{lab.routes['clean'].ipv4}:{PORT}/sse?count=100&interval_ms=20")
    rough = read(f"http://{lab.routes['jittery'].ipv4}:{PORT}/sse?count=100&interval_ms=20")
    assert calm["delay_var_ms"]["p95"] < 2.0, calm["delay_var_ms"]
    assert rough["delay_var_ms"]["p95"] > calm["delay_var_ms"]["p95"] + 3.0, rough["delay_var_ms"]
    assert rough["gaps_ms"]["p95"] > calm["gaps_ms"]["p95"]


def test_loss_on_the_route_shows_as_stalls(lab: LabState) -> None:
    """A lost segment waits for TCP to notice and resend it (about two RTTs or more) and holds back the
    events behind it: a gap well above the 20 ms pace — on the lossy route only."""
    settings = {"stall_ms": 50.0, "stall_k": 2.0}
    clean = read(f"http://{lab.routes['clean'].ipv4}:{PORT}/sse?count=300&interval_ms=20", **settings)
    lossy = read(f"http://{lab.routes['lossy'].ipv4}:{PORT}/sse?count=300&interval_ms=20", **settings)
    assert clean["stalls"] == 0, clean["gaps_ms"]
    assert lossy["stalls"] >= 2 and lossy["status"] == "ok", lossy


AGENT_CONFIG = """
[agent]
id = "lab-sse"
region = "cn-east"
isp = "telecom"
timezone = "Asia/Shanghai"

[storage]
url = "sqlite:///{db}"

[probes.sse]
every = "2s"
timeout = "1.5s"

[[targets]]
id = "clean"
host = "{address}"
probes = ["sse"]
sse_url = "http://{address}:{port}/sse?count=20&interval_ms=40&pause_at=10&pause_ms=300"
"""


def test_agent_streams_and_rolls_up(lab: LabState, tmp_path: Path) -> None:
    """Scheduled sse rounds stored, and their hour: first event, gap p95, one stall per stream."""
    db, cfg = tmp_path / "sse.db", tmp_path / "agent.toml"
    route = lab.routes["clean"]
    cfg.write_text(AGENT_CONFIG.format(db=db, address=route.ipv4, port=PORT))
    agent = agent_process(cfg, 9)
    _, err = agent.communicate(timeout=60)
    assert agent.returncode == 0, err
    rows, window = asyncio.run(_read(db))
    assert len(rows) >= 3 and all(r["result"]["status"] == "ok" for r in rows), rows
    assert all(r["result"]["stalls"] == 1 for r in rows)
    assert window is not None and window.rounds == len(rows)
    assert window.rtt_p50_ms is not None and abs(window.rtt_p50_ms - route.rtt_ms) <= 3.0  # first event
    assert window.gap_p95_ms is not None and 40 <= window.gap_p95_ms <= 340
    assert window.stalls_per_min is not None and window.stalls_per_min > 0


async def _read(db: Path) -> tuple[list[dict[str, Any]], Any]:
    from datetime import UTC, datetime, timedelta

    from netprobe.store import open_store

    store = await open_store(f"sqlite:///{db}", upgrade=False)
    try:
        now = datetime.now(UTC)
        window = await window_stats(store, "lab-sse", "clean", "sse", now - timedelta(hours=2),
                                    now + timedelta(hours=1))
        rows = [r.envelope.raw for r in await store.results("lab-sse")]
        assert_schema_valid(rows)   # the envelope schema the collector serves
        return rows, window
    finally:
        await store.close()
