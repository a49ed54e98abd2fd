"""A generated dataset for the peak-report tests (no tests here): real envelopes via netprobe.probes.results,
hourly rounds whose RTT and loss depend on the agent's *local* hour, with a known evening peak.

Local time here is worked out by hand (fixed offsets, Berlin's 2026 DST dates), not with zoneinfo, so
the tests do not check the report's time-zone code against itself."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

from netprobe.net.lines import RouteVerdict
from netprobe.probes.icmp.runtime import IcmpResult
from netprobe.probes.mtr.runtime import MtrResult
from netprobe.probes.results import envelope
from netprobe.probes.sse.runtime import SseResult
from netprobe.probes.tcp.runtime import TcpResult
from netprobe.stats import jitter, loss_pct, rtt_stats
from netprobe.store import open_store
from tests.support.store import typed

if TYPE_CHECKING:
    from netprobe.report.peak import PeakReport
    from netprobe.report.rows import WindowFigures
    from netprobe.store.rollups import Rollup

NOW = datetime(2026, 3, 30, 10, 0, tzinfo=UTC)      # Berlin moved to CEST on 2026-03-29 at 01:00 UTC
BERLIN_SPRING = datetime(2026, 3, 29, 1, 0, tzinfo=UTC)
BERLIN_AUTUMN = datetime(2026, 10, 25, 1, 0, tzinfo=UTC)

AGENTS: dict[str, dict[str, Any]] = {
    "sh-ct-1": {"id": "sh-ct-1", "region": "cn-east", "isp": "telecom", "timezone": "Asia/Shanghai"},
    "fra-dt-1": {"id": "fra-dt-1", "region": "eu-de", "isp": "dtag", "timezone": "Europe/Berlin"},
}
TARGETS: dict[str, dict[str, Any]] = {
    "hk-cn2": {"id": "hk-cn2", "host": "hk1.example.net", "datacenter": "hk", "line": "cn2-gia"},
    "hk-bgp": {"id": "hk-bgp", "host": "hk2.example.net", "datacenter": "hk", "line": "bgp"},
    "us-cn2": {"id": "us-cn2", "host": "us1.example.net", "datacenter": "us-west", "line": "cn2-gia"},
    "us-163": {"id": "us-163", "host": "us2.example.net", "datacenter": "us-west", "line": "163"},
    "tyo-cn2": {"id": "tyo-cn2", "host": "tyo1.example.net", "datacenter": "tyo", "line": "cn2-gia"},
}


@dataclass(frozen=True)
class Profile:
    median_ms: float        # off-peak median RTT at local hour 0
    peak_factor: float      # RTT multiplier 20:00–23:00 local
    loss: float             # probability a request is lost, off peak
    peak_loss: float        # … in the evening peak


# hk-bgp: low RTT but congested at peak, so the loss penalty ranks it below us-cn2
PROFILES = {
    "hk-cn2": Profile(35.0, 1.15, 0.0005, 0.001),
    "hk-bgp": Profile(45.0, 1.4, 0.002, 0.015),
    "us-cn2": Profile(130.0, 1.1, 0.0003, 0.0005),
    "us-163": Profile(180.0, 1.7, 0.003, 0.02),
    "tyo-cn2": Profile(55.0, 1.2, 0.001, 0.004),
}
ICMP_TARGETS = ("hk-cn2", "hk-bgp", "us-cn2", "us-163")
MTR_ONLY = "tyo-cn2"                       # no icmp: RTT figures from the mtr destination
WORST = ("sh-ct-1", "hk-cn2", datetime(2026, 3, 27, 13, 0, tzinfo=UTC))   # 21:00 Shanghai: 30 % loss
ROUNDS_PER_HOUR = 3
COUNT = 20


def offset(agent: str, ts: datetime) -> timedelta:
    """The agent's UTC offset at `ts`, by hand."""
    tz = AGENTS[agent]["timezone"]
    if tz == "Asia/Shanghai":
        return timedelta(hours=8)
    assert tz == "Europe/Berlin"
    return timedelta(hours=2 if BERLIN_SPRING <= ts < BERLIN_AUTUMN else 1)


def local(agent: str, ts: datetime) -> datetime:
    """Naive local wall-clock time."""
    return (ts + offset(agent, ts)).replace(tzinfo=None)


def is_peak(hour: int) -> bool:
    return 20 <= hour < 23


def median(target: str, local_hour: int) -> float:
    p = PROFILES[target]
    # a gentle climb over the day keeps every hour unlike its neighbours
    return p.median_ms * (1 + 0.015 * local_hour) * (p.peak_factor if is_peak(local_hour) else 1.0)


