"""Return hops on the lab, through the real path: a trace run in a datacenter namespace back toward the
agent sees the spec's return_hops in order (IPv4 and IPv6), then the agent's ISP router, then the agent;
the forward trace from the agent still sees `hops`; `lab set` re-paths the way back; a route without
return_hops keeps the way back it always had (silent routers, as many as `hops`)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from netprobe.lab import api
from tests.support.lab import LabState, agent_exec, running_lab, spec_toml

pytestmark = pytest.mark.lab

ISP_V4, ISP_V6 = "198.18.0.2", "2001:2:0:ffff::2"
GIA = ["59.43.20.1", "59.43.20.2", "59.43.20.3"]
RET = ["202.97.20.1", "202.97.20.2"]
RET6 = ["2001:2:0:fd00::1", "2001:2:0:fd00::2"]
SPEC: dict[str, Any] = {
    "lab": {"seed": 11},
    "routes": [
        {"id": "asym", "datacenter": "hk", "line": "cn2-gia", "rtt_ms": 10.0, "hops": GIA,
         "return_hops": RET, "return_hops6": RET6},
        # hk's second route: the datacenter's own traffic leaves by its first one
        {"id": "second", "datacenter": "hk", "line": "163", "rtt_ms": 18.0, "hops": ["202.97.21.1"],
         "return_hops": ["202.97.21.2"]},
        {"id": "plain", "datacenter": "tokyo", "line": "163", "rtt_ms": 6.0,
         "hops": ["202.97.22.1", "202.97.22.2"]},
        {"id": "direct", "datacenter": "sg", "line": "bgp", "rtt_ms": 4.0, "hops": ["202.97.23.1"],
         "return_hops": []},
        {"id": "ratelimited", "datacenter": "us", "line": "163", "rtt_ms": 4.0,
         "return_hops": ["202.97.24.1", "202.97.24.2", "202.97.24.3"],
         "return_hop_loss_pct": [0.0, 100.0, 0.0]},
    ],
}


@pytest.fixture(scope="module")
def lab() -> Iterator[LabState]:
    with running_lab(SPEC) as state:
        yield state


def in_dc(state: LabState, route: str, args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", "netns", "exec", state.routes[route].namespace, *args], capture_output=True,
                          text=True, timeout=60)


def agent_address(state: LabState, family: str) -> str:
    return state.agent_ipv4 if family == "-4" else state.agent_ipv6


def system_mtr_back(state: LabState, route: str, family: str, *extra: str) -> list[dict[str, Any]]:
    """System mtr in the route's datacenter namespace toward the agent: its hubs."""
    proc = in_dc(state, route, ["mtr", family, "-n", "--json", "-c", "2", "-i", "0.1", "--gracetime", "1",
                                *extra, agent_address(state, family)])
    assert proc.returncode == 0, proc.stderr
    hubs: list[dict[str, Any]] = json.loads(proc.stdout)["report"]["hubs"]
    return hubs


def hosts(hubs: list[dict[str, Any]]) -> list[str]:
    return [h["host"] for h in hubs]


def way_back(state: LabState, route: str, family: str) -> list[str]:
    info = state.routes[route]
    ret = info.return_hops if family == "-4" else info.return_hops6
    assert ret is not None
    return [*ret, ISP_V4 if family == "-4" else ISP_V6, agent_address(state, family)]


@pytest.mark.parametrize("family", ["-4", "-6"])
def test_system_mtr_from_the_datacenter_sees_the_return_hops(lab: LabState, family: str) -> None:
    assert lab.routes["asym"].return_hops6 == RET6
    hubs = system_mtr_back(lab, "asym", family)
    assert hosts(hubs) == way_back(lab, "asym", family) == [*(RET if family == "-4" else RET6),
                                                             ISP_V4 if family == "-4" else ISP_V6,
                                                             agent_address(lab, family)]
    assert all(h["Loss%"] == 0.0 for h in hubs), hubs


