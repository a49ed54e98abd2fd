"""Prefix rollups: a report over any run of local days costs a few rows per series, not one per hour.

For each agent × target × probe, the fold writes one row per local day (in the agent's zone) from the
first day with data on: `folded_until` is the local midnight ending that day (or, for the newest row,
the last folded hour), and the row holds, per local hour of day (0–23):

- the *sums* of every hour before `folded_until` (counters, sketch bins, extras): counts subtract, so
  the days [first, last] are row(last) − row(first − 1);
- for min, max and the worst hour, which do not subtract, a sparse table: level k holds them over the
  2^k days ending with the row's day, so any run of n days is two overlapping lookups at
  k = ⌊log₂ n⌋ (columns l0…l9: runs of up to 1,024 days).

Hours are folded once they are over (FOLD_LAG); a write into an hour that is already folded deletes
the series' rows from that hour on (Store.write), and the next fold rebuilds them. Readers add the
hours after the newest row from `rollups_hourly`, so what they see is always exact.
"""

from __future__ import annotations

import struct
import sys
from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from functools import reduce
from operator import add, sub
from typing import Any
from zoneinfo import ZoneInfo

import orjson
from ddsketch import DDSketch
from ddsketch.ddsketch import BaseDDSketch
from ddsketch.store import DenseStore

from netprobe.store import sketch as sketches
from netprobe.store.rollups import HOUR, Rollup, hour_of
from netprobe.store.sketch import add_bins, stored_bins, total_bins, trim

LEVELS = 10                                   # 1, 2, 4, … 512 days
FOLD_LAG = timedelta(hours=1)                 # an hour is folded once it has been over this long
COUNTERS = ("rounds", "error_rounds", "sent", "received", "duplicates", "loss_pct_sum", "loss_rounds",
             "rtt_sum", "rtt_count", "jitter_sum", "jitter_count")
_INTS = frozenset(("rounds", "error_rounds", "sent", "received", "duplicates", "loss_rounds", "rtt_count",
                   "jitter_count"))


@dataclass(slots=True)
class Sums:
    """One local hour of day's additive figures over some set of hours."""

    hours: int = 0
    c: list[float] = field(default_factory=lambda: [0.0] * len(COUNTERS))
    pos_off: int = 0
    pos: list[float] = field(default_factory=list)
    neg_off: int = 0
    neg: list[float] = field(default_factory=list)
    zero: float = 0.0
    extras: dict[str, list[float]] = field(default_factory=dict)

    def add_row(self, row: Mapping[Any, Any]) -> None:
        """One more rollups_hourly row, straight from its columns and sketch JSON: no DDSketch built."""
        self.hours += 1
        c = self.c
        for i, name in enumerate(COUNTERS):
            c[i] += row[name]
        text = row["sketch"]
        if text:
            p_off, p, n_off, n, zero = stored_bins(orjson.loads(text))
            self.pos_off, self.pos = add_bins(self.pos_off, self.pos, p_off, p)
            self.neg_off, self.neg = add_bins(self.neg_off, self.neg, n_off, n)
            self.zero += zero
        if row.get("extras"):
            for name, (total, n) in orjson.loads(row["extras"]).items():
                slot = self.extras.setdefault(name, [0.0, 0])
                slot[0] += total
                slot[1] += n

    def add(self, other: Sums, sign: float = 1.0) -> None:
        """self + sign·other, sign ±1 (map(sub) is adding the negated figures, exactly)."""
        op = add if sign > 0 else sub
        self.hours = op(self.hours, other.hours)
        self.c = list(map(op, self.c, other.c))
        if other.pos:
            self.pos_off, self.pos = add_bins(self.pos_off, self.pos, other.pos_off, other.pos, sign)
        if other.neg:
            self.neg_off, self.neg = add_bins(self.neg_off, self.neg, other.neg_off, other.neg, sign)
        if other.zero:
            self.zero = op(self.zero, other.zero)
        for name, (total, n) in other.extras.items():
            slot = self.extras.setdefault(name, [0.0, 0])
            slot[0] = op(slot[0], total)
            slot[1] = op(slot[1], n)
        if sign < 0:
            self.pos_off, self.pos = trim(self.pos_off, self.pos)
            self.neg_off, self.neg = trim(self.neg_off, self.neg)
            if self.extras:
                self.extras = {k: v for k, v in self.extras.items() if v[1]}

    @classmethod
    def total(cls, parts: Sequence[Sums]) -> Sums:
        """The sum of `parts`, as adding them one by one onto Sums() gives it (the same additions in
        the same order), but each bin range laid out once."""
        columns = zip(*(p.c for p in parts), strict=True)
        out = cls(hours=sum(p.hours for p in parts), c=[reduce(add, col, 0.0) for col in columns])
        out.pos_off, out.pos = total_bins([(p.pos_off, p.pos) for p in parts if p.pos])
        out.neg_off, out.neg = total_bins([(p.neg_off, p.neg) for p in parts if p.neg])
        out.zero = reduce(add, (p.zero for p in parts), 0.0)
        for p in parts:
            for name, (total, n) in p.extras.items():
                slot = out.extras.setdefault(name, [0.0, 0])
                slot[0] += total
                slot[1] += n
        return out

    def copy(self) -> Sums:
        return Sums(self.hours, list(self.c), self.pos_off, list(self.pos), self.neg_off, list(self.neg),
                    self.zero, {k: list(v) for k, v in self.extras.items()})

    def rollup(self, lo: float | None, hi: float | None, sketch: bool = True) -> Rollup:
        """The Rollup these sums stand for, with the exact min/max the caller knows (`sketch=False`:
        without the sketch, for the counters alone)."""
        values: dict[str, Any] = {}
        for name, v in zip(COUNTERS, self.c, strict=True):
            values[name] = round(v) if name in _INTS else v
        r = Rollup(**values, rtt_min=lo, rtt_max=hi)
        r.extras = {k: [v[0], round(v[1])] for k, v in self.extras.items()}
        if sketch and (self.pos or self.neg or self.zero):
            r.sketch = _sketch(self.pos_off, self.pos, self.neg_off, self.neg, self.zero)
        return r


