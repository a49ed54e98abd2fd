"""One agent × target over a span, as the dashboard's target page asks for it: who the pair is, and
each probe's hour rows decoded into NumPy arrays, merged into any grouping of hours (a chart's
buckets, the whole span, the evening peak) as hour_arrays.Window, whose quantiles
follow DDSketch's rule on the merged bins (the merged sketch's, not an average of hours' quantiles).

Plain SQL (netprobe.store.reads); the hour rows are one range of the rollups' primary key per probe."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date, datetime, time
from zoneinfo import ZoneInfo

import numpy as np
import numpy.typing as npt
import orjson

from netprobe.store import sketch as sketches
from netprobe.store.fleet import AgentInfo, TargetInfo
from netprobe.store.hour_arrays import HourArrays, Runs, Window
from netprobe.store.prefix import COUNTERS, day_folded, midnight
from netprobe.store.reads import Source, utc

F64 = npt.NDArray[np.float64]
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


@dataclass(slots=True)
class HourSeries:
    """One probe's hour rows: row i is the hour starting at `starts[i]` (epoch seconds), and `rows`
    holds each as a window of its own (hours 1; extremes: its exact min and max, NaN without RTT
    samples)."""

    starts: F64
    rows: Window

    def merged(self, group: npt.NDArray[np.intp], n: int) -> Window:
        """The rows merged into n groups: row i into group[i] (−1: none). A group's sketch is the sum
        of its hours' bins, as DDSketch.merge adds them."""
        w = self.rows
        keep = (group >= 0) & (group < n)
        g = group[keep]
        ext = np.full((n, 4), np.nan)
        np.fmin.at(ext[:, 0], g, w.ext[keep, 0])
        np.fmax.at(ext[:, 1], g, w.ext[keep, 1])
        hours = np.bincount(g, minlength=n).astype(np.int64)
        return Window(**w.mapped(lambda v: _sum(v[keep], g, n), hours=hours, ext=ext))


@dataclass(slots=True)
class DaySeries:
    """One probe's local days from the prefix rollups: `days` (day d: row(d) − row(d − 1), by local hour
    of day) up to `until` (the newest row's end; the hours after it are not in them)."""

    days: HourArrays            # series: the local dates, ISO
    until: datetime

    def merged(self, zone: ZoneInfo, bucket_of: Callable[[F64], npt.NDArray[np.intp]], n: int) -> Window:
        """Each (day, local hour) into the group of its start's instant (bucket_of: epoch → group)."""
        starts = np.array([datetime.combine(date.fromisoformat(d), time(h), tzinfo=zone).timestamp()
                           for d in self.days.targets for h in range(24)])
        cells = HourSeries(starts, self.days.each_hour())
        return cells.merged(bucket_of(starts), n)


async def day_series(store: Source, agent_id: str, target_id: str, probe: str, zone: ZoneInfo, first: date,
                     end: datetime) -> DaySeries | None:
    """The local days from `first` of one probe, from its prefix rows (a row per day, not 24 hour
    rows): each day's row less the row before it (none before a series' first day); None when they
    cannot give them whole (rows before `first` but none ending the day before it, a gap, rows of
    another zone, a row past `end`): the caller reads the hours instead."""
    from netprobe.store.hour_arrays import Builder

    base = midnight(first, zone)
    key = {"a": agent_id, "t": target_id, "p": probe, "base": base}
    where = "agent_id = %(a)s AND target_id = %(t)s AND probe = %(p)s"
    async with store.reading("reading prefix rollups from") as conn:
        rows = await conn.fetch("SELECT folded_until, zone, payload, l0 FROM rollups_prefix"
                                f" WHERE {where} AND folded_until >= %(base)s ORDER BY folded_until", key)
        fus = [utc(r[0]) for r in rows]
        # no row ending the day before `first`: the series must have begun since (its first row is
        # its first day's), else rows are missing
        begun = bool(rows) and fus[0] != base and not await conn.fetch(
            f"SELECT 1 FROM rollups_prefix WHERE {where} AND folded_until < %(base)s LIMIT 1", key)
    if not rows or (fus[0] != base and not begun) or fus[-1] > end or any(r[1] != zone.key for r in rows):
        return None
    b = Builder()
    for k in range(0 if begun else 1, len(rows)):
        day = day_folded(fus[k], zone)
        b.add_payload(day.isoformat(), bytes(rows[k][2]), 1.0)
        if k:
            if fus[k - 1] != midnight(day, zone):      # the row before must end the day before
                return None
            b.add_payload(day.isoformat(), bytes(rows[k - 1][2]), -1.0)
        b.add_stored_extremes(day.isoformat(), bytes(rows[k][3]) if rows[k][3] else None)
    return DaySeries(b.build(), fus[-1])


def added(a: Window, b: Window) -> Window:
    """Two groupings of the same groups, added (bins laid on one key range)."""
    def bins(lo_a: int, x: F64, lo_b: int, y: F64) -> tuple[int, F64]:
        if not x.shape[1]:
            return lo_b, y.copy()
        if not y.shape[1]:
            return lo_a, x.copy()
        lo, hi = min(lo_a, lo_b), max(lo_a + x.shape[1], lo_b + y.shape[1])
        out = np.zeros((x.shape[0], hi - lo))
        out[:, lo_a - lo:lo_a - lo + x.shape[1]] += x
        out[:, lo_b - lo:lo_b - lo + y.shape[1]] += y
        return lo, out

    pos_lo, pos = bins(a.pos_lo, a.pos, b.pos_lo, b.pos)
    neg_lo, neg = bins(a.neg_lo, a.neg, b.neg_lo, b.neg)
    extras = {k: a.extras.get(k, 0.0) + b.extras.get(k, 0.0) for k in a.extras.keys() | b.extras.keys()}
    ext = np.full(a.ext.shape, np.nan)
    ext[:, 0] = np.fmin(a.ext[:, 0], b.ext[:, 0])
    ext[:, 1] = np.fmax(a.ext[:, 1], b.ext[:, 1])
    return Window(a.hours + b.hours, a.c + b.c, a.zero + b.zero, pos_lo, pos, neg_lo, neg,
                  {k: np.asarray(v, np.float64) for k, v in extras.items()}, ext)


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


