"""One agent's series of one probe, by local hour of day, as NumPy arrays: what a report reads of the
prefix rows (row(last) − row(before the first day), extremes from two sparse-table lookups) and of the
hourly rows after them, laid out so that every series' windows and 24-hour profile are computed at
once instead of series by series and bin by bin in Python.

The figures are the ones netprobe.store.prefix computes on Sums (and Rollup.figures on a merged
sketch): the same additions in the same order, the same DDSketch rank rule on the same running
counts; tests/unit/store/test_hour_arrays.py holds them equal.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np
import numpy.typing as npt
import orjson

from netprobe.store import sketch as sketches
from netprobe.store.prefix import COUNTERS, SUMS_HEAD, SUMS_INT_BINS, SUMS_MAGIC, Sums, extremes_of

F64 = npt.NDArray[np.float64]
NC = len(COUNTERS)


@cache
def _names(raw: bytes) -> tuple[str, ...]:
    """A payload's extra names: the same few lists in every row of a probe, parsed once."""
    return tuple(orjson.loads(raw))


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


# -- one agent's series of one probe -----------------------------------------------------------------
@dataclass(slots=True)
class _Bins:
    pos_off: int
    pos: list[float]
    neg_off: int
    neg: list[float]
    zero: float


class Builder:
    """Collects, per target, the decoded rows that make its sums (the row at the last day added, the row
    before the first day subtracted, as Sums.add does), its extremes (combined), and the hourly rows
    after them; build() lays them out as HourArrays, every series' parts at once."""

    def __init__(self) -> None:
        self.payloads: dict[float, list[tuple[str, bytes]]] = {1.0: [], -1.0: []}
        self.stored_levels: list[tuple[str, bytes | None]] = []
        self.rows: list[tuple[str, int, Mapping[str, Any], _Bins | None]] = []

    def add_payload(self, target: str, data: bytes, sign: float) -> None:
        """A stored prefix row's sums as read: decoded in build() with all the others of its layout."""
        self.payloads[1.0 if sign > 0 else -1.0].append((target, data))

    def add_stored_extremes(self, target: str, data: bytes | None) -> None:
        """A sparse-table level as stored (decode_extremes'): read in build() with all the others."""
        self.stored_levels.append((target, data))

    def add_hour(self, target: str, hour_of_day: int, row: Mapping[str, Any]) -> None:
        """One rollups_hourly row (its columns, the sketch as stored JSON), after the parts."""
        self.rows.append((target, hour_of_day, row, _bins(row["sketch"]) if row["sketch"] else None))

    def build(self, only: Sequence[int] | None = None) -> HourArrays:
        """`only`: the hours of day wanted (a series without hours in them is left out; the other
        hours' bins are left out too, so only windows within `only` may be taken)."""
        targets = sorted({t for t, *_ in self.rows} | {t for ps in self.payloads.values() for t, _ in ps}
                         | {t for t, _ in self.stored_levels})
        at = {t: i for i, t in enumerate(targets)}
        n = len(targets)
        hours = None if only is None else sorted(set(only))
        batches = {sign: _decode_many([d for _, d in ps]) for sign, ps in self.payloads.items()}
        spans = [b.spans if hours is None else b.spans[:, hours] for bs in batches.values() for _, b in bs]
        pos_lo, pos_hi, neg_lo, neg_hi = _ranges(spans, [b for *_, b in self.rows if b is not None])
        a = HourArrays(np.zeros((n, 24), np.int64), np.zeros((n, 24, NC)), np.zeros((n, 24)),
                       pos_lo, np.zeros((n, 24, pos_hi - pos_lo)), neg_lo, np.zeros((n, 24, neg_hi - neg_lo)),
                       {}, np.full((n, 24, 4), np.nan), targets, None if hours is None else frozenset(hours))
        for sign in (1.0, -1.0):
            for members, batch in batches[sign]:
                series = np.asarray([at[self.payloads[sign][k][0]] for k in members], np.intp)
                _add_batch(a, series, batch, sign, hours)
        for slot in a.extras.values():      # an extra no round had is none (Sums.add drops it)
            slot[slot[..., 1] == 0, 0] = 0.0
        a.ext = _levels(a.ext, at, self.stored_levels)
        _add_rows(a, [(at[t], h, row, bins) for t, h, row, bins in self.rows])
        keep = (a.hours[:, list(only)] if only is not None else a.hours).any(axis=1)
        return a if keep.all() else a.take(np.flatnonzero(keep))


