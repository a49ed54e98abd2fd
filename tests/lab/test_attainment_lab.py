"""SLO attainment through the real path (docs/numbers.md, issue 13): on a jittery lab route, `netprobe target`
plays a server whose first token takes a known log-normal time; the share of openai-mode streams whose
first event arrives within T, as the sse probe measures it, agrees with what the model predicts from the
route's ICMP RTTs and that distribution, within 2 points."""

from __future__ import annotations

import json
import statistics
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from netprobe.budget.attainment import Dist, SloModel, attainment_pct
from netprobe.stats import LogNormal
from tests.support.lab import LabState, agent_exec, running_lab, target_in, wait_healthy

pytestmark = pytest.mark.lab

PORT = 8475
PREFILL = (120.0, 240.0)             # the server's first token: log-normal through P50 and P95, ms
REQUESTS, CONCURRENCY = 3000, 8       # ±0.4–0.6 points of sampling noise where an SLO is set
SPEC: dict[str, Any] = {
    "lab": {"seed": 11},
    "routes": [{"id": "jittery", "datacenter": "tokyo", "line": "163",
                "forward": {"delay_ms": 30.0, "jitter_ms": 3.0},
                "reverse": {"delay_ms": 30.0, "jitter_ms": 3.0}}],
}

# Many streams at once from the agent's namespace, through the sse probe's own code: first_event_ms is
# from the request written to the first content token — one round trip and the server's time.
STREAMS = """
import asyncio, json, sys
from netprobe.net.resolve import Resolver
from netprobe.probes.base import ProbeContext, ProbeTarget
from netprobe.probes.sse.runtime import SseSettings, run

async def main(url, n, concurrency):
    settings = SseSettings(mode="openai", max_tokens=1, timeout=20.0)
    ctx = ProbeContext(resolver=Resolver())
    gate = asyncio.Semaphore(concurrency)
    async def one():
        async with gate:
            r = await run(ProbeTarget(id="t", host="x", url=url), settings, ctx)
            return (r.first_event_ms, r.ttfb_ms) if r.status == "ok" else None
    got = await asyncio.gather(*(one() for _ in range(n)))
    await ctx.close()
    print(json.dumps(got))

asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3])))
"""


@pytest.fixture(scope="module")
def lab() -> Iterator[LabState]:
    with running_lab(SPEC) as state:
        route = state.routes["jittery"]
        server = target_in(route.namespace, PORT, "--prefill-ms", "{:g},{:g}".format(*PREFILL), "--seed", "5")
        try:
            wait_healthy(route.ipv4, PORT)
            yield state
        finally:
            server.terminate()
            server.wait(timeout=10)


def test_measured_first_tokens_meet_the_slo_as_predicted(lab: LabState) -> None:
    route = lab.routes["jittery"]
    ping = agent_exec([sys.executable, "-m", "netprobe.cli", "probe", "icmp", route.ipv4, "--count", "500",
                       "--interval", "0.01", "--json"], timeout=120)
    assert ping.returncode == 0, ping.stderr
    rtts = [v for v in json.loads(ping.stdout)["samples_ms"] if v is not None]
    assert len(rtts) >= 495, f"{500 - len(rtts)} of 500 echoes lost on a route without loss: a stalled host"
    url = f"http://{route.ipv4}:{PORT}/v1/chat/completions"
    out = agent_exec([sys.executable, "-c", STREAMS, url, str(REQUESTS), str(CONCURRENCY)], timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    got = [v for v in json.loads(out.stdout) if v is not None]
    assert len(got) == REQUESTS                         # no stream failed
    firsts = [first for first, _ in got]
    # the server's own work before its think (reading, parsing, scheduling: the response headers leave
    # before the think, one round trip after the request) is not in the model: 5–7 ms here, which
    # costs 1–1.5 points at 280 ms; a busy host inflates it (shown when the check fails)
    overhead = statistics.median(ttfb for _, ttfb in got) - statistics.median(rtts)
    model = Dist.of(rtts), LogNormal.through(*PREFILL)
    # where an SLO is set: attainment of 90 % and more (predicted 92.5, 97.3 and 99.5 % here); the
    # server's own few ms of work per request (parsing, scheduling) are not in the model
    for t in (280.0, 330.0, 420.0):
        predicted = attainment_pct(model[0], 0.0, model[1], SloModel(t, round_trips=1, handshake=False))
        measured = 100.0 * sum(v <= t for v in firsts) / len(firsts)
        assert abs(measured - predicted) <= 2.0, (t, measured, predicted, f"overhead {overhead:.1f} ms")