def _samples(rng: np.random.Generator, target: str, agent: str, ts: datetime, n: int) -> list[float | None]:
    h = local(agent, ts).hour
    p = PROFILES[target]
    lose = p.peak_loss if is_peak(h) else p.loss
    if (agent, target, ts.replace(minute=0)) == WORST:
        lose = 0.3
    rtts = rng.lognormal(np.log(median(target, h)), 0.15, size=n)
    return [float(v) if rng.random() >= lose else None for v in rtts]


def icmp(ts: datetime, agent: str, target: str, samples: list[float | None]) -> dict[str, Any]:
    got = [s for s in samples if s is not None]
    r = IcmpResult(probe="icmp", host=TARGETS[target]["host"], started_at=ts, address="198.18.0.2",
                   status="ok" if got else "down", sent=len(samples), received=len(got),
                   loss_pct=loss_pct(len(samples), len(got)), rtt_ms=rtt_stats(got),
                   jitter_ms=jitter(samples), samples_ms=samples)
    return envelope(r, AGENTS[agent], TARGETS[target])


def tcp(ts: datetime, agent: str, target: str, samples: list[float | None]) -> dict[str, Any]:
    got = [s for s in samples if s is not None]
    r = TcpResult(probe="tcp", host=TARGETS[target]["host"], started_at=ts, address="198.18.0.2",
                  status="ok" if got else "down", port=443, sent=len(samples), received=len(got),
                  loss_pct=loss_pct(len(samples), len(got)), connect_ms=rtt_stats(got),
                  jitter_ms=jitter(samples), samples_ms=samples,
                  failures={"timeout": len(samples) - len(got)} if len(got) < len(samples) else {})
    return envelope(r, AGENTS[agent], TARGETS[target])


def sse(ts: datetime, agent: str, target: str, first_ms: float, stalls: int,
        seconds: float) -> dict[str, Any]:
    r = SseResult(probe="sse", host=TARGETS[target]["host"], started_at=ts, status="ok", url="https://x/sse",
                  first_event_ms=first_ms, gaps_ms={"p50": 20.0, "p95": 40.0, "p99": 60.0, "max": 400.0},
                  stalls=stalls, duration_s=seconds, delay_var_ms={"p50": 1.0, "p95": 5.0}, events=100,
                  sent=1, received=1, loss_pct=0.0, samples_ms=[first_ms], completed=True)
    return envelope(r, AGENTS[agent], TARGETS[target])


def mtr(ts: datetime, agent: str, target: str, samples: list[float | None], label: str,
        digest: str) -> dict[str, Any]:
    got = [s for s in samples if s is not None]
    declared = TARGETS[target]["line"]
    r = MtrResult(probe="mtr", host=TARGETS[target]["host"], started_at=ts, address="198.18.0.9",
                  status="ok" if got else "down", cycles=len(samples), max_hops=30, reached=bool(got),
                  route=RouteVerdict(label=label, asns=[4809, 4134], hash=digest,
                                     path_loss_pct=loss_pct(len(samples), len(got)), declared_line=declared,
                                     mismatch=label != declared),
                  sent=len(samples), received=len(got), loss_pct=loss_pct(len(samples), len(got)),
                  rtt_ms=rtt_stats(got), jitter_ms=jitter(samples), samples_ms=samples)
    return envelope(r, AGENTS[agent], TARGETS[target])


