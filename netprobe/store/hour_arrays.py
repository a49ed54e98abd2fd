"""One agent's series of one probe, by local hour of day, as NumPy arrays: what a report reads of the
prefix rows (row(last) − row(before the first day), extremes from two sparse-table lookups) and of the
hourly rows after them, laid out so that every series' windows and 24-hour profile are computed at
once instead of series by series and bin by bin in Python.

The figures are the ones netprobe.store.prefix computes on Sums (and Rollup.figures on a merged
sketch): the same additions in the same order, the same DDSketch rank rule on the same running
counts; tests/unit/store/test_hour_arrays.py holds them equal.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import orjson

from netprobe.store import sketch as sketches
from netprobe.store.prefix import COUNTERS, SUMS_HEAD, SUMS_MAGIC, Extremes, ForeignSketch, Sums, extremes_of

F64 = npt.NDArray[np.float64]
NC = len(COUNTERS)
C = {name: i for i, name in enumerate(COUNTERS)}
_INT_BINS = 1
_MAPPING = sketches.new_sketch()._mapping
_VALUE_CACHE: dict[int, float] = {}


@dataclass(slots=True)
class Part:
    """One stored prefix row's sums, decoded: arrays over the 24 local hours of day."""

    hours: npt.NDArray[np.int64]        # [24]
    c: F64                              # [24, NC]
    zero: F64                           # [24]
    extras: dict[str, F64]              # name -> [24, 2] (total, n)
    spans: npt.NDArray[np.int32]        # [24, 4]: pos offset, pos length, neg offset, neg length
    pos: F64                            # the pos bins of hours 0–23 back to back
    neg: F64


def decode(data: bytes) -> Part:
    magic, flags, nc, ne, nlen = SUMS_HEAD.unpack_from(data)
    if magic != SUMS_MAGIC or nc != NC:
        raise ValueError("not a prefix sums payload of this version")
    at = SUMS_HEAD.size
    names: list[str] = orjson.loads(data[at:at + nlen]) if nlen else []
    at += nlen
    hours = np.frombuffer(data, "<i8", 24, at)
    at += 8 * 24
    c = np.frombuffer(data, "<f8", 24 * nc, at).reshape(24, nc)
    at += 8 * 24 * nc
    zero = np.frombuffer(data, "<f8", 24, at)
    at += 8 * 24
    ex = np.frombuffer(data, "<f8", 24 * ne * 2, at).reshape(24, ne, 2)
    at += 8 * 24 * ne * 2
    spans = np.frombuffer(data, "<i4", 96, at).reshape(24, 4)
    at += 4 * 96
    n_pos, n_neg = int(spans[:, 1].sum()), int(spans[:, 3].sum())
    dtype = "<i4" if flags & _INT_BINS else "<f8"
    bins = np.frombuffer(data, dtype, n_pos + n_neg, at).astype(np.float64)
    return Part(hours, c, zero, {n: ex[:, i, :] for i, n in enumerate(names)}, spans, bins[:n_pos],
                bins[n_pos:])


def decode_extremes(data: bytes | None) -> F64:
    """A stored sparse-table level: [24, 4], NaN for none."""
    if not data:
        return np.full((24, 4), np.nan)
    return np.frombuffer(data, "<f8", 96).reshape(24, 4)


def combine(a: F64, b: F64) -> F64:
    """prefix.combine over arrays [..., 4]: min of mins, max of maxes, the worst hour (most loss, the
    earliest of equals); NaN is none."""
    out = np.empty(np.broadcast_shapes(a.shape, b.shape))
    out[..., 0] = np.fmin(a[..., 0], b[..., 0])
    out[..., 1] = np.fmax(a[..., 1], b[..., 1])
    la, lb = a[..., 2], b[..., 2]
    take_b = np.isnan(la) | (lb > la) | ((lb == la) & (b[..., 3] < a[..., 3]))
    out[..., 2] = np.where(take_b, lb, la)
    out[..., 3] = np.where(take_b, b[..., 3], a[..., 3])
    return out


