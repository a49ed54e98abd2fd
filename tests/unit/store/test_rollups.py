"""Hourly DDSketch rollups: merged hours (and agents) give quantiles within ~1 % of the raw data."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from netprobe.store import Rollup, open_store
from netprobe.store import sketch as sketches
from netprobe.store.envelopes import parse_envelope
from tests.support.store import icmp_envelope, merge_hours, typed, window_stats

T0 = datetime(2026, 11, 20, 0, 0, tzinfo=UTC)
# DDSketch guarantees 1 % on the value at a rank; NumPy interpolates between neighbouring ranks,
# which adds at most the gap between two order statistics (tiny with thousands of samples).
TOLERANCE = 0.011


def _lognormal_rounds(seed: int, hours: int, agents: list[str], per_hour: int,
                      count: int) -> list[dict[str, object]]:
    rng = np.random.default_rng(seed)
    envs = []
    for h in range(hours):
        for agent in agents:
            # an evening-peak-like shift of the median keeps hours unlike each other
            median = 40.0 * (1.6 if 20 <= h % 24 < 23 else 1.0) * (1.3 if agent.endswith("2") else 1.0)
            for r in range(per_hour):
                rtts = rng.lognormal(np.log(median), 0.35, size=count)
                samples: list[float | None] = [float(v) if rng.random() > 0.02 else None for v in rtts]
                ts = T0 + timedelta(hours=h, seconds=r * 3600 // per_hour)
                envs.append(icmp_envelope(ts, samples, agent=agent))
    return envs


def _raw(envs: list[dict[str, object]]) -> np.ndarray:
    return np.array([s for e in envs for s in e["result"]["samples_ms"]  # type: ignore[index]
                     if s is not None])


async def test_window_quantiles_across_hours_and_agents_match_raw_data(tmp_path: Path) -> None:
    envs = _lognormal_rounds(seed=7, hours=36, agents=["sh-ct-1", "bj-cu-2"], per_hour=12, count=20)
    store = await open_store(f"sqlite:///{tmp_path / 'r.db'}")
    try:
        for i in range(0, len(envs), 200):
            await store.write(typed(envs[i:i + 200]))
        start, end = T0, T0 + timedelta(hours=36)
        stats = await window_stats(store, None, "hk-cn2", "icmp", start, end)
        one_agent = await window_stats(store, "bj-cu-2", "hk-cn2", "icmp", start, end)
        peak = await window_stats(store, None, "hk-cn2", "icmp", start, end,
                                  hours=lambda h: 20 <= h.hour < 23)
    finally:
        await store.close()

    raw = _raw(envs)
    assert stats is not None and stats.hours == 72 and stats.samples == raw.size
    for q, got in ((50, stats.rtt_p50_ms), (95, stats.rtt_p95_ms), (99, stats.rtt_p99_ms)):
        exact = float(np.percentile(raw, q))
        assert got == pytest.approx(exact, rel=TOLERANCE), f"p{q}"
    assert stats.rtt_min_ms == raw.min() and stats.rtt_max_ms == raw.max()
    assert stats.rtt_avg_ms == pytest.approx(raw.mean(), rel=1e-9)

    raw_b = _raw([e for e in envs if e["agent"]["id"] == "bj-cu-2"])  # type: ignore[index]
    assert one_agent is not None and one_agent.samples == raw_b.size
    assert one_agent.rtt_p95_ms == pytest.approx(float(np.percentile(raw_b, 95)), rel=TOLERANCE)

    raw_peak = _raw([e for e in envs if 20 <= datetime.fromisoformat(e["started_at"]).hour < 23])  # type: ignore[arg-type]
    assert peak is not None and peak.hours == 3 * 2      # 20-23 h of day 1 only (36 h span), 2 agents
    assert peak.rtt_p50_ms == pytest.approx(float(np.percentile(raw_peak, 50)), rel=TOLERANCE)


def test_merging_hours_equals_one_sketch_of_everything() -> None:
    envs = [parse_envelope(e) for e in _lognormal_rounds(seed=3, hours=10, agents=["a1"], per_hour=6,
                                                          count=50)]
    whole = Rollup()
    hours: dict[int, Rollup] = {}
    for env in envs:
        whole.add(env)
        hours.setdefault(env.started_at.hour, Rollup()).add(env)
    merged = Rollup()
    for part in hours.values():
        # through the stored form, as the database keeps it
        merged.merge(Rollup.from_row(part.to_row()))
    for q in (0.0, 0.25, 0.5, 0.9, 0.95, 0.99, 1.0):
        assert merged.quantile(q) == whole.quantile(q)
    assert merged.figures() == pytest.approx(whole.figures())


def test_sketch_serialisation_round_trips() -> None:
    rng = np.random.default_rng(11)
    sk = sketches.new_sketch()
    for v in rng.lognormal(3.5, 0.8, size=5000):
        sk.add(float(v))
    sk.add(0.0)                                   # zero bucket survives too
    back = sketches.loads(sketches.dumps(sk))
    assert back.count == sk.count and back.sum == pytest.approx(sk.sum)
    for q in (0.0, 0.01, 0.5, 0.95, 0.999, 1.0):
        assert back.get_quantile_value(q) == sk.get_quantile_value(q)
    assert len(sketches.dumps(sk)) < 4000         # a few hundred bins, not thousands of samples
    empty = sketches.loads(sketches.dumps(sketches.new_sketch()))
    assert empty.count == 0


def test_merge_hours_of_nothing_is_none() -> None:
    assert merge_hours([]) is None


def _sse_envelope(ts: datetime, first: float, gap_p95: float, stalls: int, seconds: float,
                  delay_p95: float, status: str = "ok", mode: str = "emitter", ttfb: float | None = None,
                  tpot: float | None = None) -> dict[str, object]:
    from netprobe.probes.results import envelope
    from netprobe.probes.sse.runtime import SseResult
    from tests.support.store import AGENT, TARGET

    result = SseResult(probe="sse", host="h", started_at=ts, status=status,  # type: ignore[arg-type]
                       first_event_ms=first, mode=mode, ttfb_ms=ttfb, tpot_ms=tpot,
                       gaps_ms={"p50": 20.0, "p95": gap_p95, "p99": gap_p95, "max": 900.0},
                       stalls=stalls, duration_s=seconds, delay_var_ms={"p50": 0.5, "p95": delay_p95},
                       sent=1, received=int(status == "ok"), loss_pct=0.0 if status == "ok" else 100.0,
                       samples_ms=[first] if status == "ok" else [])
    return envelope(result, AGENT, TARGET)


async def test_sse_streams_roll_up_first_event_gap_stalls_and_delay(tmp_path: Path) -> None:
    """First-event percentiles from the sketch; gap p95 and delay-variation p95 as means over streams;
    stalls per minute of streamed time — through the real store, merged across hours."""
    envs = [_sse_envelope(T0, 100.0, 30.0, 1, 60.0, 2.0),
            _sse_envelope(T0 + timedelta(minutes=5), 140.0, 50.0, 3, 30.0, 4.0),
            _sse_envelope(T0 + timedelta(hours=1), 120.0, 40.0, 0, 30.0, 3.0),
            _sse_envelope(T0 + timedelta(hours=1, minutes=5), 999.0, 999.0, 9, 9.0, 99.0, status="down")]
    store = await open_store(f"sqlite:///{tmp_path / 'r.db'}")
    try:
        await store.write(typed(envs))
        window = await window_stats(store, None, None, "sse", T0, T0 + timedelta(hours=2))
    finally:
        await store.close()
    assert window is not None and window.rounds == 4 and window.error_rounds == 1
    assert window.rtt_p50_ms == pytest.approx(120.0, rel=0.011)       # first event, ok streams only
    assert window.gap_p95_ms == pytest.approx(40.0)                     # (30 + 50 + 40) / 3
    assert window.delay_var_p95_ms == pytest.approx(3.0)
    assert window.delay_var_p50_ms == pytest.approx(0.5)
    assert window.stalls_per_min == pytest.approx(4 / 2.0)              # 4 stalls in 120 s of streams
    assert window.loss_pct == 25.0
    assert window.server_first_ms is None and window.tpot_ms is None   # emitter streams: no GPU figures


def test_openai_streams_roll_up_the_servers_first_token_and_tpot() -> None:
    """The server's share of the first token is first event − response headers (the network's round
    trip is in both); TPOT the mean over streams."""
    rollup = Rollup()
    for first, ttfb, tpot in ((400.0, 100.0, 20.0), (500.0, 120.0, 30.0)):
        rollup.add(parse_envelope(_sse_envelope(T0, first, 40.0, 0, 10.0, 2.0, mode="openai", ttfb=ttfb,
                                                tpot=tpot)))
    figures = rollup.figures()
    assert figures["server_first_ms"] == pytest.approx((300.0 + 380.0) / 2)
    assert figures["tpot_ms"] == pytest.approx(25.0)


def test_a_first_event_read_with_the_headers_gives_no_server_time() -> None:
    """An agent that reads late (a stalled host) gets the headers and the first token in one read,
    stamped alike: the server's time is then unknown, not 0. Counted as 0 (10 µs in the log moments),
    such streams had dragged a demo's fitted server time from ~150 ms to 14 ms."""
    rollup = Rollup()
    for first, ttfb in ((400.0, 100.0), (250.0, 250.0), (500.0, 120.0)):
        rollup.add(parse_envelope(_sse_envelope(T0, first, 40.0, 0, 10.0, 2.0, mode="openai", ttfb=ttfb,
                                                tpot=20.0)))
    figures = rollup.figures()
    assert figures["server_first_ms"] == pytest.approx((300.0 + 380.0) / 2)
    assert figures["server_first_ln_mean"] == pytest.approx((math.log(300.0) + math.log(380.0)) / 2)
    assert figures["tpot_ms"] == pytest.approx(20.0)