_COLS = (*COUNTERS, "rtt_min", "rtt_max", "sketch", "extras")
# the hour's start in epoch seconds, computed by the database: no datetime per row on the way
_EPOCH = {"postgresql": "CAST(extract(epoch FROM hour) AS double precision)",
          "sqlite": "CAST(strftime('%s', hour) AS REAL)"}


async def hour_series(store: Source, agent_id: str, target_id: str, probes: Sequence[str], start: datetime,
                      end: datetime) -> dict[str, HourSeries]:
    """Each of `probes`' hour rows of the pair in [start, end), decoded; a probe without rows is left
    out. One statement: the primary key's range of each probe."""
    if not probes:
        return {}
    async with store.reading("reading rollups from") as conn:
        rows = await conn.fetch(
            f"SELECT probe, {_EPOCH[store.dialect]}, {', '.join(_COLS)} FROM rollups_hourly"
            " WHERE agent_id = %(a)s AND target_id = %(t)s AND probe IN %(p)s"
            " AND hour >= %(start)s AND hour < %(end)s ORDER BY probe, hour",
            {"a": agent_id, "t": target_id, "p": list(probes), "start": start, "end": end})
    by_probe: dict[str, list[tuple[object, ...]]] = {}
    for r in rows:
        by_probe.setdefault(str(r[0]), []).append(r)
    return {p: _decode(by_probe[p]) for p in probes if p in by_probe}


def _floats(values: Sequence[object]) -> F64:
    return np.array([np.nan if v is None else v for v in values], np.float64)


def _decode(rows: Sequence[tuple[object, ...]]) -> HourSeries:
    """Rows (probe, epoch, *_COLS) as arrays. The sketches' JSON is parsed in one call (a JSON array of
    them all); each store's counts go into one flat list, laid out in one bincount (_dense)."""
    n = len(rows)
    cols = list(zip(*rows, strict=True))
    starts = np.array(cols[1], np.float64)
    c = np.array(cols[2:2 + _NC], np.float64).T.reshape(n, _NC)
    n_rtt = c[:, COUNTERS.index("rtt_count")]
    lo, hi = _floats(cols[2 + _NC]), _floats(cols[3 + _NC])
    lo[n_rtt == 0] = np.nan
    hi[n_rtt == 0] = np.nan
    texts, more = cols[4 + _NC], cols[5 + _NC]
    zero = np.zeros(n)
    pos = Runs()
    neg = Runs()
    with_sketch = [i for i, t in enumerate(texts) if t]
    docs = orjson.loads("[" + ",".join([str(texts[i]) for i in with_sketch]) + "]") if with_sketch else []
    for i, d in zip(with_sketch, docs, strict=True):
        try:
            p_off, p_counts, n_off, n_counts, z = sketches.stored_bins(d)
        except sketches.ForeignSketch:
            p_off, p_counts, n_off, n_counts, z = _foreign(str(texts[i]))
        if p_counts:
            pos.add(i, p_off, p_counts)
        if n_counts:
            neg.add(i, n_off, n_counts)
        zero[i] = z
    extras: dict[str, F64] = {}
    with_extras = [i for i, t in enumerate(more) if t]
    if with_extras:
        found = orjson.loads("[" + ",".join([str(more[i]) for i in with_extras]) + "]")
        for i, e in zip(with_extras, found, strict=True):
            for name, (total, count) in e.items():
                slot = extras.get(name)
                if slot is None:
                    slot = extras[name] = np.zeros((n, 2))
                slot[i] = (total, count)
    pos_lo, pos_bins = pos.dense(n)
    neg_lo, neg_bins = neg.dense(n)
    ext = np.full((n, 4), np.nan)
    ext[:, 0], ext[:, 1] = lo, hi
    each = Window(np.ones(n, np.int64), c, zero, pos_lo, pos_bins, neg_lo, neg_bins, extras, ext)
    return HourSeries(starts, each)


def _foreign(text: str) -> tuple[int, list[float], int, list[float], float]:
    """A sketch written with another mapping: its bins' values re-keyed in the default mapping (first
    key and counts of each store, and the zero count)."""
    foreign = sketches.loads(text)
    out: list[tuple[int, list[float]]] = []
    for store in (foreign._store, foreign._negative_store):
        keys: dict[int, float] = {}
        for j, count in enumerate(store.bins):
            if count:
                key = sketches.MAPPING.key(foreign._mapping.value(store.offset + j))
                keys[key] = keys.get(key, 0.0) + count
        if not keys:
            out.append((0, []))
            continue
        first = min(keys)
        out.append((first, [keys.get(k, 0.0) for k in range(first, max(keys) + 1)]))
    return out[0][0], out[0][1], out[1][0], out[1][1], float(foreign._zero_count)


__all__ = ["DaySeries", "HourSeries", "Pair", "added", "day_series", "hour_series", "pair"]