def extremes_array(e: Extremes | None) -> F64:
    return np.array([np.nan if v is None else float(v) for v in (e or [None] * 4)])


# -- one agent's series of one probe -----------------------------------------------------------------
@dataclass(slots=True)
class _Bins:
    pos_off: int
    pos: list[float]
    neg_off: int
    neg: list[float]
    zero: float


@dataclass
class _Series:
    parts: list[tuple[Part, float]] = field(default_factory=list)     # (part, ±1), in order
    levels: list[F64] = field(default_factory=list)                   # [24, 4] each, combined
    rows: list[tuple[int, Mapping[str, Any], _Bins | None]] = field(default_factory=list)


class Builder:
    """Collects, per target, the decoded rows that make its sums (added and subtracted in the order
    given, as Sums.add does) and the hourly rows after them; build() lays them out as HourArrays."""

    def __init__(self) -> None:
        self.series: dict[str, _Series] = {}

    def _get(self, target: str) -> _Series:
        s = self.series.get(target)
        if s is None:
            s = self.series[target] = _Series()
        return s

    def add_part(self, target: str, part: Part, sign: float) -> None:
        self._get(target).parts.append((part, sign))

    def add_extremes(self, target: str, level: F64) -> None:
        self._get(target).levels.append(level)

    def add_hour(self, target: str, hour_of_day: int, row: Mapping[str, Any]) -> None:
        """One rollups_hourly row (its columns, sketch as stored JSON)."""
        self._get(target).rows.append((hour_of_day, row, _bins(row["sketch"]) if row["sketch"] else None))

    def build(self, only: Sequence[int] | None = None) -> HourArrays:
        """`only`: the hours of day wanted (a series without hours in them is left out)."""
        targets = sorted(self.series)
        n = len(targets)
        pos_lo, pos_hi, neg_lo, neg_hi = _ranges(self.series.values())
        wp, wn = max(pos_hi - pos_lo, 0), max(neg_hi - neg_lo, 0)
        hours = np.zeros((n, 24), np.int64)
        c = np.zeros((n, 24, NC))
        zero = np.zeros((n, 24))
        pos = np.zeros((n, 24, wp))
        neg = np.zeros((n, 24, wn))
        ext = np.full((n, 24, 4), np.nan)
        extras: dict[str, F64] = {}
        for i, t in enumerate(targets):
            s = self.series[t]
            for part, sign in s.parts:
                if sign > 0:
                    hours[i] += part.hours
                    c[i] += part.c
                    zero[i] += part.zero
                else:
                    hours[i] -= part.hours
                    c[i] -= part.c
                    zero[i] -= part.zero
                for name, v in part.extras.items():
                    slot = extras.get(name)
                    if slot is None:
                        slot = extras[name] = np.zeros((n, 24, 2))
                    if sign > 0:
                        slot[i] += v
                    else:
                        slot[i] -= v
                _scatter(pos[i], pos_lo, part.spans[:, 0], part.spans[:, 1], part.pos, sign)
                _scatter(neg[i], neg_lo, part.spans[:, 2], part.spans[:, 3], part.neg, sign)
            for slot in extras.values():     # an extra no round had is none (Sums.add drops it)
                slot[i, slot[i, :, 1] == 0, 0] = 0.0
            e = ext[i]
            for level in s.levels:
                e = combine(e, level)
            for h, row, bins in s.rows:
                hours[i, h] += 1
                c[i, h] += [row[name] for name in COUNTERS]
                if bins is not None:
                    if bins.pos:
                        pos[i, h, bins.pos_off - pos_lo:bins.pos_off - pos_lo + len(bins.pos)] += bins.pos
                    if bins.neg:
                        neg[i, h, bins.neg_off - neg_lo:bins.neg_off - neg_lo + len(bins.neg)] += bins.neg
                    zero[i, h] += bins.zero
                if row.get("extras"):
                    for name, (total, k) in orjson.loads(row["extras"]).items():
                        slot = extras.get(name)
                        if slot is None:
                            slot = extras[name] = np.zeros((n, 24, 2))
                        slot[i, h] += (total, k)
                e[h] = combine(e[h], extremes_array(extremes_of(row)))
            ext[i] = e
        keep = (hours[:, list(only)] if only is not None else hours).any(axis=1)
        if not keep.all():
            idx = np.flatnonzero(keep)
            return HourArrays([targets[i] for i in idx], hours[idx], c[idx], zero[idx], pos_lo, pos[idx],
                              neg_lo, neg[idx], {k: v[idx] for k, v in extras.items()}, ext[idx])
        return HourArrays(targets, hours, c, zero, pos_lo, pos, neg_lo, neg, extras, ext)