def _store(off: int, bins: list[float]) -> DenseStore:
    store = DenseStore()
    if bins:
        store.bins = list(bins)
        store.offset = off
        store.min_key = off
        store.max_key = off + len(bins) - 1
        store.count = sum(bins)
    return store


def _sketch(pos_off: int, pos: list[float], neg_off: int, neg: list[float], zero: float) -> DDSketch:
    # The one mapping, shared (it is never changed): building a mapping per sketch was most of the cost.
    s: DDSketch = DDSketch.__new__(DDSketch)
    BaseDDSketch.__init__(s, sketches.MAPPING, _store(pos_off, pos), _store(neg_off, neg), zero)
    return s


# -- min, max and the worst hour: what does not subtract ------------------------------------------------
Extremes = list[Any]     # [rtt_min | None, rtt_max | None, worst_loss | None, worst_hour_epoch | None]


def extremes_of(row: Mapping[Any, Any]) -> Extremes:
    """Of one rollups_hourly row: its min, max, and its loss as a worst-hour candidate."""
    sent, received, n = row["sent"], row["received"], row["rtt_count"]
    loss = 100.0 * (sent - received) / sent if sent else None     # as netprobe.stats.loss_pct
    return [row["rtt_min"] if n else None, row["rtt_max"] if n else None,
            loss, row["hour"].timestamp() if loss is not None else None]


def combine(a: Extremes | None, b: Extremes | None) -> Extremes | None:
    """Min of mins, max of maxes, and the worst hour: most loss, the earliest of equals."""
    if a is None:
        return b
    if b is None:
        return a
    lo = b[0] if a[0] is None else a[0] if b[0] is None else min(a[0], b[0])
    hi = b[1] if a[1] is None else a[1] if b[1] is None else max(a[1], b[1])
    if a[2] is None:
        w = b[2:]
    elif b[2] is None:
        w = a[2:]
    elif a[2] != b[2]:
        w = a[2:] if a[2] > b[2] else b[2:]
    else:
        w = a[2:] if a[3] <= b[3] else b[2:]
    return [lo, hi, *w]


# -- rows --------------------------------------------------------------------------------------------------
def midnight(day: date, zone: ZoneInfo) -> datetime:
    """UTC instant of the local midnight that starts `day`."""
    return datetime.combine(day, time(), tzinfo=zone).astimezone(UTC)


def local_day(hour: datetime, zone: ZoneInfo) -> date:
    return hour.astimezone(zone).date()


def day_folded(folded_until: datetime, zone: ZoneInfo) -> date:
    """The local day a row folded until `folded_until` ends (or, partial, is within)."""
    return local_day(folded_until - timedelta(microseconds=1), zone)


