"""ProbeScheduler on a real APScheduler and a real event loop, driven by fake probes that sleep."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

import netprobe.agent.scheduler as scheduler_mod
from netprobe.agent.scheduler import ProbeScheduler, spread_offset
from netprobe.errors import SetupError
from netprobe.net.resolve import Resolver
from netprobe.probes import REGISTRY, ProbeContext, ProbeSettings, ProbeTarget
from netprobe.probes.base import ProbeSpec
from netprobe.probes.results import ProbeResult
from netprobe.times import utc_now
from tests.support.scheduler import job_ids

A = ProbeTarget(id="a", host="127.0.0.1")
B = ProbeTarget(id="b", host="127.0.0.2")
C = ProbeTarget(id="c", host="127.0.0.3")


class FakeProbe:
    """Sleeps `duration` whatever its settings say (it ignores its own bound) and records what it saw."""

    def __init__(self, name: str, duration: float = 0.0, crash: bool = False) -> None:
        self.name = name
        self.duration = duration
        self.crash = crash
        self.calls: list[tuple[str, ProbeSettings]] = []
        self.starts: list[float] = []
        self.ends: list[float] = []
        self.active = 0
        self.max_active = 0
        self.cancelled = 0
        self.started = asyncio.Event()

    def register(self, monkeypatch: pytest.MonkeyPatch) -> FakeProbe:
        monkeypatch.setitem(REGISTRY, self.name, ProbeSpec(self.name, ProbeSettings, self.run))
        return self

    async def run(self, target: ProbeTarget, settings: Any, ctx: ProbeContext) -> ProbeResult:
        self.calls.append((target.id, settings))
        self.starts.append(time.monotonic())
        self.active += 1
        self.max_active = max(self.max_active, self.active)
        self.started.set()
        try:
            await asyncio.sleep(self.duration)
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        finally:
            self.active -= 1
            self.ends.append(time.monotonic())
        if self.crash:
            raise RuntimeError("fake probe bug")
        return ProbeResult(probe=self.name, host=target.host, started_at=utc_now(), status="ok")


class Harness:
    """A started scheduler whose results land in `results` with the time they arrived."""

    def __init__(self) -> None:
        self.results: list[tuple[ProbeTarget, ProbeResult, float]] = []
        self.drained = False
        self.sched = ProbeScheduler(ProbeContext(resolver=Resolver()), self.on_result)

    def on_result(self, target: ProbeTarget, result: ProbeResult) -> None:
        self.results.append((target, result, time.monotonic()))

    async def drain(self, grace: float) -> int:
        self.drained = True
        return await self.sched.drain(grace)


@pytest.fixture
async def harness() -> AsyncIterator[Harness]:
    h = Harness()
    h.sched.start()
    yield h
    if not h.drained:
        await h.sched.drain(0.2)
    await asyncio.sleep(0.05)  # AsyncIOScheduler.shutdown() takes effect in a loop callback


async def until(cond: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.02)
    return True


def apscheduler_errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name.startswith("apscheduler") and r.levelno >= logging.ERROR]


# 1. spread_offset


def test_spread_offset_is_stable_and_in_range() -> None:
    for job_id in ("hk-cn2:icmp", "a:tcp", "", "ü:x"):
        first = spread_offset(job_id, 60.0)
        assert spread_offset(job_id, 60.0) == first
        assert 0.0 <= first < 60.0
        assert spread_offset(job_id, 120.0) == pytest.approx(2 * first)  # same phase of any interval
    assert spread_offset("a:icmp", 60.0) != spread_offset("b:icmp", 60.0)


def test_spread_offset_survives_a_restart() -> None:
    """Not Python's salted hash(): another process with another hash seed gets the same offsets."""
    ids = ["hk-cn2:icmp", "fra-1:tcp", "x:y"]
    code = ("import sys; from netprobe.agent.scheduler import spread_offset; "
            "print(repr([spread_offset(i, 60.0) for i in sys.argv[1:]]))")
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run([sys.executable, "-c", code, *ids], env=env, capture_output=True, text=True,
                         check=True, timeout=30).stdout
    assert out.strip() == repr([spread_offset(i, 60.0) for i in ids])


def test_spread_offset_spreads_job_ids_uniformly() -> None:
    every = 60.0
    buckets = [0] * 10
    for i in range(1000):
        off = spread_offset(f"target-{i}:icmp", every)
        assert 0.0 <= off < every
        buckets[int(off / every * 10)] += 1
    assert all(60 <= n <= 140 for n in buckets), buckets


