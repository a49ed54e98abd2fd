"""The lab itself: measured RTT, loss, jitter, hops, TCP and names match the spec; set/down work."""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from netprobe.errors import ConfigError, LabError
from netprobe.lab import api
from netprobe.lab.awake import keep_awake
from netprobe.lab.spec import parse_spec
from tests.support.lab import (
    LabState,
    agent_exec,
    ping_rtts,
    ping_summary,
    require_root,
    running_lab,
    write_spec,
)

RTT_TOLERANCE_MS = 1.5
FAST_HOPS = ["59.43.1.1", "59.43.2.2", "202.97.3.3"]


def base_spec(fast_rtt: tuple[float, float] = (12.0, 8.0), jitter_ms: float = 0.0) -> dict[str, Any]:
    return {
        "lab": {"seed": 7},
        "routes": [
            {"id": "fast", "datacenter": "hk", "line": "cn2-gia", "hops": FAST_HOPS,
             "forward": {"delay_ms": fast_rtt[0]}, "reverse": {"delay_ms": fast_rtt[1]}},
            # Same datacenter as `fast`: replies must go back through their own route.
            {"id": "slow", "datacenter": "hk", "line": "bgp", "tcp_ports": [8443],
             "forward": {"delay_ms": 20.0}, "reverse": {"delay_ms": 30.0},
             "peak": {"reverse": {"delay_ms": 60.0, "loss_pct": 0.0}}},
            {"id": "lossy", "datacenter": "tokyo", "line": "163",
             "forward": {"delay_ms": 1.0, "loss_pct": 10.0}, "reverse": {"delay_ms": 1.0, "loss_pct": 5.0}},
            {"id": "jitter", "datacenter": "tokyo", "line": "163",
             "forward": {"delay_ms": 5.0, "jitter_ms": jitter_ms},
             "reverse": {"delay_ms": 5.0, "jitter_ms": jitter_ms}},
            {"id": "ratelimited", "datacenter": "sg", "line": "cn2-gia", "rtt_ms": 10.0,
             "hops": ["59.43.9.1", "59.43.9.2", "59.43.9.3"], "hop_loss_pct": [0.0, 100.0, 0.0]},
        ],
    }


@pytest.fixture(scope="module")
def spec_dir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="netprobe-test-lab-") as tmp:
        yield Path(tmp)


@pytest.fixture(scope="module")
def module_lab(spec_dir: Path) -> Iterator[Path]:
    """The shared lab, with the vCPUs kept awake like every other lab (tests.support.lab.running_lab):
    a halted vCPU's wake-up stalls of several ms put spikes into the jitter-0 RTTs (stdev 1.0 ms in CI)."""
    require_root()
    path = write_spec(base_spec(), spec_dir)
    with keep_awake():
        try:
            yield path
        finally:
            api.down()


@pytest.fixture
def lab(module_lab: Path) -> LabState:
    """The module's lab, rebuilt if a previous test took it down or changed it."""
    state = api.current()
    if state is None or state.spec_path != str(module_lab.resolve()) or not state.relay_alive():
        state = api.up(module_lab, replace=True)
    return state


def set_spec(spec: dict[str, Any], directory: Path, name: str, profile: str = "base") -> LabState:
    path = directory / name
    path.write_text(write_spec(spec, directory).read_text())
    return api.set_impairments(path, profile=profile)