def _levels(ext: F64, at: Mapping[str, int], stored: Sequence[tuple[str, bytes | None]]) -> F64:
    """ext combined with every series' stored levels, in the order added: the k-th level of each
    series in one step."""
    if not stored:
        return ext
    every = np.stack([decode_extremes(data) for _, data in stored])
    series = [at[t] for t, _ in stored]
    seen: dict[int, int] = {}
    nth = []
    for i in series:
        k = seen.get(i, 0)
        seen[i] = k + 1
        nth.append(k)
    idx, rank = np.asarray(series, np.intp), np.asarray(nth)
    for k in range(max(nth) + 1):
        mine = rank == k
        ext[idx[mine]] = combine(ext[idx[mine]], every[mine])
    return ext


@dataclass(slots=True)
class _Batch:
    """Payloads of one layout (the same header and extras' names), decoded together: [P, 24, …]."""

    hours: npt.NDArray[np.int64]
    c: F64
    zero: F64
    extras: dict[str, F64]              # name -> [P, 24, 2]
    spans: npt.NDArray[np.int64]        # [P, 24, 4]
    bins: F64                           # every payload's bins back to back (its pos bins, then its neg)
    starts: npt.NDArray[np.int64]       # [P]: where each payload's bins start in `bins`


def _decode_many(datas: Sequence[bytes]) -> list[tuple[list[int], _Batch]]:
    """Many payloads decoded in a few NumPy steps per layout instead of a dozen per payload: the
    fixed part of each (hours, counters, zero, extras, spans) read as one structured array, the bins
    of all of them as one array. (Indexes into `datas`, the batch) per layout."""
    groups: dict[bytes, list[int]] = {}
    for k, data in enumerate(datas):
        magic, _, nc, _, nlen = SUMS_HEAD.unpack_from(data)
        if magic != SUMS_MAGIC or nc != NC:
            raise ValueError("not a prefix sums payload of this version")
        groups.setdefault(data[:SUMS_HEAD.size + nlen], []).append(k)
    out: list[tuple[list[int], _Batch]] = []
    for head, members in groups.items():
        _, flags, _, ne, _ = SUMS_HEAD.unpack_from(head)
        names = _names(head[SUMS_HEAD.size:]) if len(head) > SUMS_HEAD.size else ()
        fixed = np.dtype([("hours", "<i8", (24,)), ("c", "<f8", (24, NC)), ("zero", "<f8", (24,)),
                          ("ex", "<f8", (24, ne, 2)), ("spans", "<i4", (24, 4))])
        at = len(head)
        end = at + fixed.itemsize
        rec = np.frombuffer(b"".join([datas[k][at:end] for k in members]), fixed)
        spans = rec["spans"].astype(np.int64)
        dtype = np.dtype("<i4" if flags & SUMS_INT_BINS else "<f8")
        raw = b"".join([datas[k][end:] for k in members])
        counts = spans[:, :, 1].sum(axis=1) + spans[:, :, 3].sum(axis=1)
        if len(raw) != int(counts.sum()) * dtype.itemsize:
            raise ValueError("prefix sums payload of the wrong length")
        ex = rec["ex"]
        extras = {n: ex[:, :, i, :].astype(np.float64) for i, n in enumerate(names)}
        bins = np.frombuffer(raw, dtype).astype(np.float64)
        out.append((members, _Batch(rec["hours"].astype(np.int64), rec["c"].astype(np.float64),
                                    rec["zero"].astype(np.float64), extras, spans, bins,
                                    np.cumsum(counts) - counts)))
    return out


