"""The docs/numbers.md stream figures, against hand-computed cases, NumPy and a brute-force stall rule."""

from __future__ import annotations

import random

import numpy as np
import pytest

from netprobe.probes.sse.metrics import delay_variation, gap_summary, gaps, stalls, tpot


def test_gaps_between_consecutive_events() -> None:
    assert gaps([0.0, 10.0, 25.5, 25.5]) == [10.0, 15.5, 0.0]
    assert gaps([3.0]) == []
    assert gaps([]) == []


def test_gap_summary_hand_computed() -> None:
    # Sorted [10, 20, 30, 40, 50]: p95 at rank 3.8 → 40 + 0.8·10, p99 at rank 3.96.
    assert gap_summary([50.0, 10.0, 40.0, 20.0, 30.0]) == pytest.approx(
        {"p50": 30.0, "p95": 48.0, "p99": 49.6, "max": 50.0})
    assert gap_summary([7.0]) == {"p50": 7.0, "p95": 7.0, "p99": 7.0, "max": 7.0}
    assert gap_summary([]) is None


def test_gap_summary_matches_numpy() -> None:
    rng = random.Random(3)
    values = [rng.lognormvariate(3.0, 0.6) for _ in range(997)]
    got = gap_summary(values)
    assert got is not None
    for q in (50, 95, 99):
        assert got[f"p{q}"] == pytest.approx(float(np.percentile(values, q)), rel=1e-12)
    assert got["max"] == max(values)


def test_a_single_pause_in_a_steady_stream_is_exactly_one_stall() -> None:
    times = [20.0 * i for i in range(100)]
    times = times[:50] + [t + 1000.0 for t in times[50:]]  # one 1 s pause between events 49 and 50
    count, total = stalls(gaps(times))
    assert count == 1
    assert total == pytest.approx(1020.0)


def test_stall_thresholds_absolute_and_relative() -> None:
    # Steady 100 ms: k × median = 400 ms is above the absolute 250 ms, so it is the threshold.
    assert stalls([100.0] * 10 + [399.0]) == (0, 0.0)
    assert stalls([100.0] * 10 + [401.0]) == (1, 401.0)
    # Steady 20 ms: the absolute threshold rules.
    assert stalls([20.0] * 10 + [250.0]) == (0, 0.0)
    assert stalls([20.0] * 10 + [251.0]) == (1, 251.0)
    # The first gap has no history: only the absolute threshold applies.
    assert stalls([300.0, 300.0]) == (1, 300.0)
    assert stalls([], abs_ms=1.0) == (0, 0.0)


def test_a_stall_does_not_raise_its_own_threshold() -> None:
    # With the 1000 ms gap in its own median (550 ms → 2200 ms threshold) it would hide itself.
    assert stalls([100.0, 1000.0]) == (1, 1000.0)


def test_running_median_uses_the_mean_of_the_two_middle_gaps() -> None:
    # Previous gaps [100, 200]: median 150, threshold max(250, 600) = 600.
    assert stalls([100.0, 200.0, 600.0]) == (0, 0.0)
    assert stalls([100.0, 200.0, 601.0]) == (1, 601.0)


def _stalls_brute_force(g: list[float], abs_ms: float, k: float) -> tuple[int, float]:
    count, total = 0, 0.0
    for i, x in enumerate(g):
        threshold = abs_ms if i == 0 else max(abs_ms, k * float(np.median(g[:i])))
        if x > threshold:
            count, total = count + 1, total + x
    return count, total


@pytest.mark.parametrize("seed", range(5))
def test_stalls_match_a_brute_force_running_median(seed: int) -> None:
    rng = random.Random(seed)
    g = [rng.lognormvariate(3.5, 1.2) for _ in range(rng.randint(1, 600))]
    g += [float(rng.choice([10, 20, 30]))] * 20  # ties
    rng.shuffle(g)
    count, total = stalls(g, abs_ms=100.0, k=3.0)
    want_count, want_total = _stalls_brute_force(g, 100.0, 3.0)
    assert count == want_count
    assert total == pytest.approx(want_total, rel=1e-12)


def test_stalls_scale_to_long_streams() -> None:
    rng = random.Random(1)
    g = [rng.uniform(10.0, 30.0) for _ in range(200_000)]
    g[100_000] = 5000.0
    assert stalls(g) == (1, 5000.0)


def test_delay_variation_hand_computed() -> None:
    # d = [100, 102, 101] → minus min → [0, 2, 1]; p50 1, p95 at rank 1.9 of [0, 1, 2].
    got = delay_variation([100.0, 112.0, 121.0], [0.0, 10.0, 20.0])
    assert got == pytest.approx({"p50": 1.0, "p95": 1.9})


def test_delay_variation_cancels_a_constant_clock_offset() -> None:
    rng = random.Random(9)
    ts = [1_763_640_000_000.0 + 20.0 * i for i in range(500)]  # server Unix time in ms
    delay = [45.0 + rng.expovariate(1 / 3.0) for _ in ts]
    arrival = [t + d for t, d in zip(ts, delay, strict=True)]
    base = delay_variation(arrival, ts)
    assert base is not None
    for offset in (-3_600_000.0, -1.5, 0.25, 86_400_000.0):  # the agent's clock off by this much
        shifted = delay_variation([a + offset for a in arrival], ts)
        assert shifted == pytest.approx(base, abs=1e-3)
    v = np.array(delay) - min(delay)
    assert base["p50"] == pytest.approx(float(np.percentile(v, 50)), abs=1e-3)
    assert base["p95"] == pytest.approx(float(np.percentile(v, 95)), abs=1e-3)


def test_delay_variation_empty_and_mismatched() -> None:
    assert delay_variation([], []) is None
    assert delay_variation([5.0], [1.0]) == {"p50": 0.0, "p95": 0.0}
    with pytest.raises(ValueError):
        delay_variation([1.0, 2.0], [1.0])


def test_tpot() -> None:
    assert tpot(1000.0, 1900.0, 10) == 100.0
    assert tpot(5.0, 5.0, 2) == 0.0
    assert tpot(1000.0, 1000.0, 1) is None
    assert tpot(0.0, 0.0, 0) is None
