"""Prefix sums give the figures DDSketch gives: quantiles found on the summed bins equal the merged
sketch's, exactly, also after a subtraction (the report's `days` = row(last) − row(first − 1)), where
only the float sums may differ, by rounding."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest

from netprobe.store import sketch as sketches
from netprobe.store.hour_arrays import figures, stacked
from netprobe.store.prefix import Sums
from netprobe.store.rollups import Rollup


def quantiles(sums: Sums, qs: tuple[float, ...], lo: float | None, hi: float | None) -> list[float | None]:
    """The quantiles the reports read of `sums` (one series' window)."""
    return [None if v != v else float(v) for v in stacked([sums], [lo], [hi]).quantiles(qs)[0]]


def _hour(rng: np.random.Generator, base: float, spread: float,
          extras: bool) -> tuple[Rollup, dict[str, Any]]:
    samples = [float(x) for x in rng.lognormal(np.log(base), spread, size=int(rng.integers(1, 400)))]
    r = Rollup(rounds=20, sent=len(samples) + 3, received=len(samples), loss_pct_sum=1.5, loss_rounds=20,
               jitter_sum=float(rng.uniform(0, 40)), jitter_count=20)
    r.sketch = sketches.new_sketch()
    sketches.add_all(r.sketch, samples)
    r.rtt_min, r.rtt_max, r.rtt_sum, r.rtt_count = min(samples), max(samples), sum(samples), len(samples)
    if extras:
        r.extras = {"stalls": [2.0, 4], "stream_s": [120.0, 4], "tpot_ms": [88.0, 4]}
    row = r.to_row() | {"hour": datetime(2026, 1, 1, tzinfo=UTC)}
    return r, row


def _merged(rollups: list[Rollup]) -> Rollup:
    total = Rollup()
    for r in rollups:
        total.merge(r)
    return total


@pytest.mark.parametrize("seed", range(8))
def test_figures_and_quantiles_equal_the_merged_sketch(seed: int) -> None:
    rng = np.random.default_rng(seed)
    hours = [_hour(rng, float(rng.uniform(5, 300)), float(rng.uniform(0.01, 0.6)), seed % 2 == 0)
             for _ in range(6)]
    sums = Sums()
    for _, row in hours:
        sums.add_row(row)
    want = _merged([r for r, _ in hours])
    assert figures([sums], [want.rtt_min], [want.rtt_max])[0] == want.figures()
    qs = (0.0, 0.05, 0.5, 0.95, 0.99, 1.0)
    assert quantiles(sums, qs, want.rtt_min, want.rtt_max) == [want.quantile(q) for q in qs]

    # what a report over the later hours reads: everything, minus the hours before them
    before = Sums()
    for _, row in hours[:2]:
        before.add_row(row)
    sums.add(before, -1.0)
    later = _merged([r for r, _ in hours[2:]])
    got, exp = figures([sums], [later.rtt_min], [later.rtt_max])[0], later.figures()
    for key in ("rtt_p50_ms", "rtt_p95_ms", "rtt_p99_ms", "rounds", "sent", "received", "samples"):
        assert got[key] == exp[key], key          # bins and counts subtract exactly
    assert got == pytest.approx(exp, rel=1e-12)   # float sums (rtt_sum, jitter) to rounding
    assert quantiles(sums, qs, None, None) == [
        float(v) if (v := later.sketch.get_quantile_value(q)) is not None else None  # type: ignore[union-attr]
        for q in qs]


def test_no_samples() -> None:
    assert quantiles(Sums(), (0.5, 0.95), None, None) == [None, None]
    assert figures([Sums()], [None], [None])[0] == Rollup().figures()


@pytest.mark.parametrize("seed", range(4))
def test_total_is_adding_one_by_one(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    parts = []
    for _ in range(5):
        one = Sums()
        one.add_row(_hour(rng, float(rng.uniform(5, 300)), float(rng.uniform(0.01, 0.6)), seed % 2 == 0)[1])
        parts.append(one)
    one_by_one = Sums()
    for part in parts:
        one_by_one.add(part)
    assert Sums.total(parts) == one_by_one
    assert Sums.total(parts[:1]) == parts[0]
