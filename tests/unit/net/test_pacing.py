"""Paced sends (issue #10 point 3): target i of N starts at i·interval/N, and the ICMP engine's
per-family rate cap delays requests, in order, without dropping any. Engine tests use real sockets on
loopback; the CLI tests run `netprobe probe …` as a user does."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import socket
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest

from netprobe.agent.daemon import configure_context
from netprobe.config.agent import Config, parse_config
from netprobe.errors import ConfigError
from netprobe.net.pacing import BURST_SECONDS, DEFAULT_MAX_RATE, RateCap, launch_paced, offsets
from netprobe.net.resolve import Resolver
from netprobe.net.targets_file import MAX_TARGETS
from netprobe.probes.base import ProbeContext
from netprobe.probes.icmp.engine import IcmpEngine

root = pytest.mark.skipif(os.geteuid() != 0, reason="raw ICMP sockets need root")


def loopback(n: int) -> list[str]:
    """n distinct loopback addresses (every 127/8 address answers)."""
    return [f"127.0.{i // 250}.{i % 250 + 1}" for i in range(n)]


def cli(*args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "netprobe.cli", *args], capture_output=True, text=True,
                          timeout=timeout)


# --- the schedule ---------------------------------------------------------------------------------

def test_offsets_are_i_interval_over_n() -> None:
    assert offsets(4, 1.0) == [0.0, 0.25, 0.5, 0.75]
    got = offsets(1000, 1.0)
    assert got[0] == 0.0 and got[999] == pytest.approx(0.999)
    assert all(b - a == pytest.approx(0.001) for a, b in itertools.pairwise(got))


async def test_launch_paced_starts_each_target_at_its_offset() -> None:
    loop = asyncio.get_running_loop()
    started: dict[int, float] = {}

    async def start(i: int) -> int:
        started[i] = loop.time()
        return i

    t0 = loop.time()
    tasks = await launch_paced(list(range(50)), 0.5, start)
    assert [await t for t in tasks] == list(range(50))
    for i in range(50):
        # asyncio wakes sleepers to about a millisecond; a loaded CI machine later still
        assert -0.001 <= started[i] - (t0 + i * 0.5 / 50) <= 0.03, (i, started[i] - t0)


async def test_launch_paced_stops_launching_once_told() -> None:
    stop = asyncio.Event()

    async def start(i: int) -> int:
        if i == 3:
            stop.set()
        return i

    tasks = await launch_paced(list(range(20)), 0.2, start, stop=stop)
    await asyncio.gather(*tasks)
    assert len(tasks) < 20


# --- the token bucket -----------------------------------------------------------------------------

def test_rate_cap_never_exceeds_rate_plus_burst() -> None:
    cap = RateCap(1000.0, now_ns=0)
    assert cap.burst == 1000.0 * BURST_SECONDS
    sent = []
    for tick in range(0, 2_000_000_000, 5_000_000):  # 5 ms ticks for 2 s, always asking for more
        while cap.take(tick):
            sent.append(tick)
    assert len(sent) <= 1000 * 2 + cap.burst
    assert len(sent) >= 1000 * 2 - 5  # and it does let the full rate through
    for start in range(0, 2_000_000_000, 100_000_000):
        window = sum(start <= t < start + 100_000_000 for t in sent)
        assert window <= 100 + cap.burst


def test_rate_cap_says_when_the_next_send_is_allowed() -> None:
    cap = RateCap(100.0, now_ns=0)  # burst 1
    assert cap.take(0) and not cap.take(0)
    due = cap.next_ns(0)
    assert due == pytest.approx(10_000_000, abs=2)
    assert not cap.take(due - 1000) and cap.take(due)
    with pytest.raises(ValueError):
        RateCap(0.0)


# --- the engine's cap, through real sockets ---------------------------------------------------------

@root
async def test_engine_cap_delays_every_request_and_drops_none() -> None:
    rate, n, count, interval = 500.0, 100, 5, 0.05  # asks for 2,000 requests/s, gets 500
    engine = IcmpEngine(max_rate=rate)
    try:
        t0 = time.time_ns()
        outs = await asyncio.gather(*(engine.ping(a, count=count, interval=interval, timeout=1.0)
                                      for a in loopback(n)))
        took = (time.time_ns() - t0) / 1e9
        delayed = engine.delayed
    finally:
        engine.close()
    # no drops: every request went out and every one was answered
    assert all(o.sent == count and None not in o.samples for o in outs)
    assert delayed > 0
    sends = sorted(t for o in outs for t in o.sent_ns)
    assert len(sends) == n * count
    # the cap held: 500 requests need about a second, and no 100 ms carried more than its share
    assert took >= (n * count - rate * BURST_SECONDS) / rate - 0.05, took
    burst = rate * BURST_SECONDS
    for i, start in enumerate(sends):
        j = i
        while j < len(sends) and sends[j] < start + 100_000_000:
            j += 1
        assert j - i <= rate * 0.1 + burst + 1, (i, j - i)
    # each target's own requests stay in order and at least `interval` apart
    for o in outs:
        gaps = [(b - a) / 1e9 for a, b in zip(o.sent_ns, o.sent_ns[1:], strict=False)]
        assert all(g >= interval - 0.006 for g in gaps), gaps  # the engine's 5 ms batching


@root
async def test_engine_under_its_cap_delays_nothing() -> None:
    engine = IcmpEngine(max_rate=DEFAULT_MAX_RATE)
    try:
        # 50 targets at 10 Hz, started over one interval as the CLI starts them: 500/s, under 2,000/s
        tasks = await launch_paced(loopback(50), 0.1, lambda a: engine.ping(a, count=5, interval=0.1,
                                                                             timeout=1.0))
        outs = await asyncio.gather(*tasks)
        assert engine.delayed == 0
    finally:
        engine.close()
    assert all(None not in o.samples for o in outs)
    firsts = sorted(o.sent_ns[0] for o in outs)
    assert (firsts[-1] - firsts[0]) / 1e9 == pytest.approx(0.1 * 49 / 50, abs=0.02)


@root
async def test_engine_cap_change_applies_to_the_running_engine() -> None:
    engine = IcmpEngine(max_rate=100.0)
    try:
        engine.open_default()
        engine.set_max_rate(20.0)
        t0 = time.monotonic()
        outs = await asyncio.gather(*(engine.ping(a, count=1, interval=0.1, timeout=1.0)
                                      for a in loopback(10)))
        took = time.monotonic() - t0
    finally:
        engine.close()
    assert all(None not in o.samples for o in outs)
    assert took >= 9 / 20 - 0.05, took  # 10 requests at 20/s (a burst of 1)


# --- the CLI ----------------------------------------------------------------------------------------

@root
def test_cli_starts_target_i_at_i_interval_over_n(tmp_path: Path) -> None:
    n, interval = 40, 0.4
    path = tmp_path / "targets.txt"
    path.write_text("\n".join(loopback(n)) + "\n")
    proc = cli("probe", "icmp", "-f", str(path), "--count", "2", "--interval", str(interval),
               "--timeout", "0.5", "--json")
    assert proc.returncode == 0, proc.stderr
    results = json.loads(proc.stdout)["results"]
    assert [r["host"] for r in results] == loopback(n) and all(r["received"] == 2 for r in results)
    starts = [datetime.fromisoformat(r["started_at"].replace("Z", "+00:00")).timestamp() for r in results]
    for i, start in enumerate(starts):
        assert start - starts[0] == pytest.approx(i * interval / n, abs=0.03), i


def test_cli_tcp_starts_target_i_at_i_interval_over_n() -> None:
    with socket.create_server(("127.0.0.1", 0), backlog=512) as server:
        port = server.getsockname()[1]
        n, interval = 20, 0.4
        proc = cli("probe", "tcp", *[f"127.0.0.1:{port}"] * n, "--count", "2", "--interval", str(interval),
                   "--json")
    assert proc.returncode == 0, proc.stderr
    results = json.loads(proc.stdout)["results"]
    assert all(r["received"] == 2 for r in results)
    starts = [datetime.fromisoformat(r["started_at"].replace("Z", "+00:00")).timestamp() for r in results]
    for i, start in enumerate(starts):
        assert start - starts[0] == pytest.approx(i * interval / n, abs=0.03), i


@pytest.mark.parametrize("rate", ["0", "-5"])
def test_cli_rate_must_be_positive(rate: str) -> None:
    proc = cli("probe", "icmp", "127.0.0.1", "--count", "1", "--rate", rate)
    assert proc.returncode == 2
    assert "--rate" in proc.stderr and "greater than 0" in proc.stderr and "Traceback" not in proc.stderr


def test_cli_more_targets_than_the_limit_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "many.txt"
    path.write_text("\n".join(f"10.{i // 65536}.{i // 256 % 256}.{i % 256}" for i in range(MAX_TARGETS + 1)))
    proc = cli("probe", "icmp", "-f", str(path), "--count", "1")
    assert proc.returncode == 2
    assert f"{MAX_TARGETS + 1:,} given" in proc.stderr and f"at most {MAX_TARGETS:,}" in proc.stderr


@root
def test_cli_rate_too_low_warns_how_long_a_round_takes_and_proceeds(tmp_path: Path) -> None:
    # 10 targets at 5 Hz want 50 requests/s; capped at 10/s each target gets one per second
    proc = cli("probe", "icmp", *loopback(10), "--count", "2", "--interval", "0.2", "--timeout", "0.5",
               "--rate", "10", "--json")
    assert proc.returncode == 0, proc.stderr
    assert "warning: 10 targets every 0.2s need 50 requests/s but --rate 10 caps them" in proc.stderr
    assert "a request every 1s" in proc.stderr and "round takes about 2.4s instead of 0.9s" in proc.stderr
    results = json.loads(proc.stdout)["results"]
    assert all(r["sent"] == 2 and r["received"] == 2 for r in results)  # delayed, not dropped
    assert max(r["duration_ms"] for r in results) >= 900


# --- config -----------------------------------------------------------------------------------------

AGENT = """
[agent]
id = "a1"
region = "cn-east"
isp = "telecom"
timezone = "Asia/Shanghai"
"""
TARGET = """
[[targets]]
id = "t1"
host = "192.0.2.1"
probes = ["icmp"]
"""


def test_config_max_rate_is_the_agents_cap() -> None:
    def agent_cap(config: Config) -> float | None:
        ctx = ProbeContext(resolver=Resolver())   # as the agent configures its shared context
        configure_context(ctx, config)
        return ctx.icmp_max_rate

    assert agent_cap(parse_config(AGENT + TARGET)) == DEFAULT_MAX_RATE
    config = parse_config(AGENT + "[probes.icmp]\nmax_rate = 500\n" + TARGET)
    assert agent_cap(config) == 500.0


def test_config_max_rate_bad_values_and_per_target_override_are_named() -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(AGENT + "[probes.icmp]\nmax_rate = 0\n" + TARGET)
    assert any(p.startswith("probes.icmp.max_rate") for p in err.value.problems), err.value.problems
    with pytest.raises(ConfigError) as err:
        parse_config(AGENT + TARGET + "[targets.icmp]\nmax_rate = 100\n")
    assert any(p.startswith("targets[0].icmp.max_rate") and "[probes.icmp]" in p for p in err.value.problems)


def test_bench_reads_fping_per_target_summaries() -> None:
    """bench/icmp_scale.py --user-path compares with fping -c -q's per-target lines."""
    import importlib.util

    path = Path(__file__).parents[3] / "bench" / "icmp_scale.py"
    spec = importlib.util.spec_from_file_location("icmp_scale", path)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    text = ("198.19.0.1 : xmt/rcv/%loss = 30/30/0%, min/avg/max = 8.01/8.05/8.12\n"
            "198.19.0.2  : xmt/rcv/%loss = 30/29/3%, min/avg/max = 8.02/8.10/9.00\n"
            "198.19.0.3 : xmt/rcv/%loss = 30/0/100%\n"
            "ICMP Host Unreachable from 198.18.0.2 for ICMP Echo sent to 198.19.0.9\n")
    assert bench.parse_fping_summary(text) == {"198.19.0.1": (30, 30, 8.05), "198.19.0.2": (30, 29, 8.10),
                                               "198.19.0.3": (30, 0, None)}
    assert bench._pctl([1.0, 2.0, 3.0, 4.0], 0.5) == 2.5
    assert bench._pctl([1.0, 2.0], 0.95) == pytest.approx(1.95)