def dataset(now: datetime = NOW, days: int = 12, agents: Sequence[str] = tuple(AGENTS),
            targets: Sequence[str] = ICMP_TARGETS, extras: bool = True,
            seed: int = 1) -> list[dict[str, Any]]:
    """Every hour of `days` days before `now`: icmp rounds per agent × target; with `extras`, also tcp and
    sse for hk-cn2, mtr traces for us-163 (route label 163) and for the mtr-only tyo-cn2 (cn2-gt)."""
    rng = np.random.default_rng(seed)
    envs: list[dict[str, Any]] = []
    hour = (now - timedelta(days=days)).replace(minute=0, second=0, microsecond=0)
    while hour < now:
        for agent in agents:
            for target in targets:
                for r in range(ROUNDS_PER_HOUR):
                    ts = hour + timedelta(minutes=5 + r * 60 // ROUNDS_PER_HOUR)
                    if ts < now:
                        envs.append(icmp(ts, agent, target, _samples(rng, target, agent, ts, COUNT)))
            if not extras:
                continue
            h = local(agent, hour).hour
            ts = hour + timedelta(minutes=15)
            if ts >= now:
                continue
            envs.append(tcp(ts, agent, "hk-cn2", _samples(rng, "hk-cn2", agent, ts, 5)))
            first = float(rng.lognormal(np.log(3 * median("hk-cn2", h)), 0.2))
            envs.append(sse(ts, agent, "hk-cn2", first, 2 if is_peak(h) else 0, 30.0))
            envs.append(mtr(ts, agent, MTR_ONLY, _samples(rng, MTR_ONLY, agent, ts, 10), "cn2-gt", "aa01"))
            if agent == "sh-ct-1":
                envs.append(mtr(ts, agent, "us-163", _samples(rng, "us-163", agent, ts, 10), "163", "bb02"))
        hour += timedelta(hours=1)
    return envs


def started(env: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(env["started_at"].replace("Z", "+00:00"))


def local_days(agent: str, days: int, now: datetime) -> tuple[date, date]:
    today = local(agent, now).date()
    return today - timedelta(days=days - 1), today


def selected(envs: Iterable[dict[str, Any]], agent: str, target: str, probe: str, hours: Iterable[int],
             days: int = 7, now: datetime = NOW) -> list[dict[str, Any]]:
    """The rounds the report should merge: the hour they fall in starts on one of the last `days` local
    days, at a local hour in `hours`, before `now`."""
    first, last = local_days(agent, days, now)
    wanted = set(hours)
    out = []
    for env in envs:
        if env["agent"]["id"] != agent or env["target"]["id"] != target or env["probe"] != probe:
            continue
        hour = started(env).replace(minute=0, second=0, microsecond=0)
        lt = local(agent, hour)
        if hour < now and first <= lt.date() <= last and lt.hour in wanted:
            out.append(env)
    return out


@dataclass(frozen=True)
class Expected:
    rounds: int
    samples: np.ndarray
    loss_pct: float | None
    jitter_ms: float | None

    def p(self, q: float) -> float:
        return float(np.percentile(self.samples, q))


def expected(envs: Sequence[dict[str, Any]]) -> Expected:
    values = np.array([s for e in envs for s in e["result"]["samples_ms"] if s is not None])
    sent = sum(e["result"]["sent"] for e in envs)
    received = sum(e["result"]["received"] for e in envs)
    jitters = [e["result"]["jitter_ms"] for e in envs if e["result"]["jitter_ms"] is not None]
    return Expected(rounds=len(envs), samples=values, loss_pct=loss_pct(sent, received) if sent else None,
                    jitter_ms=sum(jitters) / len(jitters) if jitters else None)


PEAK = range(20, 23)
OFFPEAK = range(3, 6)


async def slo_report(url: str) -> PeakReport:
    """The report of the store at `url` over 7 days at NOW, with every SLO figure the HTML draws."""
    from netprobe.budget.attainment import SloModel
    from netprobe.report.peak import compute
    from netprobe.report.slo import SloRequest

    store = await open_store(url)
    try:
        return await compute(store, days=7, now=NOW, slo=SloRequest(SloModel(1000), hours=True, curve=True))
    finally:
        await store.close()


async def write_all(url: str, envs: Sequence[dict[str, Any]], fold: bool = True) -> None:
    """Store `envs`; with `fold`, fold the prefix rollups too, as the agent's hourly job would, so the
    report reads them (not only the hourly rows)."""
    store = await open_store(url)
    try:
        for i in range(0, len(envs), 1000):
            await store.write(typed(envs[i:i + 1000]))
        if fold:
            stats = await store.fold_rollups()
            assert stats.rows > 0 and not stats.skipped
    finally:
        await store.close()


# DDSketch's guarantee: within 1 % of the sample at the quantile's rank. NumPy interpolates between the
# two samples around that rank, so the sketch is held to 1 % of that bracket (with ~1,000 samples the
# bracket is ~0.1 % wide).
ACCURACY = 0.01


def assert_quantile(got: float | None, samples: np.ndarray, q: float) -> None:
    """`got` within 1 % of the exact q-th percentile: of NumPy's value or the two samples it lies between."""
    s = np.sort(samples)
    pos = (s.size - 1) * q / 100
    lo, hi = float(s[int(np.floor(pos))]), float(s[int(np.ceil(pos))])
    assert got is not None
    assert lo * (1 - ACCURACY) <= got <= hi * (1 + ACCURACY), (
        f"p{q}: {got} not within 1 % of [{lo}, {hi}] (numpy {np.percentile(samples, q)})")


def _close(a: Any, b: Any, path: str = "") -> None:
    """Equal, floats to 1e-9 (sums may be added in another order)."""
    if isinstance(a, dict):
        assert set(a) == set(b), path
        for k in a:
            _close(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _close(x, y, f"{path}[{i}]")
    elif isinstance(a, float) and isinstance(b, float):
        assert a == pytest.approx(b, rel=1e-9), path
    else:
        assert a == b, path


def merged_rollup(w: WindowFigures) -> Rollup | None:
    """A window's merged RTT hours as a Rollup (sketch included)."""
    m = w.merged
    return m.sums.rollup(m.lo, m.hi) if m is not None else None