def _bins(text: str) -> _Bins:
    """A stored sketch's bins, read as Sums.add_row reads them."""
    d = orjson.loads(text)
    if d.get("v") != sketches.FORMAT or d["gamma"] != _MAPPING.gamma or d["index_offset"] != _MAPPING._offset:
        raise ForeignSketch("sketch mapping differs")
    pos, neg = d["pos"], d["neg"]
    return _Bins(pos["offset"] if pos["counts"] else 0, pos["counts"],
                 neg["offset"] if neg["counts"] else 0, neg["counts"], d["zero"])


def _ranges(series: Iterable[_Series]) -> tuple[int, int, int, int]:
    """The key ranges [lo, hi) of every pos and neg bin the series hold ((0, 0) for none)."""
    pos: list[int] = []
    neg: list[int] = []
    for s in series:
        for part, _ in s.parts:
            sp = part.spans
            for col, out in ((0, pos), (2, neg)):
                has = sp[:, col + 1] > 0
                if has.any():
                    out += [int(sp[has, col].min()), int((sp[has, col] + sp[has, col + 1]).max())]
        for _, _, b in s.rows:
            if b is not None and b.pos:
                pos += [b.pos_off, b.pos_off + len(b.pos)]
            if b is not None and b.neg:
                neg += [b.neg_off, b.neg_off + len(b.neg)]
    p = (min(pos), max(pos)) if pos else (0, 0)
    n = (min(neg), max(neg)) if neg else (0, 0)
    return (*p, *n)


def _scatter(into: F64, lo: int, offs: npt.NDArray[np.int32], lens: npt.NDArray[np.int32], vals: F64,
             sign: float) -> None:
    """into[h, off_h − lo : off_h − lo + len_h] ±= the hour's bins, for every hour at once."""
    if not len(vals):
        return
    width = into.shape[1]
    total = len(vals)
    starts = np.cumsum(lens) - lens
    base = np.arange(24) * width + (offs.astype(np.int64) - lo)
    idx = np.repeat(base - starts, lens) + np.arange(total)
    flat = into.reshape(-1)
    if sign > 0:
        flat[idx] += vals
    else:
        flat[idx] -= vals


@dataclass(slots=True)
class HourArrays:
    """Series i is `targets[i]`; arrays are [series, local hour of day, …]. Bins: pos[i, h, j] counts
    key pos_lo + j (neg likewise); ext: min, max, worst loss, worst hour's epoch, NaN for none."""

    targets: list[str]
    hours: npt.NDArray[np.int64]
    c: F64
    zero: F64
    pos_lo: int
    pos: F64
    neg_lo: int
    neg: F64
    extras: dict[str, F64]
    ext: F64

    def window(self, hours_of_day: Sequence[int], series: Sequence[int] | None = None) -> Window:
        """The hours of day `hours_of_day` merged, per series (all, or those listed): sums added in
        the order given, as Sums.total does."""
        sel: Any = slice(None) if series is None else np.asarray(series, np.intp)
        hs = list(hours_of_day)
        n = len(self.targets) if series is None else len(series)
        if not hs:
            return Window(np.zeros(n, np.int64), np.zeros((n, NC)), np.zeros(n), self.pos_lo,
                          np.zeros((n, self.pos.shape[2])), self.neg_lo, np.zeros((n, self.neg.shape[2])),
                          {}, np.full((n, 4), np.nan))
        present = self.hours[sel][:, hs] > 0          # only hours with data count, as _merged picks them
        mask = present[:, :, None]

        def total(a: F64) -> F64:
            sub = a[sel][:, hs]
            out = np.where(mask if sub.ndim == 3 else present, sub, 0.0)
            acc: F64 = out[:, 0].copy()
            for k in range(1, len(hs)):
                acc = acc + out[:, k]
            return acc

        ext = self.ext[sel][:, hs]
        e = np.full((n, 4), np.nan)
        for k in range(len(hs)):
            e = combine(e, np.where(mask[:, k], ext[:, k], np.nan))
        return Window(np.where(present, self.hours[sel][:, hs], 0).sum(axis=1), total(self.c),
                      total(self.zero), self.pos_lo, total(self.pos), self.neg_lo, total(self.neg),
                      {k: total(v) for k, v in self.extras.items()}, e)

    def hour(self, h: int) -> Window:
        return self.window((h,))


