"""One agent × target over a span, as the dashboard's target page asks for it: who the pair is, which
probes measured it, and each probe's hour rows decoded into NumPy arrays, merged into any grouping of
hours (a chart's buckets, the whole span, the evening peak) as hour_arrays.Window, whose quantiles
follow DDSketch's rule on the merged bins (the merged sketch's, not an average of hours' quantiles).

Plain SQL (netprobe.store.reads); the hour rows are one range of the rollups' primary key per probe."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np
import numpy.typing as npt
import orjson

from netprobe.store import sketch as sketches
from netprobe.store.fleet import AgentInfo, TargetInfo
from netprobe.store.hour_arrays import Window
from netprobe.store.prefix import COUNTERS
from netprobe.store.reads import Source, utc

F64 = npt.NDArray[np.float64]
_MAPPING = sketches.new_sketch()._mapping
_NC = len(COUNTERS)


@dataclass(frozen=True, slots=True)
class Pair:
    agent: AgentInfo
    target: TargetInfo


_PAIR = ("SELECT a.id, a.region, a.isp, a.timezone, t.id, t.host, t.datacenter, t.line,"
         " (EXISTS (SELECT 1 FROM rollups_hourly r WHERE r.agent_id = a.id AND r.target_id = t.id)"
         "  OR EXISTS (SELECT 1 FROM path_changes p WHERE p.agent_id = a.id AND p.target_id = t.id))"
         " FROM agents a, targets t WHERE a.id = %(a)s AND t.id = %(t)s")


async def pair(store: Source, agent_id: str, target_id: str) -> Pair | None:
    """The agent and target on record, when the agent has measured the target (hour rows or route
    events); None otherwise."""
    async with store.reading("reading agents and targets from") as conn:
        rows = await conn.fetch(_PAIR, {"a": agent_id, "t": target_id})
    if not rows or not rows[0][8]:
        return None
    r = rows[0]
    return Pair(AgentInfo(r[0], r[1], r[2], r[3]), TargetInfo(r[4], r[5], r[6] or None, r[7] or None))


async def probes_measured(store: Source, agent_id: str, target_id: str, start: datetime,
                          end: datetime) -> dict[str, int]:
    """Hour rows per probe of the pair in [start, end)."""
    async with store.reading("reading rollups from") as conn:
        rows = await conn.fetch(
            "SELECT probe, count(*) FROM rollups_hourly WHERE agent_id = %(a)s AND target_id = %(t)s"
            " AND hour >= %(start)s AND hour < %(end)s GROUP BY probe",
            {"a": agent_id, "t": target_id, "start": start, "end": end})
    return {p: int(n) for p, n in rows}


@dataclass(slots=True)
class HourSeries:
    """One probe's hour rows (row i is the hour starting at `starts[i]`, epoch seconds): counters
    [rows, NC] (prefix.COUNTERS), exact min/max (NaN without RTT samples), sketch bins [rows, W]
    (pos[i, j] counts key pos_lo + j; neg likewise), zero counts, extras name → [rows, 2]."""

    starts: F64
    c: F64
    lo: F64
    hi: F64
    zero: F64
    pos_lo: int
    pos: F64
    neg_lo: int
    neg: F64
    extras: dict[str, F64]

    def merged(self, group: npt.NDArray[np.intp], n: int) -> Window:
        """The rows merged into n groups: row i into group[i] (−1: none). A group's sketch is the sum
        of its hours' bins, as DDSketch.merge adds them."""
        keep = (group >= 0) & (group < n)
        g = group[keep]
        ext = np.full((n, 4), np.nan)
        np.fmin.at(ext[:, 0], g, self.lo[keep])
        np.fmax.at(ext[:, 1], g, self.hi[keep])
        return Window(np.bincount(g, minlength=n).astype(np.int64), _sum(self.c[keep], g, n),
                      _sum(self.zero[keep], g, n), self.pos_lo, _sum(self.pos[keep], g, n), self.neg_lo,
                      _sum(self.neg[keep], g, n), {k: _sum(v[keep], g, n) for k, v in self.extras.items()},
                      ext)


def _sum(a: F64, g: npt.NDArray[np.intp], n: int) -> F64:
    """Rows of `a` added up by group (sorted once, one reduceat: np.add.at is slow on wide rows)."""
    out = np.zeros((n, *a.shape[1:]))
    if not len(g):
        return out
    order = np.argsort(g, kind="stable")
    sg = g[order]
    firsts = np.flatnonzero(np.r_[True, sg[1:] != sg[:-1]])
    if a.ndim == 2 and a.shape[1] == 0:
        return out
    out[sg[firsts]] = np.add.reduceat(a[order], firsts, axis=0)
    return out