def _add_batch(a: HourArrays, idx: npt.NDArray[np.intp], b: _Batch, sign: float,
               hours: Sequence[int] | None) -> None:
    """A batch into its series (each series once), as Sums.add adds the same payloads one by one;
    the bins of the hours of day `hours` only (None: all)."""
    op = np.add if sign > 0 else np.subtract
    a.hours[idx] = op(a.hours[idx], b.hours)
    a.c[idx] = op(a.c[idx], b.c)
    a.zero[idx] = op(a.zero[idx], b.zero)
    for name in sorted(b.extras):
        slot = a.extras.get(name)
        if slot is None:
            slot = a.extras[name] = np.zeros((len(a.targets), 24, 2))
        slot[idx] = op(slot[idx], b.extras[name])
    n_pos, n_neg = b.spans[:, :, 1], b.spans[:, :, 3]
    first_pos = b.starts[:, None] + np.cumsum(n_pos, axis=1) - n_pos                   # [P, 24]
    first_neg = (b.starts + n_pos.sum(axis=1))[:, None] + np.cumsum(n_neg, axis=1) - n_neg
    hs = np.arange(24) if hours is None else np.asarray(hours, np.intp)
    for col, into, lo, first in ((0, a.pos, a.pos_lo, first_pos), (2, a.neg, a.neg_lo, first_neg)):
        width = into.shape[2]
        dest = (idx[:, None] * 24 + hs[None, :]) * width + b.spans[:, hs, col] - lo
        _scatter(into, dest.reshape(-1), b.spans[:, hs, col + 1].reshape(-1), b.bins, op,
                 first[:, hs].reshape(-1))


def _scatter(into: F64, base: npt.NDArray[np.int64], lens: npt.NDArray[np.int64], vals: Sequence[Any] | F64,
             op: Any = np.add, src: npt.NDArray[np.int64] | None = None) -> None:
    """Runs of bins into the flat array: run k (lens[k] values of vals[k]) starts at flat index
    base[k]; all runs in one indexed step. With `src`, vals is one array and run k is
    vals[src[k]:src[k] + lens[k]]."""
    total = int(lens.sum())
    if not total:
        return
    starts = np.cumsum(lens) - lens
    step = np.arange(total)
    flat_idx = np.repeat(base - starts, lens) + step
    flat = into.reshape(-1)
    if src is None:
        values = np.concatenate([np.asarray(v, np.float64) for v in vals])
    else:
        values = np.asarray(vals)[np.repeat(src - starts, lens) + step]
    flat[flat_idx] = op(flat[flat_idx], values)