@dataclass(slots=True)
class PrefixRow:
    """One stored row, decoded."""

    folded_until: datetime
    day: date                                     # the local day it ends (or, partial, is within)
    sums: dict[int, Sums] | None                  # None: not fetched
    levels: dict[int, dict[int, Extremes]]        # level -> local hour -> extremes (fetched levels only)

    def partial(self, zone: ZoneInfo) -> bool:
        """Whether the row ends inside its day (the newest row, folded up to the last folded hour)."""
        return self.folded_until != midnight(self.day + timedelta(days=1), zone)


# -- the stored form: little-endian binary, read by NumPy without a parse (store/hour_arrays.py) -------
# sums:  magic "NPS1", u8 flags (1: bins as int32, else float64), u8 counters, u16 extras, u16 names' bytes,
#        the extras' names (JSON list), then per local hour 0–23: int64 hours, float64 counters, float64 zero,
#        float64 [total, n] per extra, int32 pos offset and length, int32 neg offset and length, and last
#        the pos bins of hours 0–23 back to back, then the neg bins.
# level: float64 [24, 4] (min, max, worst loss, worst hour's epoch), NaN for none.
SUMS_MAGIC = b"NPS1"
SUMS_HEAD = struct.Struct("<4sBBHH")
SUMS_INT_BINS = 1


def _le(a: array[Any]) -> bytes:
    if sys.byteorder != "little":
        a = array(a.typecode, a)
        a.byteswap()
    return a.tobytes()


def _from_le(typecode: str, data: bytes | memoryview) -> array[Any]:
    a = array(typecode)
    a.frombytes(data)
    if sys.byteorder != "little":
        a.byteswap()
    return a


def encode_sums(sums: Mapping[int, Sums]) -> bytes:
    names = sorted({n for s in sums.values() for n in s.extras})
    head_names = orjson.dumps(names) if names else b""
    hours, counters, zero, extras, spans = array("q"), array("d"), array("d"), array("d"), array("i")
    pos: list[float] = []
    neg: list[float] = []
    empty = Sums()
    for h in range(24):
        s = sums.get(h, empty)
        hours.append(s.hours)
        counters.extend(map(float, s.c))
        zero.append(float(s.zero))
        for n in names:
            total, k = s.extras.get(n, (0.0, 0))
            extras.extend((float(total), float(k)))
        spans.extend((s.pos_off, len(s.pos), s.neg_off, len(s.neg)))
        pos += s.pos
        neg += s.neg
    try:        # counts are ints as the writers add them; a float anywhere (or a huge count): float64
        bins = array("i", pos + neg)
        ints = True
    except (TypeError, OverflowError):
        bins, ints = array("d", map(float, pos + neg)), False
    return b"".join((SUMS_HEAD.pack(SUMS_MAGIC, SUMS_INT_BINS if ints else 0, len(COUNTERS), len(names),
                                    len(head_names)), head_names,
                     _le(hours), _le(counters), _le(zero), _le(extras), _le(spans), _le(bins)))


def decode_sums(data: bytes) -> dict[int, Sums]:
    """The writer's view of a stored row (the fold resumes from it): Sums per local hour present."""
    magic, flags, nc, ne, nlen = SUMS_HEAD.unpack_from(data)
    if magic != SUMS_MAGIC or nc != len(COUNTERS):
        raise ValueError("not a prefix sums payload of this version")
    at = SUMS_HEAD.size
    names = orjson.loads(data[at:at + nlen]) if nlen else []
    at += nlen
    view = memoryview(data)

    def take(typecode: str, n: int) -> array[Any]:
        nonlocal at
        size = array(typecode).itemsize * n
        out = _from_le(typecode, view[at:at + size])
        at += size
        return out

    hours, counters, zero = take("q", 24), take("d", 24 * nc), take("d", 24)
    extras, spans = take("d", 24 * ne * 2), take("i", 24 * 4)
    total = sum(spans[4 * h + 1] + spans[4 * h + 3] for h in range(24))
    bins = take("i" if flags & SUMS_INT_BINS else "d", total)
    out: dict[int, Sums] = {}
    at_pos = 0
    at_neg = sum(spans[4 * h + 1] for h in range(24))
    for h in range(24):
        pos_off, pos_n, neg_off, neg_n = spans[4 * h:4 * h + 4]
        if hours[h]:
            ex = {n: [extras[(h * ne + i) * 2], extras[(h * ne + i) * 2 + 1]] for i, n in enumerate(names)}
            out[h] = Sums(hours[h], list(counters[h * nc:(h + 1) * nc]), pos_off,
                          list(bins[at_pos:at_pos + pos_n]), neg_off, list(bins[at_neg:at_neg + neg_n]),
                          zero[h], {n: v for n, v in ex.items() if v[1]})
        at_pos += pos_n
        at_neg += neg_n
    return out