@root
async def test_agent_rounds_falling_due_together_stay_under_the_cap() -> None:
    """Many agent rounds at once (start-up, a reload) go through the one engine: its cap holds, a
    reload's new cap applies to the running engine, and no request is dropped."""
    from netprobe.agent.scheduler import ProbeScheduler
    from netprobe.net.resolve import Resolver
    from netprobe.probes import ProbeContext, ProbeTarget
    from netprobe.probes.icmp.runtime import IcmpSettings

    ctx = ProbeContext(resolver=Resolver(), icmp_max_rate=2000.0)
    sched = ProbeScheduler(ctx, lambda target, result: None)
    ctx.set_icmp_max_rate(200.0)  # as Agent._reload does with the new [probes.icmp] max_rate
    settings = IcmpSettings(every=30, count=2, interval=0.05, timeout=1.0)
    try:
        t0 = time.monotonic()
        results = await asyncio.gather(*(sched.run_once(ProbeTarget(id=a, host=a), "icmp", settings)
                                         for a in loopback(100)))
        took = time.monotonic() - t0
        assert ctx.icmp_engine().delayed > 0
    finally:
        await ctx.close()
    assert all(r.status == "ok" and r.received == 2 for r in results), [r.error for r in results][:3]
    assert took >= (200 - 200 * BURST_SECONDS) / 200 - 0.05, took  # 200 requests at 200/s