_COLS = ("hour", *COUNTERS, "rtt_min", "rtt_max", "sketch", "extras")


async def hour_series(store: Source, agent_id: str, target_id: str, probes: Sequence[str], start: datetime,
                      end: datetime) -> dict[str, HourSeries]:
    """Each of `probes`' hour rows of the pair in [start, end), decoded; a probe without rows is left
    out."""
    out: dict[str, HourSeries] = {}
    async with store.reading("reading rollups from") as conn:
        for probe in probes:
            rows = await conn.fetch(
                f"SELECT {', '.join(_COLS)} FROM rollups_hourly WHERE agent_id = %(a)s AND target_id = %(t)s"
                " AND probe = %(p)s AND hour >= %(start)s AND hour < %(end)s ORDER BY hour",
                {"a": agent_id, "t": target_id, "p": probe, "start": start, "end": end})
            if rows:
                out[probe] = _decode(rows)
    return out


def _decode(rows: Sequence[tuple[object, ...]]) -> HourSeries:
    n = len(rows)
    starts = np.fromiter((utc(r[0]).timestamp() for r in rows), np.float64, n)
    c = np.array([r[1:1 + _NC] for r in rows], np.float64).reshape(n, _NC)
    n_rtt = c[:, COUNTERS.index("rtt_count")]
    lo = np.array([np.nan if r[1 + _NC] is None else r[1 + _NC] for r in rows], np.float64)
    hi = np.array([np.nan if r[2 + _NC] is None else r[2 + _NC] for r in rows], np.float64)
    lo[n_rtt == 0] = np.nan
    hi[n_rtt == 0] = np.nan
    zero = np.zeros(n)
    pos: list[tuple[int, int, list[float]]] = []      # (row, first key, counts)
    neg: list[tuple[int, int, list[float]]] = []
    extras: dict[str, F64] = {}
    for i, r in enumerate(rows):
        text, more = r[3 + _NC], r[4 + _NC]
        if text:
            p_off, p, n_off, nb, z = _bins(str(text))
            if p:
                pos.append((i, p_off, p))
            if nb:
                neg.append((i, n_off, nb))
            zero[i] = z
        if more:
            for name, (total, count) in orjson.loads(str(more)).items():
                slot = extras.get(name)
                if slot is None:
                    slot = extras[name] = np.zeros((n, 2))
                slot[i] = (total, count)
    pos_lo, pos_bins = _dense(pos, n)
    neg_lo, neg_bins = _dense(neg, n)
    return HourSeries(starts, c, lo, hi, zero, pos_lo, pos_bins, neg_lo, neg_bins, extras)


def _bins(text: str) -> tuple[int, list[float], int, list[float], float]:
    """A stored sketch's bins in the default mapping's keys (first key and counts of each store, and
    the zero count). One written with another mapping has its bins' values re-keyed."""
    d = orjson.loads(text)
    if d.get("v") == sketches.FORMAT and d.get("gamma") == _MAPPING.gamma \
            and d.get("index_offset") == _MAPPING._offset:
        p, q = d["pos"], d["neg"]
        return p["offset"], p["counts"], q["offset"], q["counts"], float(d["zero"])
    foreign = sketches.loads(text)
    out: list[tuple[int, list[float]]] = []
    for store in (foreign._store, foreign._negative_store):
        keys: dict[int, float] = {}
        for j, count in enumerate(store.bins):
            if count:
                key = _MAPPING.key(foreign._mapping.value(store.offset + j))
                keys[key] = keys.get(key, 0.0) + count
        if not keys:
            out.append((0, []))
            continue
        first = min(keys)
        out.append((first, [keys.get(k, 0.0) for k in range(first, max(keys) + 1)]))
    return out[0][0], out[0][1], out[1][0], out[1][1], float(foreign._zero_count)


def _dense(runs: Sequence[tuple[int, int, list[float]]], n: int) -> tuple[int, F64]:
    """Runs of bins (row, first key, counts) laid into one [n, W] array: one bincount."""
    if not runs:
        return 0, np.zeros((n, 0))
    first = min(off for _, off, _ in runs)
    width = max(off + len(b) for _, off, b in runs) - first
    lens = np.fromiter((len(b) for *_, b in runs), np.int64, len(runs))
    base = np.fromiter((row * width + off - first for row, off, _ in runs), np.int64, len(runs))
    starts = np.cumsum(lens) - lens
    idx = np.repeat(base - starts, lens) + np.arange(int(lens.sum()))
    values = np.fromiter((v for *_, b in runs for v in b), np.float64, int(lens.sum()))
    dense: F64 = np.bincount(idx, weights=values, minlength=n * width).astype(np.float64)
    return first, dense.reshape(n, width)


__all__ = ["HourSeries", "Pair", "hour_series", "pair", "probes_measured"]
