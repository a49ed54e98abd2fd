"""`netprobe compare` on the lab: `netprobe target` in two datacenter namespaces playing inference
frameworks with known prefill and per-token times, and a one-slot queueing server; compare runs in
the agent's namespace, every byte through the relay's delay."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.lab import LabState, agent_exec, running_lab, target_in, wait_healthy

pytestmark = pytest.mark.lab

PORT, QUEUE_PORT = 8473, 8474
SPEC: dict[str, Any] = {
    "lab": {"seed": 5},
    "routes": [
        {"id": "near", "datacenter": "hk", "line": "cn2-gia", "rtt_ms": 30.0},
        {"id": "far", "datacenter": "tokyo", "line": "163", "rtt_ms": 70.0},
    ],
}
FRAMEWORKS = {"near": (100.0, 10), "far": (200.0, 25)}     # prefill ms, token ms
QUEUE = (60.0, 5)
TOLERANCE_MS = 25.0      # both ends and the relay are Python on a small, busy VM: +5–20 ms at the median


@pytest.fixture(scope="module")
def lab() -> Iterator[LabState]:
    with running_lab(SPEC) as state:
        def serve(route: str, port: int, prefill: float, token: int, *more: str) -> subprocess.Popen[bytes]:
            return target_in(state.routes[route].namespace, port, "--prefill-ms", f"{prefill:g}",
                             "--token-ms", str(token), *more)
        servers = [serve(name, PORT, *FRAMEWORKS[name]) for name in FRAMEWORKS]
        servers.append(serve("near", QUEUE_PORT, *QUEUE, "--slots", "1"))
        try:
            for route in state.routes.values():
                wait_healthy(route.ipv4, PORT)
            wait_healthy(state.routes["near"].ipv4, QUEUE_PORT)
            yield state
        finally:
            for s in servers:
                s.terminate()
            for s in servers:
                s.wait(timeout=10)


def compare(*args: str) -> subprocess.CompletedProcess[str]:
    return agent_exec([sys.executable, "-m", "netprobe.cli", "compare", *args], timeout=300)


def test_two_frameworks_across_two_routes(lab: LabState) -> None:
    """Warm keep-alive connections: TTFT = one round trip + the framework's prefill; TPOT its token time
    (the route's delay is the same for every token)."""
    near, far = lab.routes["near"], lab.routes["far"]
    urls = [f"http://{near.ipv4}:{PORT}", f"http://{far.ipv4}:{PORT}"]
    args = (*urls, "--concurrency", "1", "--requests", "8", "--output-tokens", "12", "--warmup", "1")
    done = compare(*args, "--json")
    assert done.returncode == 0, done.stderr
    got = [e["levels"][0] for e in json.loads(done.stdout)["endpoints"]]
    for level, route in zip(got, (near, far), strict=True):
        prefill, token = FRAMEWORKS["near" if route is near else "far"]
        assert level["completed"] == 8 and level["errors"] == {}, level
        want = route.rtt_ms + prefill
        assert want - 2 <= level["ttft_ms"]["p50"] <= want + TOLERANCE_MS, (want, level["ttft_ms"])
        assert level["tpot_ms"]["p50"] == pytest.approx(token, abs=2.0), level["tpot_ms"]
    md = compare(*args, "--md")
    assert md.returncode == 0, md.stderr
    row = [c.strip() for c in md.stdout.splitlines()[3].split("|")[1:-1]]
    m = re.fullmatch(r"([0-9.]+)× / \+([0-9]+) %", row[3])
    assert m, row
    slow, fast = far.rtt_ms + FRAMEWORKS["far"][0], near.rtt_ms + FRAMEWORKS["near"][0]   # 270 / 130
    assert slow / (fast + TOLERANCE_MS) - 0.05 <= float(m[1]) <= (slow + TOLERANCE_MS) / fast + 0.05, row


def test_a_queueing_server_behind_a_route(lab: LabState) -> None:
    """One slot, four requests in flight: the server never idles, so TTFT = prefill + 3 service times
    whatever the route; alone, a request waits only for the round trip and its prefill."""
    near = lab.routes["near"]
    done = compare(f"http://{near.ipv4}:{QUEUE_PORT}", "--concurrency", "1,4", "--requests", "12",
                   "--output-tokens", "10", "--warmup", "4", "--json")
    assert done.returncode == 0, done.stderr
    one, four = json.loads(done.stdout)["endpoints"][0]["levels"]
    prefill, token = QUEUE
    service = prefill + 9 * token
    assert near.rtt_ms + prefill - 2 <= one["ttft_ms"]["p50"] <= near.rtt_ms + prefill + TOLERANCE_MS, one
    # never faster than the configured service time; a starved CPU can only stretch it, as the
    # measured rate shows
    served = 1000 / four["requests_per_s"]
    assert served >= service - 2, four
    assert prefill + 3 * service - 2 <= four["ttft_ms"]["p50"] <= prefill + 3 * served + TOLERANCE_MS, four
