"""The report's arrays give the figures Sums give: a prefix row stored as binary and read by NumPy,
minus the row before, merged over any set of hours of day, has the quantiles, counts and extremes of
the same Sums merged in Python (Sums.add/total, combine; the quantiles DDSketch's own of the merged
sketch), with the float
sums equal to rounding; the codec gives the fold back the Sums it wrote."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest

from netprobe.store import hour_arrays as arrays
from netprobe.store import sketch as sketches
from netprobe.store.prefix import (
    Extremes,
    Sums,
    combine,
    decode_level,
    decode_sums,
    encode_level,
    encode_sums,
    extremes_of,
)
from netprobe.store.rollups import Rollup

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _ddsketch(sums: Sums, qs: tuple[float, ...], lo: float | None, hi: float | None) -> list[float | None]:
    """The quantiles of the sketch `sums` holds, by DDSketch itself."""
    r = sums.rollup(lo, hi)
    return [r.quantile(q) for q in qs]


def _row(rng: np.random.Generator, base: float, spread: float, extras: bool, hour: int) -> dict[str, Any]:
    samples = [float(x) for x in rng.lognormal(np.log(base), spread, size=int(rng.integers(1, 300)))]
    lost = int(rng.integers(0, 4))
    r = Rollup(rounds=20, error_rounds=int(lost > 2), sent=len(samples) + lost, received=len(samples),
               loss_pct_sum=float(rng.uniform(0, 5)), loss_rounds=20, jitter_sum=float(rng.uniform(0, 40)),
               jitter_count=20)
    r.sketch = sketches.new_sketch()
    sketches.add_all(r.sketch, samples)
    r.rtt_min, r.rtt_max, r.rtt_sum, r.rtt_count = min(samples), max(samples), sum(samples), len(samples)
    if extras:
        r.extras = {"stalls": [float(rng.integers(0, 5)), 4], "stream_s": [120.0, 4],
                    "gap_p95_ms": [float(rng.uniform(1, 90)), 4]}
    return r.to_row() | {"hour": T0 + timedelta(hours=hour)}


def _series(rng: np.random.Generator, days: int, extras: bool) -> list[tuple[int, dict[str, Any]]]:
    base, spread = float(rng.uniform(5, 300)), float(rng.uniform(0.01, 0.5))
    out = []
    for d in range(days):
        for h in range(24):
            if rng.random() < 0.9:      # some hours without data
                peak = 20 <= h < 23
                out.append((h, _row(rng, base * (1.4 if peak else 1.0), spread, extras, 24 * d + h)))
    return out


def _sums(rows: list[tuple[int, dict[str, Any]]]) -> dict[int, Sums]:
    out: dict[int, Sums] = {}
    for h, row in rows:
        out.setdefault(h, Sums()).add_row(row)
    return out


def _extremes(rows: list[tuple[int, dict[str, Any]]]) -> dict[int, Extremes]:
    out: dict[int, Extremes] = {}
    for h, row in rows:
        e = combine(out.get(h), extremes_of(row))
        if e is not None:
            out[h] = e
    return out


def _ext_array(e: Extremes | None) -> Any:
    return np.array([np.nan if v is None else float(v) for v in (e or [None] * 4)])


def test_codec_gives_the_fold_back_its_sums() -> None:
    rng = np.random.default_rng(7)
    sums = _sums(_series(rng, 3, extras=True))
    assert decode_sums(encode_sums(sums)) == sums
    sums[5].pos = [x + 0.5 for x in sums[5].pos]          # not integral: stored as float64
    assert decode_sums(encode_sums(sums)) == sums
    assert decode_sums(encode_sums({})) == {}
    level = _extremes(_series(rng, 2, extras=False))
    assert decode_level(encode_level(level)) == level


@pytest.mark.parametrize("seed", range(6))
def test_window_figures_equal_the_sums(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n, extras = 5, seed % 2 == 0
    series = [_series(rng, 4, extras) for _ in range(n)]
    before = [rows[:24 * 2 - int(rng.integers(0, 10))] for rows in series]   # "row(first − 1)"
    builder = arrays.Builder()
    want: list[tuple[dict[int, Sums], dict[int, Extremes]]] = []
    for i, (rows, old) in enumerate(zip(series, before, strict=True)):
        t = f"t{i}"
        builder.add_payload(t, encode_sums(_sums(rows)), 1.0)
        builder.add_payload(t, encode_sums(_sums(old)), -1.0)
        newer = rows[len(old):]
        ext = _extremes(newer)
        builder.add_stored_extremes(t, encode_level(ext))
        sums = _sums(rows)
        for h, s in _sums(old).items():
            sums[h].add(s, -1.0)
        want.append((sums, ext))
    got = builder.build()
    assert got.targets == [f"t{i}" for i in range(n)]
    qs = (0.0, 0.05, 0.5, 0.95, 0.99, 1.0)
    for hours in ((20, 21, 22), (0, 1, 22, 23), (3,), tuple(range(24))):
        w = got.window(hours)
        q = w.quantiles(qs)
        for i, (sums, ext) in enumerate(want):
            picked = [h for h in hours if h in sums and sums[h].hours]
            total = Sums.total([sums[h] for h in picked])
            e: Extremes | None = None
            for h in picked:
                e = combine(e, ext.get(h))
            lo, hi = (e[0], e[1]) if e else (None, None)
            assert [None if v != v else v for v in q[i].tolist()] == _ddsketch(total, qs, lo, hi)
            assert int(w.hours[i]) == total.hours
            assert w.c[i].tolist() == pytest.approx(total.c, rel=1e-12, abs=1e-9)
            assert [None if v != v else v for v in w.ext[i].tolist()] == (e or [None] * 4)
            want_figures = total.rollup(lo, hi).figures()
            assert w.sums(i).rollup(lo, hi).figures() == pytest.approx(want_figures, rel=1e-12)


def test_hour_rows_after_the_prefix_and_series_without_wanted_hours() -> None:
    rng = np.random.default_rng(3)
    rows = _series(rng, 1, extras=True)
    builder = arrays.Builder()
    for h, row in rows:
        builder.add_hour("a", h, row)
    builder.add_hour("b", 3, rows[0][1])
    got = builder.build(only=(20, 21, 22))
    assert got.targets == ["a"]           # b has nothing in the hours wanted
    sums = _sums(rows)
    w = got.window((20, 21, 22))
    total = Sums.total([sums[h] for h in (20, 21, 22) if h in sums])
    e = None
    for h, e2 in _extremes(rows).items():
        if h in (20, 21, 22):
            e = combine(e, e2)
    assert e is not None
    assert [None if v != v else v for v in w.quantiles((0.5, 0.95))[0].tolist()] == \
        _ddsketch(total, (0.5, 0.95), e[0], e[1])
    assert w.extras["stalls"][0].tolist() == pytest.approx(total.extras["stalls"])


def test_combine_is_prefix_combine() -> None:
    cases: list[Extremes | None] = [None, [1.0, 5.0, 2.0, 100.0], [0.5, 9.0, 2.0, 50.0],
                                    [None, None, 3.0, 70.0], [2.0, 3.0, None, None], [1.0, 2.0, 0.0, 10.0]]
    for a in cases:
        for b in cases:
            want = combine(a, b)
            got = arrays.combine(_ext_array(a), _ext_array(b)).tolist()
            assert [None if v != v else v for v in got] == (want or [None] * 4)


@pytest.mark.parametrize("only", [None, (20, 21, 22, 3, 4, 5)])
def test_payloads_decoded_together_are_the_sums_the_fold_wrote(only: tuple[int, ...] | None) -> None:
    """Builder.add_payload (every payload of a layout decoded at once, the bins of `only` alone) gives,
    to the bit, each series' stored Sums minus the row before, as Sums.add subtracts them: layouts with
    and without extras, int and float bins."""
    rng = np.random.default_rng(5)
    builder = arrays.Builder()
    want: list[dict[int, Sums]] = []
    for i in range(7):
        rows = _series(rng, 3, extras=i % 3 == 0)
        old = rows[:int(rng.integers(0, 40))]
        sums, before = _sums(rows), _sums(old)
        if i == 4:
            sums[21].pos = [x + 0.25 for x in sums[21].pos]       # not integral: float64 bins
        for part, sign in ((encode_sums(sums), 1.0), (encode_sums(before), -1.0)):
            builder.add_payload(f"t{i}", part, sign)
        stored = decode_sums(encode_sums(sums))
        for h, s in decode_sums(encode_sums(before)).items():
            stored[h].add(s, -1.0)
        want.append(stored)
    b = builder.build(only)
    assert b.targets == [f"t{i}" for i in range(7)] and b.only == (None if only is None else frozenset(only))
    for i, stored in enumerate(want):
        for h in only or range(24):
            s = stored.get(h, Sums())
            assert int(b.hours[i, h]) == s.hours and b.c[i, h].tolist() == s.c and b.zero[i, h] == s.zero
            for name, slot in b.extras.items():
                assert slot[i, h].tolist() == s.extras.get(name, [0.0, 0]), name
            for lo, got, off, bins in ((b.pos_lo, b.pos, s.pos_off, s.pos),
                                       (b.neg_lo, b.neg, s.neg_off, s.neg)):
                row = np.zeros(got.shape[2])
                row[off - lo:off - lo + len(bins)] = bins
                assert np.array_equal(got[i, h], row)
    if only is not None:
        with pytest.raises(AssertionError):
            b.window((0,))
