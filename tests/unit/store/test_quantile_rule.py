"""The project's one rank rule on bins (hour_arrays.quantile_rows) gives what DDSketch itself gives for
the same sketch, whatever its values: negative, zero, positive, a handful or thousands, merged from
several sketches; and the bin arithmetic (sketch.add_bins, total_bins, trim) adds and subtracts bins
as DDSketch.merge does."""

from __future__ import annotations

import numpy as np
from ddsketch import DDSketch
from hypothesis import given, settings
from hypothesis import strategies as st

from netprobe.store import sketch as sketches
from netprobe.store.hour_arrays import quantile_rows

values = st.lists(st.one_of(st.floats(-5_000, 5_000, allow_nan=False), st.just(0.0),
                            st.floats(0.01, 900.0)), min_size=0, max_size=300)
quantile = st.floats(0.0, 1.0)


def _sketch(vs: list[float]) -> DDSketch:
    s = sketches.new_sketch()
    sketches.add_all(s, vs)
    return s


def _trim(off: int, bins: list[float]) -> tuple[int, list[float]]:
    """trim, no bins at one offset (it means nothing then)."""
    off, bins = sketches.trim(off, bins)
    return (off, bins) if bins else (0, [])


def _row(s: DDSketch) -> tuple[int, list[float], int, list[float], float]:
    p_off, p = _trim(s._store.offset, list(s._store.bins))
    n_off, n = _trim(s._negative_store.offset, list(s._negative_store.bins))
    return p_off, p, n_off, n, s._zero_count


def _rows(sks: list[DDSketch]) -> tuple[int, np.ndarray, int, np.ndarray, np.ndarray]:
    """The sketches as rows of one key range each for the positive and the negative store."""
    got = [_row(s) for s in sks]

    def lay(parts: list[tuple[int, list[float]]]) -> tuple[int, np.ndarray]:
        have = [(o, b) for o, b in parts if b]
        lo = min((o for o, _ in have), default=0)
        width = max((o + len(b) for o, b in have), default=lo) - lo
        out = np.zeros((len(parts), width))
        for i, (o, b) in enumerate(parts):
            if b:
                out[i, o - lo:o - lo + len(b)] = b
        return lo, out

    p_lo, pos = lay([(g[0], g[1]) for g in got])
    n_lo, neg = lay([(g[2], g[3]) for g in got])
    return p_lo, pos, n_lo, neg, np.array([g[4] for g in got])


def _clamped(s: DDSketch, q: float, lo: float, hi: float) -> float:
    raw = s.get_quantile_value(q)
    if raw is None:
        return float("nan")
    return float(raw) if lo != lo else min(max(float(raw), lo), hi)


@settings(max_examples=300, deadline=None)
@given(st.lists(values, min_size=1, max_size=6), st.lists(quantile, min_size=1, max_size=5), st.booleans())
def test_quantile_rows_is_ddsketch(samples: list[list[float]], qs: list[float], clamp: bool) -> None:
    sks = [_sketch(vs) for vs in samples]
    p_lo, pos, n_lo, neg, zero = _rows(sks)
    lo = np.array([min(vs) if vs and clamp else np.nan for vs in samples])
    hi = np.array([max(vs) if vs and clamp else np.nan for vs in samples])
    got = quantile_rows(p_lo, pos, n_lo, neg, zero, qs, lo, hi)
    want = np.array([[_clamped(s, q, lo[i], hi[i]) for q in qs] for i, s in enumerate(sks)])
    assert np.array_equal(got, want, equal_nan=True)


@settings(max_examples=200, deadline=None)
@given(st.lists(values, min_size=2, max_size=6), quantile)
def test_bins_added_are_the_merged_sketch(samples: list[list[float]], q: float) -> None:
    sks = [_sketch(vs) for vs in samples]
    merged = sketches.new_sketch()
    for s in sks:
        merged.merge(s)
    rows = [_row(s) for s in sks]
    p_off, p = 0, []
    for r in rows:
        p_off, p = sketches.add_bins(p_off, p, r[0], r[1])
    t_off, t = sketches.total_bins([(r[0], r[1]) for r in rows if r[1]])
    assert _trim(p_off, p) == _trim(t_off, t) == _row(merged)[:2]
    n_off, n = sketches.total_bins([(r[2], r[3]) for r in rows if r[3]])
    n_off, n = _trim(n_off, n)
    zero = sum(r[4] for r in rows)
    got = quantile_rows(p_off, np.array([p]).reshape(1, -1), n_off, np.array([n]).reshape(1, -1),
                        np.array([zero]), [q], np.array([np.nan]), np.array([np.nan]))
    assert np.array_equal(got[0], [_clamped(merged, q, np.nan, np.nan)], equal_nan=True)

    # the later sketches alone: everything minus the first, bin by bin
    later = sketches.new_sketch()
    for s in sks[1:]:
        later.merge(s)
    off, rest = sketches.add_bins(t_off, list(t), rows[0][0], rows[0][1], -1.0)
    assert _trim(off, rest) == _row(later)[:2]