def _add_rows(a: HourArrays, rows: Sequence[tuple[int, int, Mapping[str, Any], _Bins | None]]) -> None:
    """Hourly rows into their series and hour of day, as Sums.add_row adds them one by one: in rounds
    that take each (series, hour) at most once, so each round is one vectorised step and a key's rows
    still add in their order."""
    rounds: list[list[int]] = []
    seen: dict[tuple[int, int], int] = {}
    for k, (i, h, _, _) in enumerate(rows):
        r = seen.get((i, h), 0)
        seen[(i, h)] = r + 1
        if r == len(rounds):
            rounds.append([])
        rounds[r].append(k)
    for ks in rounds:
        part = [rows[k] for k in ks]
        ii = np.fromiter((i for i, *_ in part), np.intp, len(part))
        hh = np.fromiter((h for _, h, *_ in part), np.intp, len(part))
        a.hours[ii, hh] += 1
        a.c[ii, hh] += np.array([[row[name] for name in COUNTERS] for _, _, row, _ in part], np.float64)
        a.zero[ii, hh] += [b.zero if b is not None else 0.0 for *_, b in part]
        for into, lo, neg in ((a.pos, a.pos_lo, False), (a.neg, a.neg_lo, True)):
            spans = [(k, b.neg_off, b.neg) if neg else (k, b.pos_off, b.pos)
                     for k, (*_, b) in enumerate(part) if b is not None and (b.neg if neg else b.pos)]
            if not spans:
                continue
            width = into.shape[2]
            lens = np.fromiter((len(v) for *_, v in spans), np.int64, len(spans))
            sel = np.fromiter((k for k, *_ in spans), np.intp, len(spans))
            offs = np.fromiter((off for _, off, _ in spans), np.int64, len(spans))
            _scatter(into, (ii[sel] * 24 + hh[sel]) * width + offs - lo, lens, [v for *_, v in spans])
        for i, h, row, _ in part:
            if row.get("extras"):
                for name, (total, n) in orjson.loads(row["extras"]).items():
                    slot = a.extras.get(name)
                    if slot is None:
                        slot = a.extras[name] = np.zeros((len(a.targets), 24, 2))
                    slot[i, h] += (total, n)
        e = np.array([[np.nan if v is None else float(v) for v in extremes_of(row)] for _, _, row, _ in part])
        a.ext[ii, hh] = combine(a.ext[ii, hh], e)


def _bins(text: str) -> _Bins:
    """A stored sketch's bins, read as Sums.add_row reads them."""
    return _Bins(*sketches.stored_bins(orjson.loads(text)))


def _ranges(spans: Sequence[npt.NDArray[np.int64]], rows: Iterable[_Bins]) -> tuple[int, int, int, int]:
    """The key ranges [lo, hi) of every pos and neg bin of the parts' spans ([..., 4] each) and of the
    rows ((0, 0) for none)."""
    pos: list[int] = []
    neg: list[int] = []
    for part in spans:
        flat = part.reshape(-1, 4)
        for col, out in ((0, pos), (2, neg)):
            has = flat[:, col + 1] > 0
            if has.any():
                out += [int(flat[has, col].min()), int((flat[has, col] + flat[has, col + 1]).max())]
    for b in rows:
        if b.pos:
            pos += [b.pos_off, b.pos_off + len(b.pos)]
        if b.neg:
            neg += [b.neg_off, b.neg_off + len(b.neg)]
    p = (min(pos), max(pos)) if pos else (0, 0)
    q = (min(neg), max(neg)) if neg else (0, 0)
    return (*p, *q)


@dataclass(slots=True)
class _Parts:
    """Hour rows merged, per row `…` (a Window's series; HourArrays' series × local hour of day): their
    count, counters […, NC], zero count, bins (pos[…, j] counts key pos_lo + j, neg likewise), extras
    name -> […, 2], extremes ext […, 4]: min, max, worst loss, worst hour's epoch, NaN for none."""

    hours: npt.NDArray[np.int64]
    c: F64
    zero: F64
    pos_lo: int
    pos: F64
    neg_lo: int
    neg: F64
    extras: dict[str, F64]
    ext: F64

    def mapped(self, f: Callable[[Any], Any], **given: Any) -> dict[str, Any]:
        """The fields as keywords: each array (each of extras' too) through f, except those `given`;
        the bins' first keys as they are."""
        out: dict[str, Any] = {"pos_lo": self.pos_lo, "neg_lo": self.neg_lo, **given}
        for name in ("hours", "c", "zero", "pos", "neg", "ext"):
            if name not in given:
                out[name] = f(getattr(self, name))
        if "extras" not in given:
            out["extras"] = {k: f(v) for k, v in self.extras.items()}
        return out