def run_parallel(commands: list[list[str]], timeout: float = 60.0) -> list[str]:
    procs = [subprocess.Popen(["ip", "netns", "exec", "np-agent", *cmd], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for cmd in commands]
    return [p.communicate(timeout=timeout)[0] for p in procs]


# --- spec validation (no root needed) ----------------------------------------------------------


def test_peak_profile_replaces_only_what_it_gives() -> None:
    spec = parse_spec(base_spec())
    peak = spec.with_profile("peak")
    slow = {r.id: r for r in peak.routes}["slow"]
    assert (slow.forward_impairment().delay_ms, slow.reverse_impairment().delay_ms) == (20.0, 60.0)
    assert peak.routes[0] == spec.routes[0]  # a route without [routes.peak] keeps its figures
    assert spec.with_profile("base") == spec
    with pytest.raises(ConfigError, match="profile"):
        spec.with_profile("rush-hour")
    with pytest.raises(ConfigError, match="rtt_ms or forward/reverse"):
        parse_spec({"routes": [{"id": "x", "datacenter": "hk", "line": "bgp",
                                "peak": {"rtt_ms": 5.0, "forward": {"delay_ms": 1.0}}}]})


def test_bad_spec_names_the_field() -> None:
    spec = base_spec()
    spec["routes"][2]["forward"]["loss_pct"] = 150
    spec["routes"][0]["colour"] = "blue"
    with pytest.raises(ConfigError) as err:
        parse_spec(spec)
    text = str(err.value)
    assert "routes[2].forward.loss_pct" in text
    assert "routes[0].colour" in text


@pytest.mark.parametrize(("change", "needle"), [
    (lambda s: s["routes"].append(dict(s["routes"][0])), "duplicate route id 'fast'"),
    (lambda s: s["routes"][0].update(hops=["59.43.1.1", "not-an-ip"]), "hops[1]"),
    (lambda s: s["routes"][1].update(rtt_ms=30), "either rtt_ms or forward/reverse"),
    (lambda s: s["routes"][4].update(hop_loss_pct=[1.0]), "hop_loss_pct has 1 entries"),
    (lambda s: s["routes"][0].update(id="Bad_Name"), "routes[0].id"),
])
def test_bad_spec_is_a_config_error(change: Any, needle: str) -> None:
    spec = base_spec()
    change(spec)
    with pytest.raises(ConfigError) as err:
        parse_spec(spec)
    assert needle in str(err.value)


def test_bundled_specs_parse() -> None:
    root = Path(__file__).resolve().parents[2]
    for name in ("lab.toml", "lab-bench.toml"):
        from netprobe.lab.spec import load_spec
        spec = load_spec(root / "agents" / name)
        assert spec.routes


@pytest.mark.lab
def test_not_root_is_a_setup_error(spec_dir: Path) -> None:
    """Root stripped of every capability (still uid 0, so this Python and its packages under /root stay
    readable on machines where other users cannot enter /root) is told what is missing."""
    require_root()
    path = write_spec(base_spec(), spec_dir)
    proc = subprocess.run(["setpriv", "--bounding-set=-all", "--inh-caps=-all", "--ambient-caps=-all",
                           sys.executable, "-m", "netprobe.cli", "lab", "up", str(path)],
                          capture_output=True, text=True, timeout=60, cwd="/")
    assert proc.returncode == 2, proc.stderr
    assert "needs root" in proc.stderr
    assert "Traceback" not in proc.stderr


# --- the running lab ----------------------------------------------------------------------------


@pytest.mark.lab
def test_measured_rtt_matches_configured(lab: LabState) -> None:
    fast, slow = lab.routes["fast"], lab.routes["slow"]
    targets = [(fast.rtt_ms, fast.ipv4), (fast.rtt_ms, fast.ipv6), (slow.rtt_ms, slow.ipv4),
               (slow.rtt_ms, slow.ipv6)]
    outputs = run_parallel([["ping", "-q", "-i", "0.01", "-c", "200", addr] for _, addr in targets])
    for (configured, addr), out in zip(targets, outputs, strict=True):
        summary = ping_summary(out)
        assert summary["received"] == 200, out
        assert abs(summary["avg"] - configured) <= RTT_TOLERANCE_MS, (addr, configured, out)
        assert summary["min"] >= configured - 0.5, (addr, out)  # a delay is never shortened


@pytest.mark.lab
def test_every_address_of_a_block_answers_and_names_resolve(lab: LabState) -> None:
    fast = lab.routes["fast"]
    addrs = [*fast.ipv4_hosts(1000)[999:], fast.ipv4_hosts(300)[-1], fast.ipv6_hosts(4096)[-1]]
    assert addrs[0] == "198.19.3.232"  # 198.19.0.1 + 999: the benchmark's last target
    outputs = run_parallel([["ping", "-c", "1", "-W", "2", a] for a in addrs])
    for addr, out in zip(addrs, outputs, strict=True):
        assert ping_summary(out)["received"] == 1, (addr, out)
    hosts = agent_exec(["getent", "ahosts", "fast.lab"], check=True).stdout
    assert fast.ipv4 in hosts and fast.ipv6 in hosts
    assert agent_exec(["getent", "hosts", "nothing-here.example"]).returncode != 0


@pytest.mark.lab
def test_loss_within_binomial_bounds(lab: LabState) -> None:
    route = lab.routes["lossy"]
    n = 1000
    p_ok = (1 - route.forward.loss_pct / 100) * (1 - route.reverse.loss_pct / 100)
    out = agent_exec(["ping", "-q", "-i", "0.002", "-W", "1", "-c", str(n), route.ipv4]).stdout
    received = ping_summary(out)["received"]
    sigma = math.sqrt(n * p_ok * (1 - p_ok))
    assert abs(received - n * p_ok) <= 5 * sigma, (received, n * p_ok, sigma)


@pytest.mark.lab
def test_jitter_rises_with_configured_jitter_and_never_reorders(lab: LabState, spec_dir: Path) -> None:
    stdevs = []
    try:
        for jitter in (0.0, 1.0, 4.0):
            set_spec(base_spec(jitter_ms=jitter), spec_dir, f"jitter-{jitter}.toml")
            # 5 ms apart with up to ~±8 ms of jitter: an unclamped relay would reorder often.
            target = lab.routes["jitter"].ipv4
            out = agent_exec(["ping", "-i", "0.005", "-c", "300", "-W", "1", target]).stdout
            replies = ping_rtts(out)
            assert len(replies) == 300, out
            seqs = [seq for seq, _ in replies]
            assert seqs == sorted(seqs), "replies arrived out of order"
            stdevs.append(statistics.stdev(rtt for _, rtt in replies))
    finally:
        set_spec(base_spec(), spec_dir, "restore.toml")
    assert stdevs[0] < 0.5, stdevs
    assert stdevs[0] < stdevs[1] < stdevs[2], stdevs
    assert stdevs[2] > 2.0, stdevs


@pytest.mark.lab
def test_peak_profile_switches_live_and_back(lab: LabState, spec_dir: Path) -> None:
    slow = lab.routes["slow"]
    try:
        state = set_spec(base_spec(), spec_dir, "peak.toml", profile="peak")
        assert state.profile == "peak" and state.routes["slow"].rtt_ms == 80.0
        summary = ping_summary(agent_exec(["ping", "-q", "-i", "0.01", "-c", "50", slow.ipv4]).stdout)
        assert abs(summary["avg"] - 80.0) <= RTT_TOLERANCE_MS, summary
    finally:
        back = set_spec(base_spec(), spec_dir, "base.toml")
    assert back.profile == "base"
    summary = ping_summary(agent_exec(["ping", "-q", "-i", "0.01", "-c", "50", slow.ipv4]).stdout)
    assert abs(summary["avg"] - 50.0) <= RTT_TOLERANCE_MS, summary


@pytest.mark.lab
def test_set_changes_delay_live_without_dropping_anything(lab: LabState, spec_dir: Path) -> None:
    fast = lab.routes["fast"]
    background = subprocess.Popen(["ip", "netns", "exec", "np-agent", "ping", "-q", "-i", "0.01", "-c", "150",
                                   "-W", "2", fast.ipv4], stdout=subprocess.PIPE, text=True)
    try:
        changed = set_spec(base_spec(fast_rtt=(30.0, 30.0)), spec_dir, "slower.toml")
        assert changed.relay_pid == lab.relay_pid
        assert changed.routes["fast"].rtt_ms == 60.0
        assert api.current() == changed
        out = agent_exec(["ping", "-q", "-i", "0.01", "-c", "50", fast.ipv4]).stdout
        assert abs(ping_summary(out)["avg"] - 60.0) <= RTT_TOLERANCE_MS, out
    finally:
        set_spec(base_spec(), spec_dir, "restore.toml")
    out = agent_exec(["ping", "-q", "-i", "0.01", "-c", "50", fast.ipv4]).stdout
    assert abs(ping_summary(out)["avg"] - fast.rtt_ms) <= RTT_TOLERANCE_MS, out
    assert ping_summary(background.communicate(timeout=30)[0])["received"] == 150


@pytest.mark.lab
def test_set_refuses_topology_changes(lab: LabState, spec_dir: Path) -> None:
    spec = base_spec()
    spec["routes"][1]["tcp_ports"] = [8443, 9000]
    with pytest.raises(LabError, match="--replace"):
        set_spec(spec, spec_dir, "topology.toml")
    assert api.current() == lab


TCP_SCRIPT = r"""
import json, socket, sys, time
out = []
for host, port in json.loads(sys.argv[1]):
    s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    s.settimeout(5)
    t = time.perf_counter()
    try:
        s.connect((host, port)); r = "ok"
    except OSError as e:
        r = e.errno
    out.append([host, port, r, (time.perf_counter() - t) * 1000])
    s.close()
print(json.dumps(out))
"""


@pytest.mark.lab
def test_tcp_listener_rst_and_unreachable(lab: LabState) -> None:
    import errno
    fast, slow = lab.routes["fast"], lab.routes["slow"]
    cases = [(fast.ipv4, 443, "ok"), (fast.ipv4, 80, "ok"), (fast.ipv4, 8443, errno.ECONNREFUSED),
             (fast.ipv6, 443, "ok"), (fast.ipv6, 8443, errno.ECONNREFUSED),
             (slow.ipv4, 8443, "ok"), (slow.ipv4, 443, errno.ECONNREFUSED), (slow.ipv6, 8443, "ok"),
             (fast.ipv4_hosts(700)[-1], 443, "ok"),
             (lab.unrouted_ipv4, 443, errno.EHOSTUNREACH)]
    pairs = json.dumps([[h, p] for h, p, _ in cases])
    proc = agent_exec([sys.executable, "-c", TCP_SCRIPT, pairs], check=True)
    results = json.loads(proc.stdout)
    for (host, port, expected), (_, _, got, ms) in zip(cases, results, strict=True):
        assert got == expected, (host, port, got)
        if got == "ok":  # connect = one round trip
            route = fast if host.startswith(("198.19.0.", "198.19.2.", "2001:2:0:1:")) else slow
            assert abs(ms - route.rtt_ms) < 5, (host, port, ms)
    # IPv6: the isp's "no route" is a soft error to TCP, so connect fails on the SYN retry.
    proc = agent_exec([sys.executable, "-c", TCP_SCRIPT, json.dumps([[lab.unrouted_ipv6, 443]])], check=True)
    assert json.loads(proc.stdout)[0][2] in (errno.ENETUNREACH, errno.EHOSTUNREACH)


@pytest.mark.lab
def test_hops_answer_time_exceeded(lab: LabState) -> None:
    fast = lab.routes["fast"]
    expected = [lab.isp_ipv4, *FAST_HOPS]
    outputs = run_parallel([["ping", "-c", "1", "-W", "2", "-t", str(ttl), fast.ipv4]
                            for ttl in range(1, len(expected) + 2)])
    for ttl, out in enumerate(outputs, start=1):
        if ttl <= len(expected):
            assert f"From {expected[ttl - 1]} icmp_seq=1 Time to live exceeded" in out, (ttl, out)
        else:
            assert ping_summary(out)["received"] == 1, out
    out6 = agent_exec(["ping", "-6", "-c", "1", "-W", "2", "-t", "3", fast.ipv6]).stdout
    assert f"From {fast.hops6[1]} icmp_seq=1 Time exceeded" in out6, out6


def mtr_hubs(args: list[str]) -> list[dict[str, Any]]:
    proc = agent_exec(["mtr", "-n", "--json", "-c", "4", "-i", "0.1", "--gracetime", "1", *args], check=True)
    hubs: list[dict[str, Any]] = json.loads(proc.stdout)["report"]["hubs"]
    return hubs


@pytest.mark.lab
@pytest.mark.parametrize("family", ["-4", "-6"])
def test_mtr_sees_the_hops_in_order(lab: LabState, family: str) -> None:
    fast = lab.routes["fast"]
    v4 = family == "-4"
    hubs = mtr_hubs([family, fast.ipv4 if v4 else fast.ipv6])
    hosts = [h["host"] for h in hubs]
    assert hosts == [lab.isp_ipv4 if v4 else lab.isp_ipv6, *(fast.hops if v4 else fast.hops6),
                     fast.ipv4 if v4 else fast.ipv6]
    assert all(h["Loss%"] == 0 for h in hubs), hubs
    avgs = [h["Avg"] for h in hubs]
    assert avgs == sorted(avgs), avgs
    assert abs(avgs[-1] - fast.rtt_ms) <= RTT_TOLERANCE_MS


@pytest.mark.lab
def test_hop_loss_is_only_the_hops_own_replies(lab: LabState) -> None:
    route = lab.routes["ratelimited"]
    hubs = mtr_hubs(["-4", route.ipv4])
    by_host = {h["host"]: h for h in hubs}
    assert by_host[route.hops[0]]["Loss%"] == 0
    assert route.hops[1] not in by_host  # never answers: mtr shows "???"
    assert by_host[route.hops[2]]["Loss%"] == 0
    assert by_host[route.ipv4]["Loss%"] == 0


@pytest.mark.lab
def test_up_twice_is_an_error(lab: LabState, module_lab: Path) -> None:
    with pytest.raises(LabError, match="already up"):
        api.up(module_lab)
    assert api.current() == lab and lab.relay_alive()


@pytest.mark.lab
def test_cli_exec_and_status(lab: LabState) -> None:
    proc = subprocess.run(["netprobe", "lab", "exec", "--", "ping", "-c", "1", "-W", "2", "fast.lab"],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert "1 received" in proc.stdout
    proc = subprocess.run(["netprobe", "lab", "status", "--json"], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["routes"]["slow"]["ipv4"] == lab.routes["slow"].ipv4


@pytest.mark.lab
def test_down_leaves_nothing(spec_dir: Path) -> None:
    spec = {"routes": [{"id": "only", "datacenter": "solo", "line": "163", "rtt_ms": 4}]}
    with running_lab(spec) as state:
        pid = state.relay_pid
        assert agent_exec(["ping", "-c", "1", "-W", "2", "only.lab"]).returncode == 0
    assert api.current() is None
    assert not [n for n in os.listdir("/run/netns") if n.startswith("np-")]
    assert not Path(f"/proc/{pid}").exists() or not state.relay_alive()
    assert not Path("/etc/netns/np-agent").exists()
    api.down()  # idempotent