@pytest.mark.parametrize("family", ["-4", "-6"])
def test_netprobe_trace_from_the_datacenter_sees_the_return_hops(lab: LabState, family: str) -> None:
    """netprobe's own trace engine, run where the reflector will run it: the way back and its line."""
    proc = in_dc(lab, "asym", [sys.executable, "-m", "netprobe.cli", "probe", "mtr", family, "-c", "2", "-i",
                               "0.1", "--json", agent_address(lab, family)])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = json.loads(proc.stdout)
    assert hosts(out["report"]["hubs"]) == way_back(lab, "asym", family)
    assert out["reached"] and out["loss_pct"] == 0.0
    if family == "-4":
        assert out["route"]["label"] == "163" and out["route"]["asns"] == [4134]


def test_the_forward_trace_still_sees_hops(lab: LabState) -> None:
    info = lab.routes["asym"]
    proc = agent_exec([sys.executable, "-m", "netprobe.cli", "probe", "mtr", "-4", "-c", "2", "-i", "0.1",
                       "--json", "asym.lab"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = json.loads(proc.stdout)
    assert hosts(out["report"]["hubs"]) == [ISP_V4, *GIA, info.ipv4]
    assert out["route"]["label"] == "cn2-gia"
    six = agent_exec(["mtr", "-6", "-n", "--json", "-c", "2", "-i", "0.1", "--gracetime", "1", "asym.lab"])
    assert six.returncode == 0, six.stderr
    assert hosts(json.loads(six.stdout)["report"]["hubs"]) == [ISP_V6, *info.hops6, info.ipv6]


def test_the_datacenter_traces_back_by_its_first_route(lab: LabState) -> None:
    """hk has two routes: its own traffic leaves by the first (asym), at asym's delay, not second's."""
    assert lab.routes["asym"].namespace == lab.routes["second"].namespace
    hubs = system_mtr_back(lab, "second", "-4")
    assert hosts(hubs) == way_back(lab, "asym", "-4")
    assert abs(hubs[-1]["Avg"] - lab.routes["asym"].rtt_ms) < 4.0, hubs  # 10 ms, not 18


def test_without_return_hops_the_way_back_is_as_before(lab: LabState) -> None:
    """No return_hops: the way back crosses as many routers as `hops`, silent (mtr's ???), so replies reach
    the agent with the TTL they always had. return_hops = []: no routers on the way back."""
    assert lab.routes["plain"].return_hops is None
    assert hosts(system_mtr_back(lab, "plain", "-4")) == ["???", "???", ISP_V4, lab.agent_ipv4]
    assert hosts(system_mtr_back(lab, "direct", "-4")) == [ISP_V4, lab.agent_ipv4]
    for route, ttl in (("plain", 64 - 2 - 1), ("direct", 64 - 1)):  # the relay's routers, then np-isp
        out = agent_exec(["ping", "-4", "-c", "1", "-W", "2", f"{route}.lab"]).stdout
        assert f"ttl={ttl} " in out, out


def test_return_hop_loss_is_only_that_hops_own_replies(lab: LabState) -> None:
    hubs = system_mtr_back(lab, "ratelimited", "-4")
    assert hosts(hubs) == ["202.97.24.1", "???", "202.97.24.3", ISP_V4, lab.agent_ipv4]
    assert [h["Loss%"] for h in hubs] == [0.0, 100.0, 0.0, 0.0, 0.0]


def test_lab_set_changes_the_return_hops(lab: LabState, tmp_path: Path) -> None:
    moved = ["202.97.30.1", "59.43.30.2", "202.97.30.3"]
    asym = {k: v for k, v in SPEC["routes"][0].items() if k != "return_hops6"}  # IPv6: the lab numbers them
    changed = {**SPEC, "routes": [{**asym, "return_hops": moved}, *SPEC["routes"][1:]]}
    path = tmp_path / "moved.toml"
    path.write_text(spec_toml(changed))
    try:
        state = api.set_impairments(path)
        assert state.routes["asym"].return_hops == moved
        assert hosts(system_mtr_back(state, "asym", "-4")) == [*moved, ISP_V4, state.agent_ipv4]
        assert hosts(system_mtr_back(state, "asym", "-6")) == way_back(state, "asym", "-6")
        assert state.routes["asym"].return_hops6 == [f"2001:2:0:fe00::{j}" for j in (1, 2, 3)]
    finally:
        state = api.set_impairments(Path(lab.spec_path))
    assert hosts(system_mtr_back(state, "asym", "-4")) == [*RET, ISP_V4, state.agent_ipv4]