_NAN = float("nan")


def encode_level(level: Mapping[int, Extremes]) -> bytes:
    out = array("d", [_NAN] * 96)
    for h, e in level.items():
        out[4 * h:4 * h + 4] = array("d", (_NAN if v is None else float(v) for v in e))
    return _le(out)


def decode_level(data: bytes | None) -> dict[int, Extremes]:
    if not data:
        return {}
    a = _from_le("d", data)
    out: dict[int, Extremes] = {}
    for h in range(24):
        e = [None if v != v else v for v in a[4 * h:4 * h + 4]]
        if any(v is not None for v in e):
            out[h] = e
    return out


def level_for(days: int) -> int:
    """k with 2^k ≤ days < 2^(k+1), capped at the deepest level (longer runs: not covered)."""
    return min(days.bit_length() - 1, LEVELS - 1)


def covers(days: int) -> bool:
    return days <= 2 * (1 << (LEVELS - 1))


class Folder:
    """Builds the rows of one series from its hourly rows, oldest first, resuming after `start`."""

    def __init__(self, zone: ZoneInfo, start: PrefixRow | None,
                 history: Mapping[date, list[dict[int, Extremes]]]) -> None:
        self.zone = zone
        self.cum: dict[int, Sums] = {h: s.copy() for h, s in (start.sums or {}).items()} if start else {}
        # levels of earlier days, by day (every level), for the sparse table of new days
        self.history: dict[date, list[dict[int, Extremes]]] = dict(history)
        self.day: date | None = None
        self.today: dict[int, Extremes] = {}
        if start is not None and start.partial(zone):
            # resuming inside a day: its extremes so far are level 0 of the partial row
            self.day = start.day
            self.today = dict(start.levels.get(0, {}))
        self.out: list[tuple[datetime, date, dict[int, Sums], list[dict[int, Extremes]]]] = []

    def _close(self, day: date, until: datetime) -> None:
        levels: list[dict[int, Extremes]] = [dict(self.today)]
        for k in range(1, LEVELS):
            prev = self.history.get(day - timedelta(days=1 << (k - 1)))
            older = prev[k - 1] if prev is not None else {}
            mine = levels[k - 1]
            merged: dict[int, Extremes] = {}
            for h in set(mine) | set(older):
                e = combine(mine.get(h), older.get(h))
                if e is not None:
                    merged[h] = e
            levels.append(merged)
        self.history[day] = levels
        self.out.append((until, day, {h: s.copy() for h, s in self.cum.items()}, levels))

    def add(self, row: Mapping[Any, Any]) -> None:
        """The next rollups_hourly row of the series (oldest first)."""
        hour: datetime = row["hour"]
        day = local_day(hour, self.zone)
        if self.day is not None and day != self.day:
            self._close(self.day, midnight(self.day + timedelta(days=1), self.zone))
            d = self.day + timedelta(days=1)
            while d < day:        # days without data get their row too: lookups go by day
                self.today = {}
                self._close(d, midnight(d + timedelta(days=1), self.zone))
                d += timedelta(days=1)
            self.today = {}
        self.day = day
        h = hour.astimezone(self.zone).hour
        slot = self.cum.get(h)
        if slot is None:
            slot = self.cum[h] = Sums()
        slot.add_row(row)
        e = combine(self.today.get(h), extremes_of(row))
        if e is not None:
            self.today[h] = e

    def finish(self, until: datetime) -> None:
        """The rows for the days folded; the last one partial unless `until` is its day's end."""
        if self.day is None:
            return
        end = midnight(self.day + timedelta(days=1), self.zone)
        self._close(self.day, min(end, until))


def fold_until(now: datetime) -> datetime:
    return hour_of(now - FOLD_LAG)


__all__ = ["COUNTERS", "FOLD_LAG", "HOUR", "LEVELS", "Extremes", "Folder", "PrefixRow", "Sums", "combine",
           "covers", "day_folded", "decode_level", "decode_sums", "encode_level", "encode_sums",
           "extremes_of", "fold_until", "level_for", "local_day", "midnight"]
