"""The tcp probe on the lab: connect time against the route's RTT, unreachable and timeout for real."""

from __future__ import annotations

import json
import sys

import pytest


@pytest.mark.lab
def test_lab_connect_time_unreachable_and_timeout() -> None:
    """On emulated routes: connect time = the route's RTT (SYN → SYN-ACK is one round trip);
    the unrouted address is `unreachable` (the ISP router answers ICMP unreachable); a route that
    drops everything is `timeout`."""
    from tests.support.lab import agent_exec, running_lab

    spec = {"lab": {"seed": 3}, "routes": [
        {"id": "twenty", "datacenter": "hk", "line": "cn2-gia", "tcp_ports": [443],
         "forward": {"delay_ms": 12.0}, "reverse": {"delay_ms": 8.0}},
        {"id": "black", "datacenter": "tokyo", "line": "163", "tcp_ports": [443],
         "forward": {"delay_ms": 5.0, "loss_pct": 100.0}, "reverse": {"delay_ms": 5.0}},
    ]}
    with running_lab(spec) as lab:
        ok, black = lab.routes["twenty"], lab.routes["black"]
        targets = [f"{ok.ipv4}:443", f"[{ok.ipv6}]:443", f"{lab.unrouted_ipv4}:443", f"{black.ipv4}:443",
                   f"{ok.hostname}:443"]
        out = agent_exec([sys.executable, "-m", "netprobe.cli", "probe", "tcp", *targets,
                          "--count", "10", "--interval", "0.1", "--timeout", "1", "--json"])
    assert out.returncode == 1, out.stderr
    v4, v6, unrouted, dropped, named = json.loads(out.stdout)["results"]
    assert named["address"] in (ok.ipv4, ok.ipv6) and named["dns_ms"] is not None and v4["dns_ms"] is None
    for r in (v4, v6, named):
        assert r["status"] == "ok" and r["received"] == 10, r
        assert abs(r["connect_ms"]["p50"] - ok.rtt_ms) <= 1.5, (r["connect_ms"], ok.rtt_ms)
    assert unrouted["status"] == "down" and unrouted["error_kind"] == "unreachable", unrouted
    assert dropped["status"] == "down" and dropped["error_kind"] == "timeout", dropped
    assert dropped["failures"] == {"timeout": 10}