@dataclass(slots=True)
class Window:
    """Per series: hour rows merged, counters [n, NC], bins [n, W], extras [n, 2], extremes [n, 4]."""

    hours: npt.NDArray[np.int64]
    c: F64
    zero: F64
    pos_lo: int
    pos: F64
    neg_lo: int
    neg: F64
    extras: dict[str, F64]
    ext: F64

    def quantiles(self, qs: Sequence[float]) -> F64:
        """[n, len(qs)]: prefix.quantiles per series (DDSketch's rank rule on the running counts,
        clamped to the exact min/max where both are known); NaN where there is none."""
        n = len(self.hours)
        out = np.full((n, len(qs)), np.nan)
        if n == 0:
            return out
        running = np.cumsum(self.pos, axis=1)
        count = running[:, -1] if running.shape[1] else np.zeros(n)
        plain = ~((self.neg != 0).any(axis=1) | (self.zero != 0))
        ok = plain & (count != 0)
        values = _values(self.pos_lo, running.shape[1])
        lo, hi = self.ext[:, 0], self.ext[:, 1]
        clamp = ~(np.isnan(lo) | np.isnan(hi))
        last = running.shape[1] - 1
        for j, q in enumerate(qs):
            rank = q * (count - 1)
            idx = np.minimum((running <= rank[:, None]).sum(axis=1), max(last, 0))
            v = values[idx] if len(values) else np.full(n, np.nan)
            v = np.where(clamp, np.minimum(np.maximum(v, lo), hi), v)
            out[:, j] = np.where(ok, v, np.nan)
        for i in np.flatnonzero(~plain):      # negative or zero values: DDSketch's own path
            got = self.sums(int(i)).rollup(_none(lo[i]), _none(hi[i]))
            out[i] = [np.nan if (v := got.quantile(q)) is None else v for q in qs]
        return out

    def sums(self, i: int) -> Sums:
        """Series i as Sums (trimmed bins), for what takes a sketch: the line comparison's merge."""
        extras = {k: [float(v[i, 0]), float(v[i, 1])] for k, v in self.extras.items() if v[i, 1]}
        p_off, p = _trimmed(self.pos_lo, self.pos[i])
        n_off, nb = _trimmed(self.neg_lo, self.neg[i])
        return Sums(int(self.hours[i]), self.c[i].tolist(), p_off, p, n_off, nb, float(self.zero[i]), extras)


def _trimmed(lo: int, row: F64) -> tuple[int, list[float]]:
    nz = np.flatnonzero(row)
    if not len(nz):
        return 0, []
    return lo + int(nz[0]), row[nz[0]:nz[-1] + 1].tolist()


def _none(v: float) -> float | None:
    return None if v != v else float(v)


def _values(lo: int, width: int) -> F64:
    """The value DDSketch gives each key lo … lo + width − 1 (the mapping's own, cached)."""
    out = np.empty(width)
    for j in range(width):
        key = lo + j
        v = _VALUE_CACHE.get(key)
        if v is None:
            v = _VALUE_CACHE[key] = float(_MAPPING.value(key))
        out[j] = v
    return out


__all__ = ["Builder", "HourArrays", "Part", "Window", "combine", "decode", "decode_extremes"]