# 2. set_jobs / reload


async def test_set_jobs_one_job_per_target_probe_and_reload(
        harness: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeProbe("fake").register(monkeypatch)
    fake2 = FakeProbe("fake2").register(monkeypatch)
    slow = ProbeSettings(every=60.0)
    harness.sched.set_jobs([(A, "fake", slow), (B, "fake", slow), (A, "fake2", slow)])
    assert job_ids(harness.sched) == ["a:fake", "a:fake2", "b:fake"]

    # Reload: b:fake and a:fake2 go, c:fake comes, a:fake stays with new settings.
    fast = ProbeSettings(every=0.2)
    harness.sched.set_jobs([(A, "fake", fast), (C, "fake", fast)])
    assert job_ids(harness.sched) == ["a:fake", "c:fake"]
    fake.calls.clear()
    fake2.calls.clear()

    def ran(tid: str) -> int:
        return sum(1 for t, _ in fake.calls if t == tid)

    # With every=60 the kept job would not run twice in the window: runs prove the new settings apply.
    assert await until(lambda: ran("a") >= 2 and ran("c") >= 2, timeout=5.0), fake.calls
    assert {t for t, _ in fake.calls} == {"a", "c"}
    assert all(s is fast for _, s in fake.calls)
    assert fake2.calls == []

    # Setting the same set again neither duplicates nor drops anything.
    harness.sched.set_jobs([(A, "fake", fast), (C, "fake", fast)])
    assert job_ids(harness.sched) == ["a:fake", "c:fake"]
    harness.sched.set_jobs([])
    assert job_ids(harness.sched) == []


# 3. no pile-up


async def test_slow_probe_never_piles_up(harness: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    slow = FakeProbe("fake", duration=0.5).register(monkeypatch)
    harness.sched.set_jobs([(A, "fake", ProbeSettings(every=0.2))])
    await asyncio.sleep(1.5)
    assert slow.max_active == 1
    assert len(slow.calls) <= 4  # each run holds the only slot for 0.5 s
    assert harness.sched.skipped > 0
    assert len(harness.results) >= 1
    assert all(r.status == "ok" for _, r, _ in harness.results)
    # runs never overlap: each starts after the previous one ended
    assert all(start >= end for start, end in zip(slow.starts[1:], slow.ends, strict=False))


async def test_due_runs_go_straight_from_the_timer_without_a_thread_safe_wakeup(
        harness: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every run is due on the scheduler's own loop timer: no self-pipe hop (call_soon_threadsafe) per run,
    each run on its interval, and the instance slot freed when a run ends (max_instances=1)."""
    fast = FakeProbe("fake", duration=0.01).register(monkeypatch)
    loop = asyncio.get_running_loop()
    hops = 0
    threadsafe = loop.call_soon_threadsafe

    def counting(*args: Any, **kwargs: Any) -> Any:
        nonlocal hops
        hops += 1
        return threadsafe(*args, **kwargs)

    harness.sched.set_jobs([(A, "fake", ProbeSettings(every=0.1)), (B, "fake", ProbeSettings(every=0.1))])
    await until(lambda: len(fast.calls) >= 2, 1.0)
    monkeypatch.setattr(loop, "call_soon_threadsafe", counting)
    first = len(fast.calls)
    await asyncio.sleep(1.0)
    runs = len(fast.calls) - first
    assert 16 <= runs <= 22, runs               # two jobs every 0.1 s for 1 s
    assert hops == 0
    assert harness.sched.skipped == 0           # each 10 ms run gave its slot back before the next
    assert {t for t, _ in fast.calls} == {"a", "b"}


# 4. the scheduler owns the timeout


async def test_scheduler_cancels_a_probe_that_ignores_its_bound(
        harness: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scheduler_mod, "TIMEOUT_SLACK", 0.2)
    stuck = FakeProbe("fake", duration=30.0).register(monkeypatch)
    settings = ProbeSettings(every=0.5, timeout=0.1)
    harness.sched.set_jobs([(A, "fake", settings)])
    assert await until(lambda: len(harness.results) >= 1, timeout=5.0)
    target, result, got_at = harness.results[0]
    assert target == A
    assert result.status == "error"
    assert result.error_kind == "timeout"
    assert result.probe == "fake" and result.host == A.host
    assert result.error is not None and "0.3" in result.error
    assert stuck.cancelled >= 1  # the probe saw CancelledError, i.e. it was really stopped
    waited = got_at - stuck.starts[0]
    assert 0.25 <= waited < 2.0, waited  # round_seconds() 0.1 + slack 0.2, not the probe's 30 s


async def test_run_once_turns_an_overrun_into_an_error_result(
        harness: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scheduler_mod, "TIMEOUT_SLACK", 0.1)
    stuck = FakeProbe("fake", duration=30.0).register(monkeypatch)
    t0 = time.monotonic()
    result = await harness.sched.run_once(A, "fake", ProbeSettings(every=60.0, timeout=0.1))
    assert time.monotonic() - t0 < 2.0
    assert (result.status, result.error_kind) == ("error", "timeout")
    assert stuck.cancelled == 1


async def test_a_setup_problem_of_one_target_is_that_targets_data(
        harness: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    """E.g. an IPv6 target on a host without IPv6: an error result for it, not a crash per round."""

    async def no_ipv6(target: ProbeTarget, settings: ProbeSettings, ctx: ProbeContext) -> ProbeResult:
        raise SetupError("this host has no IPv6 support")

    spec = ProbeSpec(name="v6only", settings_model=ProbeSettings, run=no_ipv6)
    monkeypatch.setitem(REGISTRY, "v6only", spec)
    result = await harness.sched.run_once(A, "v6only", ProbeSettings(every=60.0, timeout=0.5))
    assert (result.status, result.error_kind) == ("error", "setup")
    assert result.error is not None and "IPv6" in result.error


# 5. drain


async def test_drain_lets_a_round_within_grace_finish(
        harness: Harness, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="apscheduler")
    probe = FakeProbe("fake", duration=0.5).register(monkeypatch)
    harness.sched.set_jobs([(A, "fake", ProbeSettings(every=0.3))])
    await asyncio.wait_for(probe.started.wait(), timeout=5.0)
    assert await harness.drain(grace=3.0) == 0
    assert probe.cancelled == 0
    assert len(harness.results) == 1
    assert harness.results[0][1].status == "ok"
    runs = len(probe.calls)
    await asyncio.sleep(0.7)  # paused then shut down: nothing new starts
    assert len(probe.calls) == runs
    assert apscheduler_errors(caplog) == []


async def test_drain_cancels_a_round_that_outlasts_grace(
        harness: Harness, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="apscheduler")
    probe = FakeProbe("fake", duration=30.0).register(monkeypatch)
    harness.sched.set_jobs([(A, "fake", ProbeSettings(every=0.3))])
    await asyncio.wait_for(probe.started.wait(), timeout=5.0)
    t0 = time.monotonic()
    assert await harness.drain(grace=0.3) == 1
    assert time.monotonic() - t0 < 2.0
    assert probe.cancelled == 1
    assert harness.results == []  # a cancelled round is not a result
    await asyncio.sleep(0.3)  # let the executor's done-callbacks and the shutdown run
    assert apscheduler_errors(caplog) == []
    assert not any("raised an exception" in r.getMessage() for r in caplog.records)


async def test_drain_with_nothing_in_flight(harness: Harness) -> None:
    assert await harness.drain(grace=1.0) == 0


# 6. a crashing probe


async def test_crashing_probe_does_not_stop_the_others(
        harness: Harness, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="apscheduler")
    caplog.set_level(logging.INFO, logger="netprobe.scheduler")
    good = FakeProbe("fake").register(monkeypatch)
    bad = FakeProbe("boom", crash=True).register(monkeypatch)
    fast = ProbeSettings(every=0.2)
    harness.sched.set_jobs([(A, "boom", fast), (B, "fake", fast)])
    assert await until(lambda: len(bad.calls) >= 3 and len(harness.results) >= 3, timeout=5.0)
    assert {r.probe for _, r, _ in harness.results} == {"fake"}
    assert len(good.calls) >= 3
    crashed = [r for r in caplog.records
               if r.name == "netprobe.scheduler" and "probe crashed" in r.getMessage()]
    assert crashed and all(r.levelno == logging.ERROR and (r.exc_info or r.exc_text) for r in crashed)
    assert apscheduler_errors(caplog) == []
    assert job_ids(harness.sched) == ["a:boom", "b:fake"]  # the crashing job is still scheduled
