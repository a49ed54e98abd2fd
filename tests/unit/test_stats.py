"""The docs/numbers.md definitions, checked against NumPy and hand-computed cases."""

from __future__ import annotations

import random

import numpy as np
import pytest

from netprobe.stats import jitter, loss_pct, percentile, rtt_stats


def test_percentile_matches_numpy_linear() -> None:
    rng = random.Random(7)
    for n in (1, 2, 3, 10, 101, 1000):
        values = sorted(rng.lognormvariate(3.5, 0.4) for _ in range(n))
        for q in (0, 5, 50, 95, 99, 100):
            assert percentile(values, q) == pytest.approx(float(np.percentile(values, q)), rel=1e-12)


def test_percentile_rejects_empty_and_bad_q() -> None:
    with pytest.raises(ValueError):
        percentile([], 50)
    with pytest.raises(ValueError):
        percentile([1.0], 101)


def test_rtt_stats_population_stdev_and_none_when_empty() -> None:
    s = rtt_stats([10.0, 20.0, 30.0, 40.0])
    assert s is not None
    assert (s.min, s.avg, s.max) == (10.0, 25.0, 40.0)
    assert s.p50 == 25.0
    assert s.p95 == pytest.approx(38.5)
    assert s.stdev == pytest.approx(float(np.std([10, 20, 30, 40])))
    assert rtt_stats([]) is None


def test_jitter_is_mean_abs_difference_of_consecutive_received() -> None:
    assert jitter([10.0, 12.0, 9.0]) == pytest.approx((2 + 3) / 2)
    # lost replies are skipped: the neighbours of a loss count as consecutive
    assert jitter([10.0, None, 14.0, None, None, 13.0]) == pytest.approx((4 + 1) / 2)
    assert jitter([5.0]) is None
    assert jitter([None, None]) is None


def test_loss_pct() -> None:
    assert loss_pct(20, 19) == 5.0
    assert loss_pct(3, 0) == 100.0
    assert loss_pct(0, 0) == 0.0