@dataclass(slots=True)
class HourArrays(_Parts):
    """Series i is `targets[i]`; arrays are [series, local hour of day, …]."""

    targets: list[str]
    only: frozenset[int] | None = None      # built for these hours of day alone (their bins only)

    def window(self, hours_of_day: Sequence[int], series: Sequence[int] | None = None) -> Window:
        """The hours of day `hours_of_day` merged, per series (all, or those listed): sums added in
        the order given, as Sums.total does."""
        assert self.only is None or self.only.issuperset(hours_of_day), "hours the arrays were not built for"
        sel: Any = slice(None) if series is None else np.asarray(series, np.intp)
        hs = list(hours_of_day)
        n = len(self.targets) if series is None else len(series)
        if not hs:
            return Window(**self.mapped(lambda v: np.zeros((n, *v.shape[2:]), v.dtype), extras={},
                                        ext=np.full((n, 4), np.nan)))
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
        hours = np.where(present, self.hours[sel][:, hs], 0).sum(axis=1)
        return Window(**self.mapped(total, hours=hours, ext=e))

    def each_hour(self) -> Window:
        """Every (series, hour of day) as a window of its own, series-major (row i·24 + h): the
        24-hour profile of every series in one step."""
        assert self.only is None, "arrays built for some hours of day only"
        rows = len(self.targets) * 24
        return Window(**self.mapped(lambda v: v.reshape(rows, *v.shape[2:])))

    def take(self, idx: npt.NDArray[np.intp]) -> HourArrays:
        """Only the series `idx`."""
        return HourArrays(**self.mapped(lambda v: v[idx]), targets=[self.targets[i] for i in idx],
                          only=self.only)


@dataclass(slots=True)
class Window(_Parts):
    """Per series (row i of every array): its hour rows merged."""

    def quantiles(self, qs: Sequence[float]) -> F64:
        """[n, len(qs)]: each series' quantiles by quantile_rows, clamped to its exact min/max."""
        return quantile_rows(self.pos_lo, self.pos, self.neg_lo, self.neg, self.zero, qs, self.ext[:, 0],
                             self.ext[:, 1])

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


def bin_values(lo: int, width: int) -> F64:
    """The value DDSketch gives each key lo … lo + width − 1 in the default mapping (cached)."""
    return np.fromiter((_value(key) for key in range(lo, lo + width)), np.float64, width)


@cache
def _value(key: int) -> float:
    return float(sketches.MAPPING.value(key))


def quantile_rows(pos_lo: int, pos: F64, neg_lo: int, neg: F64, zero: F64, qs: Sequence[float],
                  lo: F64, hi: F64) -> F64:
    """[rows, len(qs)]: DDSketch.get_quantile_value of each row's sketch (bins pos [rows, W] from key
    pos_lo, neg likewise, the zero count), clamped to the row's exact [lo, hi] where both are known
    (not NaN); NaN for a row without a count. DDSketch's rule: rank q·(count − 1); below the negative
    store's count, the negated value of the first negative bin whose running count reaches
    (its count − rank); then zero; else the value of the first positive bin whose running count
    exceeds rank − zero − negatives. Running counts are the left-to-right sums DenseStore.key_at_rank
    makes."""
    rows = len(zero)
    out = np.full((rows, len(qs)), np.nan)
    if rows == 0:
        return out
    run_pos, run_neg = np.cumsum(pos, axis=1), np.cumsum(neg, axis=1)
    n_pos = run_pos[:, -1] if pos.shape[1] else np.zeros(rows)
    n_neg = run_neg[:, -1] if neg.shape[1] else np.zeros(rows)
    count = zero + n_neg + n_pos
    v_pos = bin_values(pos_lo, pos.shape[1])
    v_neg = -bin_values(neg_lo, neg.shape[1])
    clamp = ~(np.isnan(lo) | np.isnan(hi))
    for j, q in enumerate(qs):
        rank = q * (count - 1)
        v = np.zeros(rows)
        if pos.shape[1]:
            at = (run_pos <= (rank - zero - n_neg)[:, None]).sum(axis=1)
            v = v_pos[np.minimum(at, pos.shape[1] - 1)]
        if neg.shape[1]:
            # reversed rank + 1, as key_at_rank(lower=False) rounds it
            at = (run_neg < ((n_neg - rank - 1) + 1)[:, None]).sum(axis=1)
            v = np.where(rank < n_neg, v_neg[np.minimum(at, neg.shape[1] - 1)], v)
        v = np.where((rank >= n_neg) & (rank < zero + n_neg), 0.0, v)
        v = np.where(clamp, np.minimum(np.maximum(v, lo), hi), v)
        out[:, j] = np.where(count != 0, v, np.nan)
    return out


class Runs:
    """Runs of bins (row, first key, counts) gathered flat, laid into one [rows, W] array at the end."""

    __slots__ = ("counts", "lens", "offs", "rows")

    def __init__(self) -> None:
        self.rows: list[int] = []
        self.offs: list[int] = []
        self.lens: list[int] = []
        self.counts: list[float] = []

    def add(self, row: int, first: int, counts: list[float]) -> None:
        self.rows.append(row)
        self.offs.append(first)
        self.lens.append(len(counts))
        self.counts += counts

    def dense(self, n: int) -> tuple[int, F64]:
        if not self.rows:
            return 0, np.zeros((n, 0))
        offs, lens = np.array(self.offs, np.int64), np.array(self.lens, np.int64)
        first = int(offs.min())
        width = int((offs + lens).max()) - first
        base = np.array(self.rows, np.int64) * width + offs - first
        starts = np.cumsum(lens) - lens
        idx = np.repeat(base - starts, lens) + np.arange(int(lens.sum()))
        dense: F64 = np.bincount(idx, weights=np.array(self.counts, np.float64),
                                 minlength=n * width).astype(np.float64)
        return first, dense.reshape(n, width)


def stacked(sums: Sequence[Sums], lo: Sequence[float | None], hi: Sequence[float | None]) -> Window:
    """Each of `sums` as a series of one window (its bins laid on one key range), its exact min/max
    `lo[i]`, `hi[i]`."""
    n = len(sums)
    pos, neg = Runs(), Runs()
    for i, s in enumerate(sums):
        if s.pos:
            pos.add(i, s.pos_off, s.pos)
        if s.neg:
            neg.add(i, s.neg_off, s.neg)
    pos_lo, pos_bins = pos.dense(n)
    neg_lo, neg_bins = neg.dense(n)
    ext = np.full((n, 4), np.nan)
    ext[:, 0] = [np.nan if v is None else v for v in lo]
    ext[:, 1] = [np.nan if v is None else v for v in hi]
    counters = np.array([s.c for s in sums], np.float64).reshape(n, NC)
    zero = np.array([float(s.zero) for s in sums])
    hours = np.array([s.hours for s in sums], np.int64)
    return Window(hours, counters, zero, pos_lo, pos_bins, neg_lo, neg_bins, {}, ext)


def figures(sums: Sequence[Sums], lo: Sequence[float | None],
            hi: Sequence[float | None]) -> list[dict[str, Any]]:
    """Rollup.figures of each `sums[i].rollup(lo[i], hi[i])`, the quantiles of all of them by one
    quantile_rows (no sketch built)."""
    qs = stacked(sums, lo, hi).quantiles((0.50, 0.95, 0.99)) if sums else np.zeros((0, 3))
    out = []
    for s, a, b, q in zip(sums, lo, hi, qs, strict=True):
        f = s.rollup(a, b, sketch=False).figures()
        f["rtt_p50_ms"], f["rtt_p95_ms"], f["rtt_p99_ms"] = map(_none, q)
        out.append(f)
    return out


__all__ = [
    "Builder",
    "HourArrays",
    "Runs",
    "Window",
    "bin_values",
    "combine",
    "decode_extremes",
    "figures",
    "quantile_rows",
    "stacked",
]
